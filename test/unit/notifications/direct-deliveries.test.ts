/**
 * The direct webhook send (`directDeliveries`): every answer is settled in
 * the exchange's callback with its verdict, once; only a defect in deciding
 * it is settled through a fiber, as `handle`'s is.
 */
import { assert, describe, it } from "@effect/vitest"
import { Clock, Deferred, Duration, Effect, Exit, type Fiber, FiberSet, type Tracer } from "effect"
import { type Claimed, Outcome } from "../../../src/deliveries/DeliveryQueue.ts"
import type { Settlement } from "../../../src/deliveries/Types.ts"
import { directDeliveries } from "../../../src/notifications/send/DirectSend.ts"
import { verdictOf } from "../../../src/notifications/send/Verdict.ts"
import type { Sent } from "../../../src/outbound/DirectExchange.ts"
import { OutboundFailure, type OutboundRequest } from "../../../src/outbound/OutboundHttp.ts"

const delivery = {
  id: "d1",
  orgId: "o1",
  targetId: "e1",
  eventId: "ev1",
  attempts: 1,
  targetFailures: 0
} as unknown as Claimed

const span = { attribute: () => undefined } as unknown as Tracer.Span

/** The direct send with everything around it faked: the exchange answers `sent`. */
const handleWith = (
  fork: (effect: Effect.Effect<Settlement>) => Fiber.Fiber<Settlement>,
  clock: Clock.Clock,
  sent: () => Sent,
  verdict: (delivery: Claimed, url: string, sent: Sent, started: number, now: number) => Settlement = (
    d,
    url,
    s,
    started,
    now
  ) => verdictOf([Duration.seconds(10)], d, url, s, started, now)
) =>
  directDeliveries({
    sendTargetNow: () => ({
      url: "https://hooks.example.com/x",
      active: true,
      deactivatedReason: null,
      secrets: ["whsec"],
      headers: []
    }),
    body: () => ({ type: "approval.created", body: "{}" }),
    spans: { start: () => span, end: () => undefined },
    clock,
    fork,
    sendDirect: (_request, _span, done) => setTimeout(() => done(sent()), 1),
    spanAttributes: () => ({}),
    requestOf: () => ({}) as OutboundRequest,
    verdictOf: verdict
  })

/** Sends `delivery` and waits for its one settlement. */
const settle = (handle: ReturnType<typeof handleWith>) =>
  Effect.gen(function*() {
    const calls: Array<Settlement | undefined> = []
    const answered = yield* Deferred.make<void>()
    assert.isTrue(handle(delivery, (settlement) => {
      calls.push(settlement)
      Deferred.doneUnsafe(answered, Exit.void)
    }))
    yield* Deferred.await(answered)
    yield* Effect.sleep(5)
    assert.strictEqual(calls.length, 1)
    return calls[0]
  })

const noFork = () => {
  throw new Error("a fiber was forked")
}

describe("direct webhook sends", () => {
  it.live("a 2xx from a healthy endpoint is settled delivered in the exchange's callback, once", () =>
    Effect.gen(function*() {
      const settled = yield* settle(handleWith(noFork, yield* Clock.Clock, () => ({
        status: 204,
        headers: {},
        body: new Uint8Array(),
        truncated: false,
        elapsedMs: 3
      })))
      assert.deepStrictEqual(settled?.outcome, Outcome.delivered())
      assert.strictEqual(settled?.attempt.statusCode, 204)
      assert.isUndefined(settled?.signal)
    }))

  it.live("a failure is settled in the callback too, with what it says of the endpoint, and no fiber", () =>
    Effect.gen(function*() {
      const settled = yield* settle(
        handleWith(
          noFork,
          yield* Clock.Clock,
          () => new OutboundFailure({ reason: "network", message: "the connection failed (ECONNRESET)" })
        )
      )
      assert.strictEqual(settled?.outcome._tag, "Retry")
      assert.strictEqual(settled?.signal, "failing")
    }))

  it.live("a defect in deciding the verdict is settled as the fiber path's is: retried later", () =>
    Effect.gen(function*() {
      const fork = yield* FiberSet.makeRuntime<never, Settlement, never>()
      const settled = yield* settle(handleWith(fork, yield* Clock.Clock, () => ({
        status: 204,
        headers: {},
        body: new Uint8Array(),
        truncated: false,
        elapsedMs: 3
      }), () => {
        throw new Error("boom")
      }))
      assert.strictEqual(settled?.outcome._tag, "Retry")
      assert.strictEqual(settled?.attempt.error, "internal error")
    }).pipe(Effect.scoped))
})
