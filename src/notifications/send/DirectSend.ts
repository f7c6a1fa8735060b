/**
 * Webhook sends without a fiber of their own: the worker's `handleDirect`
 * for kind `webhook` (`src/deliveries/worker/DirectStart.ts`). It takes the common
 * case (an endpoint and an event body this process knows, tracing on),
 * settles a 2xx answer from a healthy endpoint in the exchange's callback,
 * and forks whatever else the answer asks for (`outcomeOf`: a failure to
 * count, an endpoint to deactivate, a recovery to announce) under the
 * delivery's span. Same request, checks, span and decisions as
 * `WebhookSender.deliver`.
 *
 * Speeds up: no fiber, context, generators or `Effect.callback` per
 * send; svc's CPU per delivery in the `webhooks` drain went 213 → 197 µs
 * (`bench/notes/delivery-log.md`, "What was cut").
 */
import { Cause, type Clock, Effect, Exit, type Fiber, type Tracer } from "effect"
import { Outcome } from "../../deliveries/DeliveryQueue.ts"
import type { DirectHandle, SpanStarter } from "../../deliveries/worker/DirectStart.ts"
import type { Claimed, Settlement } from "../../deliveries/Types.ts"
import { defectSettlement } from "../../deliveries/worker/Start.ts"
import type { Sent } from "../../outbound/DirectExchange.ts"
import { OutboundFailure, type OutboundRequest } from "../../outbound/OutboundHttp.ts"
import type { SendTarget } from "./SendTargets.ts"
import type { EventBody } from "../dispatch/EventBodies.ts"

const DELIVERED = Outcome.delivered()

/** What a direct send uses of the sender and the services it was built from. */
export interface DirectDeliveryParts {
  /** The endpoint as this process knows it now (`NotificationEndpoints.sendTargetNow`). */
  readonly sendTargetNow: (orgId: string, id: string) => SendTarget | undefined
  /** The event's body if this process holds it (`EventBodies.get`). */
  readonly body: (eventId: string) => EventBody | undefined
  /** Opens the delivery's span; none when tracing is off (then every send is declined). */
  readonly spans: SpanStarter | undefined
  readonly clock: Clock.Clock
  /** Forks into the sender's fiber set, in its layer's context. */
  readonly fork: (effect: Effect.Effect<Settlement>) => Fiber.Fiber<Settlement>
  /** `OutboundHttp.sendDirect`. */
  readonly sendDirect: (request: OutboundRequest, span: Tracer.Span, done: (sent: Sent) => void) => void
  /** The sender's own steps, the same `deliver` takes. */
  readonly spanAttributes: (delivery: Claimed) => Readonly<Record<string, unknown>>
  readonly requestOf: (delivery: Claimed, target: SendTarget, type: string, body: Buffer, started: number) => OutboundRequest
  readonly outcomeOf: (delivery: Claimed, target: SendTarget, sent: Sent, started: number) => Effect.Effect<Settlement>
  readonly snippet: (body: Uint8Array, truncated: boolean, url: string) => string
}

/** The direct webhook send, or one that declines every delivery when tracing is off. */
export const directDeliveries = (parts: DirectDeliveryParts): DirectHandle => {
  const { clock, fork, outcomeOf, spans } = parts
  if (spans === undefined) return () => false
  return (delivery, done) => {
    const target = parts.sendTargetNow(delivery.orgId, delivery.targetId)
    if (target === undefined || !target.active) return false
    const event = parts.body(delivery.eventId ?? "")
    if (event === undefined) return false
    const span = spans.start("WebhookSender.deliver", parts.spanAttributes(delivery))
    span.attribute("svc.event_type", event.type)
    const body = Buffer.from(event.body, "utf8")
    const started = clock.currentTimeMillisUnsafe()
    // `undefined`: interrupted (the sender's layer closing): nothing to
    // record, but the worker still learns the send is over.
    const settled = (settlement: Settlement | undefined) => {
      if (settlement !== undefined) spans.end(span, settlement)
      done(settlement)
    }
    const settleLater = (effect: Effect.Effect<Settlement>) =>
      fork(effect).addObserver((exit) => settled(Exit.isSuccess(exit) ? exit.value : undefined))
    parts.sendDirect(parts.requestOf(delivery, target, event.type, body, started), span, (sent) => {
      if (sent instanceof OutboundFailure || sent.status < 200 || sent.status >= 300 || delivery.targetFailures > 0) {
        settleLater(outcomeOf(delivery, target, sent, started).pipe(
          Effect.catchCause((cause) => defectSettlement(delivery, cause)),
          Effect.withParentSpan(span)
        ))
        return
      }
      // The exchange calls this outside Effect, where a throw would be lost
      // and `done` never called: a defect here is settled as `handle`'s is.
      let responseSnippet: string
      try {
        responseSnippet = parts.snippet(sent.body, sent.truncated, target.url)
      } catch (error) {
        settleLater(defectSettlement(delivery, Cause.die(error)))
        return
      }
      settled({ outcome: DELIVERED, attempt: { statusCode: sent.status, responseSnippet, durationMs: sent.elapsedMs } })
    })
    return true
  }
}
