/** Batch forms of the queue (added for webhook throughput): same answers as their single forms. */
import { assert, layer } from "@effect/vitest"
import { Effect } from "effect"
import { SqlClient } from "effect/sql"
import { DeliveryQueue, Outcome } from "../../../src/deliveries/DeliveryQueue.ts"
import { newId } from "../../../src/platform/Ids.ts"
import { eventually } from "../../support/http.ts"
import { newOrg, QueueLive } from "./support.ts"

layer(QueueLive, { excludeTestServices: true })("batch enqueue and settle", (it) => {
  it.effect("enqueueMany keeps order and applies capacity per target as repeated enqueue would", () =>
    Effect.gen(function*() {
      const queue = yield* DeliveryQueue
      const org = yield* newOrg
      const a = newId()
      const b = newId()
      yield* queue.enqueue({ orgId: org, kind: "webhook", targetId: a, capacity: 3 })
      const rows = yield* queue.enqueueMany([
        { orgId: org, kind: "webhook", targetId: a, label: "a1", capacity: 3 },
        { orgId: org, kind: "webhook", targetId: b, label: "b1", capacity: 3 },
        { orgId: org, kind: "webhook", targetId: a, label: "a2", capacity: 3 },
        { orgId: org, kind: "webhook", targetId: a, label: "a3", capacity: 3 }
      ])
      assert.deepStrictEqual(rows.map((r) => [r.label, r.status]), [["a1", "queued"], ["b1", "queued"], [
        "a2",
        "queued"
      ], ["a3", "failed"]])
      assert.include(rows[3]!.lastError!, "queue full")
      assert.isTrue(BigInt(rows[0]!.seq) < BigInt(rows[1]!.seq) && BigInt(rows[2]!.seq) < BigInt(rows[3]!.seq))
      assert.deepStrictEqual(yield* queue.enqueueMany([]), [])
    }))

  it.effect("settleMany records each attempt, reports lost leases, and counts failures toward the target's cooldown", () =>
    Effect.gen(function*() {
      const queue = yield* DeliveryQueue
      const sql = yield* SqlClient.SqlClient
      const org = yield* newOrg
      const target = newId()
      yield* queue.enqueueMany(
        [1, 2, 3].map(() => ({ orgId: org, kind: "webhook" as const, targetId: target, capacity: 10 }))
      )
      const claimed = (yield* queue.claim("webhook", { limit: 10, leaseFor: "1 minute", perTarget: 10 })).filter((d) =>
        d.targetId === target
      )
      assert.strictEqual(claimed.length, 3)
      const stale = { ...claimed[2]!, leaseOwner: newId() }
      const { coolingFor, held } = yield* queue.settleMany([
        { claimed: claimed[0]!, outcome: Outcome.delivered(), attempt: { statusCode: 204, durationMs: 3 } },
        {
          claimed: claimed[1]!,
          outcome: Outcome.retry("60 seconds", "HTTP 500"),
          attempt: { statusCode: 500, error: "HTTP 500", responseSnippet: "boom", durationMs: 4 },
          cooldown: { after: 1, base: "10 seconds", cap: "1 minute" }
        },
        { claimed: stale, outcome: Outcome.delivered(), attempt: { durationMs: 1 } }
      ])
      assert.deepStrictEqual(held, [true, true, false])
      assert.deepStrictEqual([...coolingFor.keys()], [target], "the batch says which targets now cool down")
      const list = yield* queue.list({ orgId: org, kind: "webhook", targetId: target })
      const byId = new Map(list.map((d) => [d.id, d]))
      assert.strictEqual(byId.get(claimed[0]!.id)!.status, "delivered")
      assert.isNotNull(byId.get(claimed[0]!.id)!.finishedAt)
      assert.strictEqual(byId.get(claimed[1]!.id)!.status, "retrying")
      assert.strictEqual(byId.get(claimed[2]!.id)!.status, "sending")
      assert.deepStrictEqual((yield* queue.attempts(claimed[1]!.id)).map((a) => [a.statusCode, a.responseSnippet]), [[
        500,
        "boom"
      ]])
      const [health] = yield* sql<{ consecutive_failures: number; cooling: boolean }>`
        SELECT consecutive_failures, cooldown_until > now() AS cooling FROM delivery_targets WHERE id = ${target}
      `
      assert.deepStrictEqual(health, { consecutive_failures: 1, cooling: true })
    }))

  for (const kind of ["webhook", "email"] as const) {
    it.effect(`settleMany with an expired lease and its successor in one batch records only the holder's outcome (${kind})`, () =>
      Effect.gen(function*() {
        const queue = yield* DeliveryQueue
        const sql = yield* SqlClient.SqlClient
        const org = yield* newOrg
        const target = newId()
        yield* queue.enqueue({ orgId: org, kind, targetId: target, capacity: 10 })
        const first = (yield* queue.claim(kind, { limit: 50, leaseFor: "150 millis", perTarget: 10 }))
          .find((d) => d.targetId === target)
        // The first send is still in flight when its lease runs out and the delivery is claimed again.
        const second = yield* eventually(
          queue.claim(kind, { limit: 50, leaseFor: "1 minute", perTarget: 10 }).pipe(
            Effect.map((rows) => rows.find((d) => d.targetId === target))
          ),
          { what: "the expired lease to be claimable" }
        )
        assert.strictEqual(second.id, first!.id)
        // Both finish and land in the same settle batch, the lost lease first.
        const { held } = yield* queue.settleMany([
          {
            claimed: first!,
            outcome: Outcome.failed("HTTP 500"),
            attempt: { statusCode: 500, error: "HTTP 500", durationMs: 5 },
            cooldown: { after: 1, base: "1 minute", cap: "1 minute" }
          },
          { claimed: second, outcome: Outcome.delivered(), attempt: { statusCode: 204, durationMs: 3 } }
        ])
        assert.deepStrictEqual(held, [false, true])
        const [row] = yield* queue.list({ orgId: org, kind, targetId: target })
        assert.strictEqual(row!.status, "delivered")
        assert.deepStrictEqual((yield* queue.attempts(second.id)).map((a) => [a.attempt, a.statusCode]), [[
          kind === "webhook" ? 1 : 2,
          204
        ]])
        // The lost lease's failure counts nowhere: no failure, no cooldown.
        const health = yield* sql<{ consecutive_failures: number; cooldown_until: Date | null }>`
        SELECT consecutive_failures, cooldown_until FROM delivery_targets WHERE id = ${target}
      `
        assert.deepStrictEqual(health, [{ consecutive_failures: 0, cooldown_until: null }])
      }))
  }

  it.effect("failures of attempts in flight when a cooldown began neither count again nor extend it", () =>
    Effect.gen(function*() {
      const queue = yield* DeliveryQueue
      const sql = yield* SqlClient.SqlClient
      const org = yield* newOrg
      const target = newId()
      yield* queue.enqueueMany(
        Array.from({ length: 8 }, () => ({ orgId: org, kind: "webhook" as const, targetId: target, capacity: 10 }))
      )
      const claimed = (yield* queue.claim("webhook", { limit: 10, leaseFor: "1 minute", perTarget: 10 })).filter((d) =>
        d.targetId === target
      )
      assert.strictEqual(claimed.length, 8)
      // The receiver went down: every send in flight fails at once.
      const cooldown = { after: 1, base: "1 minute", cap: "1 hour" } as const
      yield* queue.settleMany(claimed.map((d) => ({
        claimed: d,
        outcome: Outcome.retry("5 seconds", "HTTP 500"),
        attempt: { statusCode: 500, error: "HTTP 500", durationMs: 2 },
        cooldown
      })))
      const [health] = yield* sql<{ consecutive_failures: number; seconds: number }>`
        SELECT consecutive_failures, extract(epoch FROM cooldown_until - now())::float8 AS seconds
        FROM delivery_targets WHERE id = ${target}
      `
      // One round: the base cooldown (1 min), not 1 min × 2^7 capped at an hour.
      assert.strictEqual(health!.consecutive_failures, 1)
      assert.isAtMost(health!.seconds, 61)
      assert.isAbove(health!.seconds, 30)
    }))
})
