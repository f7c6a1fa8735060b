/**
 * On a PostgreSQL server several processes settle, enqueue and fail
 * deliveries of the same targets at once. Statements that change both a
 * target's deliveries and its health/count row must never deadlock: a
 * settle aborted by a deadlock leaves its deliveries to be sent again once
 * their leases run out (a duplicate without a crash).
 */
import { assert, layer } from "@effect/vitest"
import { Effect } from "effect"
import { SqlClient } from "effect/sql"
import { type Claimed, DeliveryQueue, Outcome } from "../../../src/deliveries/DeliveryQueue.ts"
import { newId } from "../../../src/platform/Ids.ts"
import { boom, ok, QueueLive, serverUrl } from "./support.ts"

const cooldown = { after: 1000, base: "1 minute", cap: "1 minute" } as const

layer(QueueLive, { excludeTestServices: true })("concurrent writers of one target set", (it) => {
  it.effect.skipIf(serverUrl === undefined)(
    "settles over overlapping targets, in opposite orders and beside target failures, never deadlock",
    () =>
      Effect.gen(function*() {
        const queue = yield* DeliveryQueue
        const sql = yield* SqlClient.SqlClient
        const org = newId()
        yield* sql`INSERT INTO orgs (id, name) VALUES (${org}, 'locking-test')`
        const targets = Array.from({ length: 6 }, () => newId())
        for (let round = 0; round < 15; round++) {
          yield* queue.enqueueMany(
            targets.flatMap((targetId) =>
              Array.from({ length: 8 }, () => ({ orgId: org, kind: "webhook" as const, targetId, capacity: 10_000 }))
            )
          )
          const claimed = (yield* queue.claim("webhook", { limit: 1_000, leaseFor: "1 minute", perTarget: 100 }))
            .filter((d) => targets.includes(d.targetId))
          // Batches that each span every target, settled at once from
          // several connections, forwards and backwards, some outcomes
          // failed (target health) and some final (the count).
          const batches: Array<Array<Claimed>> = [[], [], [], []]
          claimed.forEach((d, i) => batches[i % 4]!.push(d))
          const settleBatch = (batch: ReadonlyArray<Claimed>, reverse: boolean) =>
            queue.settleMany((reverse ? [...batch].reverse() : batch).map((claimed, i) => ({
              claimed,
              outcome: i % 2 === 0 ? Outcome.retry("60 seconds", "HTTP 500") : Outcome.delivered(),
              attempt: i % 2 === 0 ? boom : ok,
              cooldown
            })))
          yield* Effect.all([
            settleBatch(batches[0]!, false),
            settleBatch(batches[1]!, true),
            settleBatch(batches[2]!, false),
            settleBatch(batches[3]!, true),
            queue.enqueueMany(
              [...targets].reverse().map((targetId) => ({
                orgId: org,
                kind: "webhook" as const,
                targetId,
                capacity: 10_000
              }))
            ),
            // A target's endpoint is deleted meanwhile.
            queue.failUndelivered("webhook", targets[round % targets.length]!, "endpoint deleted")
          ], { concurrency: "unbounded" })
        }
        for (const id of targets) {
          const [row] = yield* sql<{ kept: number; counted: number }>`
            SELECT (SELECT undelivered FROM delivery_targets WHERE id = ${id}) AS kept,
                   (SELECT count(*)::int FROM delivery_records
                    WHERE target_id = ${id} AND status IN ('queued', 'sending', 'retrying')) AS counted
          `
          assert.strictEqual(row!.kept, row!.counted)
        }
      }),
    { timeout: 120_000 }
  )
})
