/**
 * The queue's bookkeeping that claims and enqueues rely on instead of
 * recounting: the per-target `undelivered` count (kept by triggers), target
 * health written once per settle batch, and giving claimed deliveries back.
 */
import { assert, layer } from "@effect/vitest"
import { Duration, Effect } from "effect"
import { SqlClient } from "effect/sql"
import fc from "fast-check"
import { type Claimed, type CooldownPolicy, DeliveryQueue, Outcome } from "../../../src/deliveries/DeliveryQueue.ts"
import { newId } from "../../../src/platform/Ids.ts"
import { boom, newOrg, ok, QueueLive } from "./support.ts"

type Op =
  | "enqueue"
  | "enqueueMany"
  | "claim"
  | "deliver"
  | "retry"
  | "fail"
  | "release"
  | "failAll"
  | "replay"
  | "delete"
const ops: ReadonlyArray<Op> = [
  "enqueue",
  "enqueueMany",
  "claim",
  "deliver",
  "retry",
  "fail",
  "release",
  "failAll",
  "replay",
  "delete"
]

layer(QueueLive, { excludeTestServices: true })("delivery bookkeeping", (it) => {
  it.effect(
    "the kept undelivered count equals a recount after any sequence of queue operations",
    () =>
      Effect.gen(function*() {
        const queue = yield* DeliveryQueue
        const sql = yield* SqlClient.SqlClient
        const sequences = fc.sample(
          fc.array(fc.record({ op: fc.constantFrom(...ops), target: fc.nat(1), n: fc.integer({ min: 1, max: 4 }) }), {
            minLength: 5,
            maxLength: 25
          }),
          { numRuns: 12, seed: 4_011 }
        )
        for (const sequence of sequences) {
          const org = yield* newOrg
          const targets = [newId(), newId()]
          const held: Array<Claimed> = []
          for (const { n, op, target } of sequence) {
            const targetId = targets[target]!
            const base = { orgId: org, kind: "webhook" as const, targetId, capacity: 6 }
            const take = () => held.splice(0, n)
            switch (op) {
              case "enqueue":
                yield* queue.enqueue(base)
                break
              case "enqueueMany":
                yield* queue.enqueueMany(Array.from({ length: n }, () => base))
                break
              case "claim":
                held.push(...(yield* queue.claim("webhook", { limit: n, leaseFor: "1 minute", perTarget: 10 }))
                  .filter((d) => targets.includes(d.targetId)))
                break
              case "deliver":
                yield* queue.settleMany(
                  take().map((claimed) => ({ claimed, outcome: Outcome.delivered(), attempt: ok }))
                )
                break
              case "retry":
                yield* queue.settleMany(
                  take().map((claimed) => ({
                    claimed,
                    outcome: Outcome.retry(Duration.zero, "HTTP 500"),
                    attempt: boom
                  }))
                )
                break
              case "fail":
                yield* queue.settleMany(
                  take().map((claimed) => ({ claimed, outcome: Outcome.failed("HTTP 500"), attempt: boom }))
                )
                break
              case "release":
                yield* queue.release(take())
                break
              case "failAll":
                yield* queue.failUndelivered("webhook", targetId, "endpoint deleted")
                break
              case "replay": {
                const failed = (yield* queue.list({ orgId: org, kind: "webhook", targetId })).find((d) =>
                  d.status === "failed"
                )
                if (failed !== undefined) yield* Effect.ignore(queue.replay({ ...base, deliveryId: failed.id }))
                break
              }
              case "delete":
                yield* sql`DELETE FROM deliveries WHERE id IN (
                SELECT id FROM deliveries WHERE target_id = ${targetId} ORDER BY seq LIMIT ${n})`
                break
            }
            for (const id of targets) {
              const [row] = yield* sql<{ kept: number | null; counted: number }>`
              SELECT (SELECT undelivered FROM delivery_targets WHERE id = ${id}) AS kept,
                     (SELECT count(*)::int FROM delivery_records
                      WHERE target_id = ${id} AND status IN ('queued', 'sending', 'retrying')) AS counted
            `
              assert.strictEqual(row!.kept ?? 0, row!.counted, `after ${op} ×${n} on target ${target}`)
            }
          }
        }
      }),
    { timeout: 120_000 }
  )

  it.effect("a deleted delivery takes its attempts with it: pruned, or with its organization", () =>
    Effect.gen(function*() {
      const queue = yield* DeliveryQueue
      const sql = yield* SqlClient.SqlClient
      const attemptsOf = (ids: ReadonlyArray<string>) =>
        sql<{ n: number }>`SELECT count(*)::int AS n FROM delivery_attempts WHERE delivery_id IN ${sql.in([...ids])}`
          .pipe(
            Effect.map((rows) => rows[0]!.n)
          )
      // Three deliveries of one organization and one of another, each with two attempts.
      const kept = yield* newOrg
      const gone = yield* newOrg
      const attemptTwice = Effect.fnUntraced(function*(org: string, n: number) {
        const target = newId()
        yield* queue.enqueueMany(
          Array.from({ length: n }, () => ({ orgId: org, kind: "webhook" as const, targetId: target, capacity: 10 }))
        )
        for (const outcome of [Outcome.retry(Duration.zero, "HTTP 500"), Outcome.delivered()]) {
          const claimed = (yield* queue.claim("webhook", { limit: 10, leaseFor: "1 minute", perTarget: 10 }))
            .filter((d) => d.targetId === target)
          assert.strictEqual(claimed.length, n)
          yield* queue.settleMany(claimed.map((c) => ({ claimed: c, outcome, attempt: ok })))
        }
        return (yield* queue.list({ orgId: org, kind: "webhook", targetId: target })).map((d) => d.id)
      })
      const [pruned, ...rest] = yield* attemptTwice(gone, 3)
      const other = yield* attemptTwice(kept, 1)
      assert.strictEqual(yield* attemptsOf([pruned!, ...rest, ...other]), 8)
      yield* sql`DELETE FROM deliveries WHERE id = ${pruned!}`
      assert.strictEqual(yield* attemptsOf([pruned!]), 0, "a pruned delivery's attempts")
      yield* sql`DELETE FROM orgs WHERE id = ${gone}`
      assert.strictEqual(yield* attemptsOf(rest), 0, "the deleted organization's deliveries' attempts")
      assert.strictEqual(yield* attemptsOf(other), 2, "another organization's attempts stay")
    }))

  it.effect(
    "a batch of outcomes leaves a target's health as settling them one at a time would",
    () =>
      Effect.gen(function*() {
        const queue = yield* DeliveryQueue
        const sql = yield* SqlClient.SqlClient
        const org = yield* newOrg
        const cases = fc.sample(
          fc.record({
            // true = a failed attempt
            outcomes: fc.array(fc.boolean(), { minLength: 1, maxLength: 7 }),
            after: fc.integer({ min: 1, max: 3 }),
            // failures the target already had (below `after`, so it is not cooling yet)
            before: fc.nat(2)
          }),
          { numRuns: 30, seed: 4_012 }
        )
        const health = (target: string) =>
          sql<{ consecutive_failures: number; seconds: number | null }>`
          SELECT consecutive_failures, round(extract(epoch FROM cooldown_until - now()))::int AS seconds
          FROM delivery_targets WHERE id = ${target}
        `.pipe(Effect.map((rows) => rows[0]))
        for (const { after, before, outcomes } of cases) {
          const cooldown: CooldownPolicy = { after, base: "10 minutes", cap: "1 hour" }
          const run = (batched: boolean) =>
            Effect.gen(function*() {
              const target = newId()
              yield* queue.enqueueMany(Array.from({ length: outcomes.length }, () => ({
                orgId: org,
                kind: "email" as const,
                targetId: target,
                capacity: 20
              })))
              yield* sql`UPDATE delivery_targets SET consecutive_failures = ${
                Math.min(before, after - 1)
              } WHERE id = ${target}`
              const claimed = (yield* queue.claim("email", { limit: 50, leaseFor: "1 minute", perTarget: 20 }))
                .filter((d) => d.targetId === target)
              assert.strictEqual(claimed.length, outcomes.length)
              const items = claimed.map((d, i) => ({
                claimed: d,
                outcome: outcomes[i] ? Outcome.retry("60 seconds", "HTTP 500") : Outcome.delivered(),
                attempt: outcomes[i] ? boom : ok,
                cooldown
              }))
              if (batched) yield* queue.settleMany(items)
              else for (const item of items) yield* queue.settleMany([item])
              return yield* health(target)
            })
          const oneByOne = yield* run(false)
          const batched = yield* run(true)
          assert.deepStrictEqual(
            batched,
            oneByOne,
            `outcomes ${JSON.stringify(outcomes)}, after ${after}, before ${before}`
          )
        }
      }),
    { timeout: 120_000 }
  )

  it.effect("released deliveries wait again as if never claimed; a lost lease releases nothing", () =>
    Effect.gen(function*() {
      const queue = yield* DeliveryQueue
      const org = yield* newOrg
      const target = newId()
      const base = { orgId: org, kind: "webhook" as const, targetId: target, capacity: 10 }
      const [first, second] = yield* queue.enqueueMany([base, base])
      const claimed = (yield* queue.claim("webhook", { limit: 50, leaseFor: "1 minute", perTarget: 10 }))
        .filter((d) => d.targetId === target)
      // The second one has already failed once: it goes back to `retrying`.
      yield* queue.settleMany([{
        claimed: claimed.find((d) => d.id === second!.id)!,
        outcome: Outcome.retry(Duration.zero, "HTTP 500"),
        attempt: boom
      }])
      const again = (yield* queue.claim("webhook", { limit: 50, leaseFor: "1 minute", perTarget: 10 }))
        .filter((d) => d.targetId === target)
      assert.deepStrictEqual(again.map((d) => [d.id, d.attempts, d.claimedFrom]), [[second!.id, 2, "retrying"]])
      const stale = { ...claimed.find((d) => d.id === first!.id)!, leaseOwner: newId() }
      assert.strictEqual(yield* queue.release([stale]), 0, "only the lease holder can release")
      assert.strictEqual(yield* queue.release([claimed.find((d) => d.id === first!.id)!, again[0]!]), 2)
      const rows = new Map((yield* queue.list({ orgId: org, kind: "webhook", targetId: target })).map((d) => [d.id, d]))
      assert.deepStrictEqual([rows.get(first!.id)!.status, rows.get(first!.id)!.attempts], ["queued", 0])
      assert.deepStrictEqual([rows.get(second!.id)!.status, rows.get(second!.id)!.attempts], ["retrying", 1])
      assert.deepStrictEqual(yield* queue.attempts(first!.id), [], "a released claim records no attempt")
      const reclaimed = (yield* queue.claim("webhook", { limit: 50, leaseFor: "1 minute", perTarget: 10 }))
        .filter((d) => d.targetId === target)
      assert.strictEqual(reclaimed.length, 2, "claimable again at once")
    }))
})
