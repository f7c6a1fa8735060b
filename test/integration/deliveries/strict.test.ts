/**
 * Strict ordering of a target: one delivery at a time, in the order they
 * were enqueued; a delivery that waits for its retry holds the ones behind
 * it until it is delivered or fails for good.
 */
import { assert, layer } from "@effect/vitest"
import { type Duration, Effect, Option } from "effect"
import { SqlClient } from "effect/sql"
import { DeliveryQueue, Outcome } from "../../../src/deliveries/DeliveryQueue.ts"
import { newId } from "../../../src/platform/Ids.ts"
import { eventually } from "../../support/http.ts"
import { boom, newOrg, ok, QueueLive } from "./support.ts"

const claimOf = (target: string, leaseFor: Duration.Input = "1 minute") =>
  Effect.gen(function*() {
    const queue = yield* DeliveryQueue
    const rows = yield* queue.claim("webhook", { limit: 50, leaseFor, perTarget: 16 })
    return rows.filter((d) => d.targetId === target)
  })

layer(QueueLive, { excludeTestServices: true })("strict ordering", (it) => {
  it.effect("a strict target gives one delivery at a time, in enqueue order; a concurrent one gives them all", () =>
    Effect.gen(function*() {
      const queue = yield* DeliveryQueue
      const org = yield* newOrg
      const strict = newId()
      const concurrent = newId()
      yield* queue.setStrict("webhook", org, strict, true)
      const base = (targetId: string) => ({ orgId: org, kind: "webhook" as const, targetId, capacity: 100 })
      const queued = yield* queue.enqueueMany([1, 2, 3].map((n) => ({ ...base(strict), label: `e${n}` })))
      yield* queue.enqueueMany([1, 2, 3].map((n) => ({ ...base(concurrent), label: `e${n}` })))

      const order: Array<string> = []
      for (let i = 0; i < 3; i++) {
        // One claim takes from both targets.
        const claimed = yield* queue.claim("webhook", { limit: 50, leaseFor: "1 minute", perTarget: 16 })
        const fromStrict = claimed.filter((d) => d.targetId === strict)
        if (i === 0) {
          assert.strictEqual(claimed.filter((d) => d.targetId === concurrent).length, 3, "concurrent: all at once")
        }
        assert.strictEqual(fromStrict.length, 1, "one at a time")
        assert.deepStrictEqual(yield* claimOf(strict), [], "nothing more while it is being sent")
        order.push(fromStrict[0]!.label!)
        yield* queue.settleMany(claimed.map((claimed) => ({ claimed, outcome: Outcome.delivered(), attempt: ok })))
      }
      assert.deepStrictEqual(order, ["e1", "e2", "e3"])
      assert.deepStrictEqual(queued.map((d) => d.label), ["e1", "e2", "e3"])
    }))

  it.effect("a failing head holds the ones behind it until it is delivered; its retry goes before them", () =>
    Effect.gen(function*() {
      const queue = yield* DeliveryQueue
      const sql = yield* SqlClient.SqlClient
      const org = yield* newOrg
      const target = newId()
      yield* queue.setStrict("webhook", org, target, true)
      yield* queue.enqueueMany(
        ["e1", "e2"].map((label) => ({ orgId: org, kind: "webhook" as const, targetId: target, capacity: 100, label }))
      )
      const [head] = yield* claimOf(target)
      assert.strictEqual(head!.label, "e1")
      // Its retry is an hour away: e2 is due, and still waits.
      const [clock] = yield* sql<{ now: Date }>`SELECT now() AS now`
      yield* queue.settle(head!, Outcome.retry("1 hour", "HTTP 500"), boom)
      assert.deepStrictEqual(yield* claimOf(target), [], "nothing behind a head waiting for its retry")
      const due = yield* queue.nextDue("webhook")
      assert.isTrue(
        Option.isSome(due) && due.value.getTime() > clock!.now.getTime() + 3_000_000,
        "the next due instant is the head's retry"
      )
      // A claim that takes nothing answers the same instant in its own statement.
      const answered = yield* queue.claimOrNextDue("webhook", { limit: 50, leaseFor: "1 minute", perTarget: 16 })
      assert.deepStrictEqual([answered.claimed, answered.nextDue], [[], due], "the empty claim's answer")
      // Its retry comes due (later than e2's own due time): the head goes first.
      yield* sql`UPDATE deliveries SET next_attempt_at = now() WHERE id = ${head!.id}`
      const [again] = yield* claimOf(target)
      assert.deepStrictEqual([again!.id, again!.attempts], [head!.id, 2])
      yield* queue.settle(again!, Outcome.delivered(), ok)
      const [next] = yield* claimOf(target)
      assert.strictEqual(next!.label, "e2")
    }))

  it.effect("a head that fails for good lets the next go; a lost lease is taken over before anything behind it", () =>
    Effect.gen(function*() {
      const queue = yield* DeliveryQueue
      const org = yield* newOrg
      const target = newId()
      yield* queue.setStrict("webhook", org, target, true)
      yield* queue.enqueueMany(
        ["e1", "e2", "e3"].map((label) => ({
          orgId: org,
          kind: "webhook" as const,
          targetId: target,
          capacity: 100,
          label
        }))
      )
      const [head] = yield* claimOf(target)
      yield* queue.settle(head!, Outcome.failed("HTTP 400"), boom)
      // e2's process dies holding it: once the lease runs out, e2 again, not e3.
      const [second] = yield* claimOf(target, "150 millis")
      assert.strictEqual(second!.label, "e2")
      const retaken = yield* eventually(
        claimOf(target).pipe(Effect.map((rows) => rows[0])),
        { what: "the expired lease to be claimable" }
      )
      assert.deepStrictEqual([retaken.label, retaken.attempts], ["e2", 2])
    }))

  it.effect("back to concurrent: the target's deliveries are claimed together again", () =>
    Effect.gen(function*() {
      const queue = yield* DeliveryQueue
      const org = yield* newOrg
      const target = newId()
      yield* queue.setStrict("webhook", org, target, true)
      yield* queue.enqueueMany(
        ["e1", "e2"].map((label) => ({ orgId: org, kind: "webhook" as const, targetId: target, capacity: 100, label }))
      )
      yield* queue.setStrict("webhook", org, target, false)
      assert.strictEqual((yield* claimOf(target)).length, 2)
    }))
})
