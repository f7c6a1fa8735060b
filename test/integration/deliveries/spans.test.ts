/**
 * The queue's facade (`make` in `DeliveryQueue.ts`): every operation runs
 * in a span named `DeliveryQueue.<operation>`, whichever way it is bound to
 * the client (plain, with the database kind, or composed of another one).
 */
import { assert, layer } from "@effect/vitest"
import { Effect, Exit, Tracer } from "effect"
import { DeliveryQueue, Outcome } from "../../../src/deliveries/DeliveryQueue.ts"
import { newId } from "../../../src/platform/Ids.ts"
import { newOrg, ok, QueueLive } from "./support.ts"

const ended: Array<string> = []
class Recording extends Tracer.NativeSpan {
  override end(endTime: bigint, exit: Parameters<Tracer.NativeSpan["end"]>[1]) {
    super.end(endTime, exit)
    ended.push(this.name)
  }
}

const recording = Tracer.make({ span: (options) => new Recording(options) })

layer(QueueLive, { excludeTestServices: true, timeout: 120_000 })("delivery queue spans", (it) => {
  it.effect("each operation opens a span named DeliveryQueue.<operation>", () =>
    Effect.gen(function*() {
      const queue = yield* DeliveryQueue
      const orgId = yield* newOrg
      const targetId = newId()
      const input = { orgId, kind: "email" as const, targetId, capacity: 10 }
      const first = yield* queue.enqueue(input)
      yield* queue.enqueueMany([input])
      yield* queue.enqueueAll([input])
      const claimed = yield* queue.claim("email", { limit: 3, leaseFor: "1 minute", perTarget: 3 })
      assert.lengthOf(claimed, 3)
      assert.isTrue(yield* queue.settle(claimed[0]!, Outcome.delivered(), ok))
      yield* queue.settleMany([{ claimed: claimed[1]!, outcome: Outcome.failed("no"), attempt: ok }])
      assert.strictEqual(yield* queue.release([claimed[2]!]), 1)
      const replayed = yield* Effect.exit(queue.replay({ orgId, kind: "email", deliveryId: first.id, capacity: 10 }))
      assert.isTrue(Exit.isFailure(replayed), "a delivered delivery is not replayable")
      yield* queue.list({ orgId, kind: "email", targetId })
      yield* queue.get({ orgId, kind: "email", deliveryId: first.id })
      yield* queue.attempts(first.id)
      yield* queue.undelivered("email", targetId)
      yield* queue.undeliveredMetaSum("email", targetId, "spans")
      yield* queue.nextDue("email")
      yield* queue.cooldownUntil(targetId)
      yield* queue.setStrict("email", orgId, targetId, false)
      yield* queue.failUndelivered("email", targetId, "gone")
      yield* queue.removeTarget("email", targetId, "gone")
      yield* queue.prunePayloads("email", 24)
      yield* queue.pruneFinished("email", 7)
      for (
        const operation of [
          "enqueue",
          "enqueueMany",
          "enqueueAll",
          "claim",
          "settle",
          "settleMany",
          "release",
          "replay",
          "list",
          "get",
          "attempts",
          "undelivered",
          "undeliveredMetaSum",
          "nextDue",
          "cooldownUntil",
          "setStrict",
          "failUndelivered",
          "removeTarget",
          "prunePayloads",
          "pruneFinished"
        ]
      ) {
        assert.include(ended, `DeliveryQueue.${operation}`, `the span of ${operation}`)
      }
    }).pipe(Effect.withTracer(recording)))
})
