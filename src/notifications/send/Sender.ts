/**
 * Sends webhook deliveries: the `DeliveryWorker` handler for kind `webhook`.
 *
 * Each attempt POSTs the event's stored body bytes (never re-encoded, so
 * every retry and replay carries the same bytes and event id) with a fresh
 * `t` and one `v1=` per signing secret in use, through the outbound guard
 * (address checked again, pinned connection, no redirects, one 5 s deadline
 * over the whole exchange). What the answer makes of the delivery and what
 * it says of the endpoint is `Verdict.ts`; the endpoint's health is applied
 * once the attempt is recorded (`EndpointHealth.ts`, the worker's `health`).
 *
 * An HTTPS send to an endpoint and event this process knows runs without a
 * fiber of its own (`deliverDirect`, `DirectSend.ts`), traced or not;
 * `deliver` is the same send as an effect, for an endpoint or event read
 * from the database first and for endpoints whose URL names a broker
 * (`src/brokers/`): the same signed bytes published, acknowledged or
 * failed, and decided as above.
 */
import { PgClient } from "@effect/sql-pg"
import { Cause, Clock, Context, Duration, Effect, FiberSet, Layer, Queue, Schema } from "effect"
import { Brokers, ConnectionsBusy } from "../../brokers/Brokers.ts"
import { Wakeups } from "../../database/Wakeups.ts"
import type { Claimed, CooldownPolicy, Settlement } from "../../deliveries/DeliveryQueue.ts"
import { DeliveryQueue, Outcome } from "../../deliveries/DeliveryQueue.ts"
import { runWorker } from "../../deliveries/worker/DeliveryWorker.ts"
import { type DirectHandle, spanStarter } from "../../deliveries/worker/DirectStart.ts"
import { OutboundFailure, OutboundHttp } from "../../outbound/OutboundHttp.ts"
import { eventBody } from "../../outbox/Outbox.ts"
import { SvcConfig } from "../../platform/Config.ts"
import { rowsOf } from "../../platform/Rows.ts"
import { makeAuthorizedSend } from "../auth/AuthorizedSend.ts"
import { EndpointTokens } from "../auth/Tokens.ts"
import { EventBodies } from "../dispatch/EventBodies.ts"
import { directDeliveries } from "./DirectSend.ts"
import { makeEndpointHealth } from "./EndpointHealth.ts"
import { type SendTarget, SendTargets } from "./SendTargets.ts"
import { deliveryHeaders } from "./Signing.ts"
import { delivered, notSent, SNIPPET_BYTES, verdictOf } from "./Verdict.ts"

/** An event body read back when this process does not hold it. */
const EventRows = rowsOf("events", Schema.Struct({ type: Schema.String, body: Schema.String }))

/**
 * Requests in flight per process, and per endpoint per process (a failing
 * endpoint gets one at a time until it answers again). Hanging endpoints
 * hold only their own slots, so a process has room for many of them.
 */
const WORKER_CONCURRENCY = 256
export const PER_ENDPOINT = 16
/**
 * Deliveries of one endpoint claimed at once across processes: a busy
 * endpoint's next deliveries are already claimed when a slot frees, so a
 * burst costs a claim statement per few hundred deliveries, not per slot.
 */
const ENDPOINT_PREFETCH = 256

/** The attributes of a delivery's `WebhookSender.deliver` span, given when it starts. */
const spanAttributes = (delivery: Claimed) => ({
  "svc.org_id": delivery.orgId,
  "svc.delivery_id": delivery.id,
  "svc.endpoint_id": delivery.targetId,
  "svc.event_id": delivery.eventId ?? "",
  "svc.attempt": delivery.attempts
})

