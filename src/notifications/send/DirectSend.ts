/**
 * Webhook sends without a fiber of their own: the worker's `handleDirect`
 * for kind `webhook` (`src/deliveries/worker/DirectStart.ts`). It takes
 * every HTTPS send to an endpoint and event body this process knows,
 * traced or not (a span that records nothing when tracing is off), and
 * settles the answer in the exchange's callback with its verdict
 * (`Verdict.ts`), the same as `WebhookSender.deliver` decides. What the
 * answer says of the endpoint is applied after the settle
 * (`EndpointHealth.ts`), so nothing is left to run in a fiber here.
 *
 * Speeds up: every send, with no fiber, context, generators or
 * `Effect.callback` per send; svc's CPU per delivery in the `webhooks`
 * drain went 213 → 197 µs (`bench/notes/delivery-log.md`, "What was cut").
 */
import { Cause, type Clock, type Fiber, type Tracer } from "effect"
import type { Claimed, Settlement } from "../../deliveries/Types.ts"
import type { DirectHandle, SpanStarter } from "../../deliveries/worker/DirectStart.ts"
import { defectSettlement } from "../../deliveries/worker/Start.ts"
import type { Sent } from "../../outbound/DirectExchange.ts"
import type { OutboundRequest } from "../../outbound/OutboundHttp.ts"
import type { EventBody } from "../dispatch/EventBodies.ts"
import type { SendTarget } from "./SendTargets.ts"

/** What a direct send uses of the sender and the services it was built from. */
export interface DirectDeliveryParts {
  /** The endpoint as this process knows it now (`SendTargets.now`). */
  readonly sendTargetNow: (orgId: string, id: string) => SendTarget | undefined
  /** The event's body if this process holds it (`EventBodies.get`). */
  readonly body: (eventId: string) => EventBody | undefined
  /** Opens the delivery's span (one that records nothing when tracing is off). */
  readonly spans: SpanStarter
  readonly clock: Clock.Clock
  /** Forks into the sender's fiber set, in its layer's context: only to log a defect. */
  readonly fork: (effect: ReturnType<typeof defectSettlement>) => Fiber.Fiber<Settlement>
  /** `OutboundHttp.sendDirect`. */
  readonly sendDirect: (request: OutboundRequest, span: Tracer.Span, done: (sent: Sent) => void) => void
  /** The sender's own steps, the same `deliver` takes. */
  readonly spanAttributes: (delivery: Claimed) => Readonly<Record<string, unknown>>
  readonly requestOf: (
    delivery: Claimed,
    target: SendTarget,
    type: string,
    body: Buffer,
    started: number
  ) => OutboundRequest
  readonly verdictOf: (delivery: Claimed, url: string, sent: Sent, started: number, now: number) => Settlement
}

export const directDeliveries = (parts: DirectDeliveryParts): DirectHandle => {
  const { clock, fork, spans } = parts
  return (delivery, done) => {
    const target = parts.sendTargetNow(delivery.orgId, delivery.targetId)
    if (target === undefined || !target.active) return false
    const event = parts.body(delivery.eventId ?? "")
    if (event === undefined) return false
    const span = spans.start("WebhookSender.deliver", parts.spanAttributes(delivery))
    span.attribute("svc.event_type", event.type)
    const body = Buffer.from(event.body, "utf8")
    const started = clock.currentTimeMillisUnsafe()
    const settled = (settlement: Settlement) => {
      spans.end(span, settlement)
      done(settlement)
    }
    parts.sendDirect(parts.requestOf(delivery, target, event.type, body, started), span, (sent) => {
      // The exchange calls this outside Effect, where a throw would be lost
      // and `done` never called: a defect here is settled as `handle`'s is.
      let settlement: Settlement
      try {
        settlement = parts.verdictOf(delivery, target.url, sent, started, clock.currentTimeMillisUnsafe())
      } catch (error) {
        fork(defectSettlement(delivery, Cause.die(error))).addObserver((exit) => {
          if (exit._tag === "Success") settled(exit.value)
          else done(undefined)
        })
        return
      }
      settled(settlement)
    })
    return true
  }
}
