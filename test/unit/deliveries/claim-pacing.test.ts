/**
 * When the worker claims, on `TestClock` and a fake queue: a wakeup while
 * plenty of claimed deliveries wait claims at most every 50 ms; the
 * per-row claim after a claim the log fed runs while it finds something,
 * else at most every 100 ms.
 */
import { assert, describe, it } from "@effect/vitest"
import { Clock, Effect } from "effect"
import { TestClock } from "effect/testing"
import { Admission } from "../../../src/deliveries/Admission.ts"
import type { Claimed, DeliveryQueue } from "../../../src/deliveries/DeliveryQueue.ts"
import { makeRowClaimPacing, ROW_CLAIM_EVERY_MS, rowClaimDue, rowClaimRan } from "../../../src/deliveries/RowClaims.ts"
import { makeClaim } from "../../../src/deliveries/worker/Claim.ts"
import { type LimitOptions, limitsOf } from "../../../src/deliveries/worker/Limits.ts"
import type { Settler } from "../../../src/deliveries/worker/Settle.ts"
import { makeState } from "../../../src/deliveries/worker/State.ts"

const options: LimitOptions & { readonly kind: "webhook" } = {
  kind: "webhook",
  concurrency: 16,
  perTarget: 4,
  prefetch: 64,
  leaseFor: "60 seconds",
  handleTimeout: "5 seconds",
  pollEvery: "2 seconds"
}

const settler: Settler = { push: () => {}, pending: () => 0, failing: () => false, lingering: () => false, hurry: () => {} }

const claimed = (n: number): Claimed => ({ id: `d${n}`, seq: String(n), targetId: "busy", targetFailures: 0 } as Claimed)

/** A worker's claim over a queue that hands out `count` deliveries of one target per claim. */
const harness = (count: number) =>
  Effect.gen(function*() {
    const clock = yield* Clock.Clock
    const limits = limitsOf(options)
    const state = makeState(
      new Admission<Claimed>({ concurrency: 16, perTarget: 4, perFailingTarget: 1, perGroup: Infinity, maxWaitMs: 60_000 })
    )
    let next = 0
    const queue = {
      claim: () => Effect.sync(() => Array.from({ length: count }, () => claimed(next++)))
    } as unknown as DeliveryQueue["Service"]
    return { state, limits, ...makeClaim<never>(queue, state, settler, limits, { ...options, clock }) }
  })

describe("claim pacing", () => {
  it.effect("a wakeup while plenty waits claims at most every 50 ms; with little waiting, at once", () =>
    Effect.gen(function*() {
      const { claim, limits, shouldClaim, state } = yield* harness(100)
      yield* TestClock.adjust("1 second")
      yield* claim
      assert.isAtLeast(state.admission.waiting, limits.lowWater, "plenty waits")
      state.woken = true
      assert.isFalse(shouldClaim(), "a wakeup right after a claim waits")
      yield* TestClock.adjust("49 millis")
      assert.isFalse(shouldClaim())
      yield* TestClock.adjust("1 millis")
      assert.isTrue(shouldClaim(), "50 ms after the last claim it claims")
      // With little waiting a wakeup claims at once, right after a claim, as does a change.
      yield* claim
      state.admission.takeAllWaiting()
      state.woken = true
      assert.isTrue(shouldClaim())
      state.woken = false
      state.moreMayBeDue = true
      assert.isTrue(shouldClaim())
    }))

  it("the per-row claim runs while it finds something, else every 100 ms; always when the log gave nothing", () => {
    const pacing = makeRowClaimPacing()
    assert.isTrue(rowClaimDue(pacing, 1_000, 5), "never ran")
    rowClaimRan(pacing, 1_000, 0)
    assert.isFalse(rowClaimDue(pacing, 1_000 + ROW_CLAIM_EVERY_MS - 1, 5), "it found nothing a moment ago")
    assert.isTrue(rowClaimDue(pacing, 1_000 + ROW_CLAIM_EVERY_MS - 1, 0), "the log gave nothing")
    assert.isTrue(rowClaimDue(pacing, 1_000 + ROW_CLAIM_EVERY_MS, 5), "100 ms on")
    rowClaimRan(pacing, 1_100, 2)
    assert.isTrue(rowClaimDue(pacing, 1_101, 5), "it found something: again at once")
  })
})