export class WebhookSender extends Context.Service<WebhookSender, {
  readonly deliver: (delivery: Claimed) => Effect.Effect<Settlement>
  /** `deliver` without a fiber of its own, when it can (`src/deliveries/worker/DirectStart.ts`). */
  readonly deliverDirect: DirectHandle
  /** Applies what recorded attempts say of their endpoints (`EndpointHealth.ts`). */
  readonly health: ReturnType<typeof makeEndpointHealth>
}>()("svc/notifications/WebhookSender") {
  static readonly layer = Layer.effect(
    WebhookSender,
    Effect.gen(function*() {
      const sql = yield* PgClient.PgClient
      const outbound = yield* OutboundHttp
      const targets = yield* SendTargets
      const config = yield* SvcConfig
      const bodies = yield* EventBodies
      const brokers = yield* Brokers
      const authorizedSend = makeAuthorizedSend(outbound, yield* EndpointTokens)
      const schedule = config.webhookRetrySchedule

      /** The request of one attempt: the stored body bytes, signed now. */
      const requestOf = (delivery: Claimed, target: SendTarget, type: string, body: Buffer, started: number) => ({
        url: target.url,
        method: "POST" as const,
        headers: deliveryHeaders(
          target.secrets,
          { id: delivery.eventId ?? "", type },
          Math.floor(started / 1000),
          body,
          target.headers
        ),
        body,
        timeout: config.webhookSendTimeout,
        maxResponseBytes: SNIPPET_BYTES + 1,
        // One pool per organization and destination host, as large as the
        // worker's bound on requests in flight to it (`SVC_WEBHOOK_PER_HOST`,
        // plus one per further endpoint): no request ever waits behind
        // another (a hanging endpoint's) in it, and one organization's
        // endpoints never hold another's connections.
        partition: delivery.orgId,
        connections: config.webhookPerHost + config.maxEndpointsPerOrg,
        orgId: delivery.orgId,
        clientCertificate: target.clientCertificate
      })

      /** An attempt at a broker destination: acknowledged (delivered), or failed as a network failure is. */
      const publish = Effect.fnUntraced(
        function*(delivery: Claimed, target: SendTarget, type: string, body: Buffer, started: number) {
          const { headers } = requestOf(delivery, target, type, body, started)
          const message = {
            eventId: delivery.eventId ?? "",
            type,
            headers,
            body,
            timeoutMs: Duration.toMillis(config.webhookSendTimeout)
          }
          const sent = yield* brokers.publish(target.url, delivery.orgId, message).pipe(
            Effect.catch((failure) => Effect.succeed(failure))
          )
          // This process had no connection for it: given back, not an attempt against the endpoint.
          if (sent instanceof ConnectionsBusy) {
            return {
              outcome: Outcome.retry(Duration.zero, sent.message),
              attempt: { error: sent.message, durationMs: 0 },
              giveBack: true
            } satisfies Settlement
          }
          if (!(sent instanceof OutboundFailure)) return delivered(delivery, { durationMs: sent.elapsedMs })
          return verdictOf(schedule, delivery, target.url, sent, started, yield* Clock.currentTimeMillis)
        }
      )

      const send = Effect.fnUntraced(function*(delivery: Claimed) {
        const target = yield* targets.get(delivery.orgId, delivery.targetId)
        if (target === undefined) return notSent("endpoint deleted")
        if (!target.active) return notSent(`endpoint inactive: ${target.deactivatedReason ?? "deactivated"}`)
        const event = bodies.get(delivery.eventId ?? "") ??
          (yield* EventRows.one(eventBody(sql, delivery.orgId, delivery.eventId)))
        if (event === undefined) return notSent("event no longer stored")
        yield* Effect.annotateCurrentSpan("svc.event_type", event.type)
        const body = Buffer.from(event.body, "utf8")
        const started = yield* Clock.currentTimeMillis
        if (!target.url.startsWith("https:")) return yield* publish(delivery, target, event.type, body, started)
        const request = requestOf(delivery, target, event.type, body, started)
        const sent = yield* authorizedSend(request, target.oauth, delivery.orgId).pipe(
          Effect.catch((failure) => Effect.succeed(failure))
        )
        return verdictOf(schedule, delivery, target.url, sent, started, yield* Clock.currentTimeMillis)
      })
      const deliver = (delivery: Claimed) =>
        Effect.withSpan(send(delivery), "WebhookSender.deliver", {
          // Not `Effect.fn`: a stack trace per delivery span was ~1 % of the
          // drain's CPU and says nothing a delivery's attributes do not.
          captureStackTrace: false,
          attributes: spanAttributes(delivery)
        })

      const deliverDirect = directDeliveries({
        // Broker destinations are sent by `deliver` (stored URLs have a lower-case scheme),
        // and so are endpoints that want a token first.
        sendTargetNow: (orgId, id) => {
          const target = targets.now(orgId, id)
          return target?.url.startsWith("https:") === true && target.oauth === undefined ? target : undefined
        },
        body: bodies.get,
        spans: yield* spanStarter,
        clock: yield* Clock.Clock,
        fork: yield* FiberSet.makeRuntime<never, Settlement, never>(),
        sendDirect: outbound.sendDirect,
        spanAttributes,
        requestOf,
        verdictOf: (delivery, url, sent, started, now) => verdictOf(schedule, delivery, url, sent, started, now)
      })

      const health = makeEndpointHealth({
        sql,
        queue: yield* DeliveryQueue,
        wakeups: yield* Wakeups,
        forget: targets.forget,
        failingAfter: config.webhookCooldownAfter,
        disableAfter: config.webhookDisableAfter
      })

      return WebhookSender.of({ deliver, deliverDirect, health })
    })
  )

  /** The cooldown policy of webhook endpoints, from configuration. */
  static readonly cooldown = (config: SvcConfig["Service"]): CooldownPolicy => ({
    after: config.webhookCooldownAfter,
    base: config.webhookCooldownBase,
    cap: config.webhookCooldownMax
  })

  /** The delivery loop of kind `webhook`, as long as the layer lives. */
  static readonly worker = Layer.effectDiscard(Effect.gen(function*() {
    const sender = yield* WebhookSender
    const config = yield* SvcConfig
    const { signals } = yield* runWorker({
      kind: "webhook",
      concurrency: WORKER_CONCURRENCY,
      perTarget: PER_ENDPOINT,
      prefetch: ENDPOINT_PREFETCH,
      // Longer than a send (5 s) plus its bookkeeping; a crashed process's
      // deliveries are sent again after this.
      leaseFor: config.webhookLease,
      handleTimeout: config.webhookSendTimeout,
      pollEvery: Duration.seconds(2),
      cooldown: WebhookSender.cooldown(config),
      perGroup: config.webhookPerHost,
      handle: sender.deliver,
      handleDirect: sender.deliverDirect
    })
    // What the recorded attempts said of their endpoints, applied in order, one batch at a time.
    yield* Queue.take(signals).pipe(
      Effect.flatMap((batch) =>
        sender.health(batch).pipe(
          Effect.catchCause((cause) =>
            Cause.hasInterruptsOnly(cause)
              ? Effect.failCause(cause)
              : Effect.logError("applying endpoint health after a settle failed", Cause.squash(cause))
          )
        )
      ),
      Effect.forever,
      Effect.forkScoped
    )
  }))
}
