/**
 * The direct webhook send (`directDeliveries`): it calls `done` exactly
 * once for every delivery it takes, also when what the answer asks for is
 * cut short because the sender's layer closes.
 */
import { assert, describe, it } from "@effect/vitest"
import { Clock, Deferred, Effect, Exit, type Fiber, FiberSet, Scope, type Tracer } from "effect"
import { type Claimed, Outcome } from "../../../src/deliveries/DeliveryQueue.ts"
import type { Sent } from "../../../src/outbound/DirectExchange.ts"
import type { Settlement } from "../../../src/deliveries/Types.ts"
import { directDeliveries } from "../../../src/notifications/send/DirectSend.ts"
import { OutboundFailure, type OutboundRequest } from "../../../src/outbound/OutboundHttp.ts"
import { eventually } from "../../support/http.ts"

const delivery = {
  id: "d1",
  orgId: "o1",
  targetId: "e1",
  eventId: "ev1",
  attempts: 1,
  targetFailures: 0
} as unknown as Claimed

const span = { attribute: () => undefined } as unknown as Tracer.Span

/** The direct send with everything around it faked: the exchange answers `sent`, `outcomeOf` is given. */
const handleWith = (
  fork: (effect: Effect.Effect<Settlement>) => Fiber.Fiber<Settlement>,
  clock: Clock.Clock,
  sent: () => Sent,
  outcomeOf: Effect.Effect<Settlement>
) =>
  directDeliveries({
    sendTargetNow: () => ({ url: "https://hooks.example.com/x", active: true, deactivatedReason: null, secrets: ["whsec"], headers: [] }),
    body: () => ({ type: "approval.created", body: "{}" }),
    spans: { start: () => span, end: () => undefined },
    clock,
    fork,
    sendDirect: (_request, _span, done) => setTimeout(() => done(sent()), 1),
    spanAttributes: () => ({}),
    requestOf: () => ({}) as OutboundRequest,
    outcomeOf: () => outcomeOf,
    snippet: () => ""
  })

describe("direct webhook sends", () => {
  it.live("a send whose outcome is still being decided when the sender closes reports done, with nothing to record", () =>
    Effect.gen(function*() {
      const scope = yield* Scope.make()
      const fork = yield* FiberSet.makeRuntime<never, Settlement, never>().pipe(Scope.provide(scope))
      const deciding = yield* Deferred.make<void>()
      const calls: Array<Settlement | undefined> = []
      const handle = handleWith(
        fork,
        yield* Clock.Clock,
        () => new OutboundFailure({ reason: "network", message: "the connection failed (ECONNRESET)" }),
        // The failure's bookkeeping never ends on its own.
        Effect.andThen(Deferred.succeed(deciding, undefined), Effect.never)
      )
      assert.isTrue(handle(delivery, (settlement) => calls.push(settlement)))
      yield* Deferred.await(deciding)
      assert.deepStrictEqual(calls, [])
      yield* Scope.close(scope, Exit.void)
      yield* eventually(Effect.sync(() => calls.length > 0 ? true : undefined), { what: "done", timeoutMs: 2_000 })
      assert.deepStrictEqual(calls, [undefined])
    }))

  it.live("a 2xx from a healthy endpoint is settled delivered in the exchange's callback, once", () =>
    Effect.gen(function*() {
      const fork = yield* FiberSet.makeRuntime<never, Settlement, never>()
      const calls: Array<Settlement | undefined> = []
      const answered = yield* Deferred.make<void>()
      const handle = handleWith(
        fork,
        yield* Clock.Clock,
        () => ({ status: 204, headers: {}, body: new Uint8Array(), truncated: false, elapsedMs: 3 }),
        Effect.die("not asked")
      )
      assert.isTrue(handle(delivery, (settlement) => {
        calls.push(settlement)
        Deferred.doneUnsafe(answered, Exit.void)
      }))
      yield* Deferred.await(answered)
      assert.strictEqual(calls.length, 1)
      assert.deepStrictEqual(calls[0]?.outcome, Outcome.delivered())
      assert.strictEqual(calls[0]?.attempt.statusCode, 204)
    }).pipe(Effect.scoped))
})
