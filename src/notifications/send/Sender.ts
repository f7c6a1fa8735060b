/**
 * Sends webhook deliveries: the `DeliveryWorker` handler for kind `webhook`.
 *
 * Each attempt POSTs the event's stored body bytes (never re-encoded, so
 * every retry and replay carries the same bytes and event id) with a fresh
 * `t` and one `v1=` per signing secret in use, through the outbound guard
 * (address checked again, pinned connection, no redirects, one 5 s deadline
 * over the whole exchange). What happened is decided here:
 *
 * - 2xx: delivered.
 * - 410 Gone: the endpoint is deactivated (reason visible on the endpoint)
 *   and its pending deliveries fail; PATCH reactivates it.
 * - 429 / 503 with `Retry-After`: the next try waits that long, within
 *   [1 s, 1 h], instead of the schedule's delay.
 * - anything else (3xx included, timeouts, network and TLS failures): retried
 *   after the next delay of `SVC_WEBHOOK_RETRY_SCHEDULE` (±10 % jitter);
 *   failed when the schedule is used up.
 *
 * The attempt record keeps the status and a truncated response snippet,
 * never the payload.
 *
 * Most sends run without a fiber of their own (`deliverDirect`,
 * `DirectSend.ts`); `deliver` is the same send as an effect, for the rest,
 * and for endpoints whose URL names a broker (`src/brokers/`): the same
 * signed bytes published, acknowledged or failed, and decided as above.
 */
import { PgClient } from "@effect/sql-pg"
import { Clock, Context, Duration, Effect, FiberSet, Layer, Option, Schema } from "effect"
import { Brokers, ConnectionsBusy } from "../../brokers/Brokers.ts"
import type { Claimed, CooldownPolicy } from "../../deliveries/DeliveryQueue.ts"
import { DeliveryQueue, Outcome } from "../../deliveries/DeliveryQueue.ts"
import { type DirectHandle, spanStarter } from "../../deliveries/worker/DirectStart.ts"
import { runWorker, type Settlement } from "../../deliveries/worker/DeliveryWorker.ts"
import { OutboundFailure, OutboundHttp, type OutboundResponse } from "../../outbound/OutboundHttp.ts"
import { perUrl } from "../../outbound/Request.ts"
import { parseRetryAfter } from "../../outbound/RetryAfter.ts"
import { jittered } from "../../platform/Backoff.ts"
import { fromOutside, urlNeedles } from "../../secrets/Masking.ts"
import { SvcConfig } from "../../platform/Config.ts"
import { rowsOf } from "../../platform/Rows.ts"
import { directDeliveries } from "./DirectSend.ts"
import { NotificationEndpoints } from "../Endpoints.ts"
import type { SendTarget } from "./SendTargets.ts"
import { EventBodies } from "../dispatch/EventBodies.ts"
import { deliveryHeaders } from "../Signing.ts"

const SNIPPET_BYTES = 512
const DELIVERED = Outcome.delivered()
const RETRY_AFTER_MIN_MS = 1_000
const RETRY_AFTER_MAX_MS = 3_600_000

/** An event body read back when this process does not hold it. */
const EventRows = rowsOf("events", Schema.Struct({ type: Schema.String, body: Schema.String }))

/**
 * Requests in flight per process, and per endpoint per process (a failing
 * endpoint gets one at a time until it answers again). Hanging endpoints
 * hold only their own slots, so a process has room for many of them.
 */
export const WORKER_CONCURRENCY = 256
export const PER_ENDPOINT = 16
/**
 * Deliveries of one endpoint claimed at once across processes: a busy
 * endpoint's next deliveries are already claimed when a slot frees, so a
 * burst costs a claim statement per few hundred deliveries, not per slot.
 */
export const ENDPOINT_PREFETCH = 256

/** Delay before retry number `attempt` (1-based), jittered ±10 %; `undefined` when the schedule is used up. */
export const retryDelay = (schedule: ReadonlyArray<Duration.Duration>, attempt: number, random = Math.random) => {
  const base = schedule[attempt - 1]
  if (base === undefined) return undefined
  return jittered(Duration.toMillis(base), 0.1, random())
}

/** A failed attempt's outcome: the schedule's next retry, or the receiver's `Retry-After` within bounds, or failed when the schedule is used up. */
export const failedAttempt = (
  schedule: ReadonlyArray<Duration.Duration>,
  delivery: Claimed,
  error: string,
  attempt: Settlement["attempt"],
  retryAfterMs?: number
) => {
  const delay = retryDelay(schedule, delivery.attempts)
  if (delay === undefined) {
    return { outcome: Outcome.failed(`${error}; no retries left`), attempt }
  }
  const wait = retryAfterMs === undefined
    ? delay
    : Math.min(RETRY_AFTER_MAX_MS, Math.max(RETRY_AFTER_MIN_MS, retryAfterMs))
  return { outcome: Outcome.retry(Duration.millis(wait), error), attempt }
}

/** A delivery that could not be sent at all, and why. */
export const notSent = (error: string): Settlement => ({ outcome: Outcome.failed(error), attempt: { error, durationMs: 0 } })

/** The attributes of a delivery's `WebhookSender.deliver` span, given when it starts. */
const spanAttributes = (delivery: Claimed) => ({
  "svc.org_id": delivery.orgId,
  "svc.delivery_id": delivery.id,
  "svc.endpoint_id": delivery.targetId,
  "svc.event_id": delivery.eventId ?? "",
  "svc.attempt": delivery.attempts
})

/**
 * The start of a receiver's answer, with the parts of its URL that may carry
 * a credential masked (a 404 page often echoes the path it was asked for).
 */
const snippet = (body: Uint8Array, truncated: boolean, url: string) => {
  // Most receivers answer with no body at all: nothing to decode or mask.
  if (body.length === 0 && !truncated) return ""
  return fromOutside(decoder.decode(body.subarray(0, SNIPPET_BYTES)), needlesOf(url), {
    cut: truncated || body.length > SNIPPET_BYTES
  })
}

const decoder = new TextDecoder("utf-8", { fatal: false })

/** `urlNeedles` of the last few URLs answered. */
const needlesOf = perUrl(1_000, urlNeedles)

export class WebhookSender extends Context.Service<WebhookSender, {
  readonly deliver: (delivery: Claimed) => Effect.Effect<Settlement>
  /** `deliver` without a fiber of its own, when it can (`src/deliveries/worker/DirectStart.ts`). */
  readonly deliverDirect: DirectHandle
  /** Which per-host bound the delivery counts against (`SVC_WEBHOOK_PER_HOST`). */
  readonly hostGroup: (delivery: Claimed) => Effect.Effect<string | undefined>
}>()("svc/notifications/WebhookSender") {
  static readonly layer = Layer.effect(
    WebhookSender,
    Effect.gen(function*() {
      const sql = yield* PgClient.PgClient
      const outbound = yield* OutboundHttp
      const endpoints = yield* NotificationEndpoints
      const queue = yield* DeliveryQueue
      const config = yield* SvcConfig
      const bodies = yield* EventBodies
      const brokers = yield* Brokers
      const schedule = config.webhookRetrySchedule

      // The failed attempt that brings the endpoint's consecutive failures to
      // the cooldown threshold starts a failing streak (`endpoint.failing`,
      // once: later failures find it failing already).
      // An endpoint failing for SVC_WEBHOOK_DISABLE_AFTER is deactivated
      // instead (`endpoint.disabled`): its undelivered deliveries fail, and
      // so does this one (answered as `Some(failure)`).
      const noteFailure = Effect.fnUntraced(function*(delivery: Claimed, error: string, attempt: Settlement["attempt"]) {
        if (delivery.targetFailures + 1 < config.webhookCooldownAfter) return undefined
        const disabled = yield* endpoints.failing(
          delivery.orgId,
          delivery.targetId,
          `${delivery.targetFailures + 1} consecutive failed attempts; last: ${error}`
        )
        if (disabled === undefined) return undefined
        yield* queue.failUndelivered("webhook", delivery.targetId, `endpoint deactivated: ${disabled}`, { except: delivery.id })
        return { outcome: Outcome.failed(`${error}; endpoint deactivated: ${disabled}`), attempt }
      })

      /** The request of one attempt: the stored body bytes, signed now. */
      const requestOf = (delivery: Claimed, target: SendTarget, type: string, body: Buffer, started: number) => ({
        url: target.url,
        method: "POST" as const,
        headers: deliveryHeaders(target.secrets, { id: delivery.eventId ?? "", type }, Math.floor(started / 1000), body, target.headers),
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
        orgId: delivery.orgId
      })

      /** What the answer (or the failure) of an attempt makes of the delivery. */
      const outcomeOf = Effect.fnUntraced(function*(
        delivery: Claimed,
        target: SendTarget,
        sent: OutboundResponse | OutboundFailure,
        started: number
      ) {
        if (sent instanceof OutboundFailure) {
          const error = sent.message
          const attempt = { error, durationMs: (yield* Clock.currentTimeMillis) - started }
          return (yield* noteFailure(delivery, error, attempt)) ?? failedAttempt(schedule, delivery, error, attempt)
        }
        const attempt = {
          statusCode: sent.status,
          responseSnippet: snippet(sent.body, sent.truncated, target.url),
          durationMs: sent.elapsedMs
        }
        if (sent.status >= 200 && sent.status < 300) {
          // Only after failures (never on the healthy path): the failing streak, if any, is over.
          if (delivery.targetFailures > 0) yield* endpoints.recovered(delivery.orgId, delivery.targetId)
          return { outcome: DELIVERED, attempt }
        }
        if (sent.status === 410) {
          const reason = "the receiver answered 410 Gone"
          yield* endpoints.deactivate(delivery.orgId, delivery.targetId, reason)
          yield* queue.failUndelivered("webhook", delivery.targetId, `endpoint deactivated: ${reason}`, {
            except: delivery.id
          })
          return { outcome: Outcome.failed(`410 Gone: endpoint deactivated`), attempt: { ...attempt, error: reason } }
        }
        const error = sent.status >= 300 && sent.status < 400
          ? `HTTP ${sent.status} (redirects are not followed)`
          : `HTTP ${sent.status}`
        const retryAfter = sent.status === 429 || sent.status === 503
          ? parseRetryAfter(sent.headers["retry-after"], yield* Clock.currentTimeMillis)
          : undefined
        return (yield* noteFailure(delivery, error, { ...attempt, error })) ??
          failedAttempt(schedule, delivery, error, { ...attempt, error }, retryAfter)
      })

      /** An attempt at a broker destination: acknowledged (delivered), or failed as a network failure is. */
      const publish = Effect.fnUntraced(function*(delivery: Claimed, target: SendTarget, type: string, body: Buffer, started: number) {
        const { headers } = requestOf(delivery, target, type, body, started)
        const message = { eventId: delivery.eventId ?? "", type, headers, body, timeoutMs: Duration.toMillis(config.webhookSendTimeout) }
        const sent = yield* brokers.publish(target.url, delivery.orgId, message).pipe(Effect.catch((failure) => Effect.succeed(failure)))
        // This process had no connection for it: given back, not an attempt against the endpoint.
        if (sent instanceof ConnectionsBusy) {
          return { outcome: Outcome.retry(Duration.zero, sent.message), attempt: { error: sent.message, durationMs: 0 }, giveBack: true } satisfies Settlement
        }
        if (sent instanceof OutboundFailure) return yield* outcomeOf(delivery, target, sent, started)
        if (delivery.targetFailures > 0) yield* endpoints.recovered(delivery.orgId, delivery.targetId)
        return { outcome: DELIVERED, attempt: { durationMs: sent.elapsedMs } }
      })

      const send = Effect.fnUntraced(function*(delivery: Claimed) {
        const target = yield* endpoints.sendTarget(delivery.orgId, delivery.targetId)
        if (target === undefined) return notSent("endpoint deleted")
        if (!target.active) return notSent(`endpoint inactive: ${target.deactivatedReason ?? "deactivated"}`)
        const event = bodies.get(delivery.eventId ?? "") ?? (yield* EventRows.one(sql`
          SELECT type, body FROM events WHERE id = ${delivery.eventId} AND org_id = ${delivery.orgId}
        `))
        if (event === undefined) return notSent("event no longer stored")
        yield* Effect.annotateCurrentSpan("svc.event_type", event.type)
        const body = Buffer.from(event.body, "utf8")
        const started = yield* Clock.currentTimeMillis
        if (!target.url.startsWith("https:")) return yield* publish(delivery, target, event.type, body, started)
        const sent = yield* outbound.send(requestOf(delivery, target, event.type, body, started)).pipe(
          Effect.catch((failure) => Effect.succeed(failure))
        )
        return yield* outcomeOf(delivery, target, sent, started)
      })
      const deliver = (delivery: Claimed) =>
        Effect.withSpan(send(delivery), "WebhookSender.deliver", {
          // Not `Effect.fn`: a stack trace per delivery span was ~1 % of the
          // drain's CPU and says nothing a delivery's attributes do not.
          captureStackTrace: false,
          attributes: spanAttributes(delivery)
        })

      const deliverDirect = directDeliveries({
        // Broker destinations are sent by `deliver` (stored URLs have a lower-case scheme).
        sendTargetNow: (orgId, id) => {
          const target = endpoints.sendTargetNow(orgId, id)
          return target?.url.startsWith("https:") === true ? target : undefined
        },
        body: bodies.get,
        spans: Option.getOrUndefined(yield* spanStarter),
        clock: yield* Clock.Clock,
        fork: yield* FiberSet.makeRuntime<never, Settlement, never>(),
        sendDirect: outbound.sendDirect,
        spanAttributes,
        requestOf,
        outcomeOf,
        snippet
      })

      /** The bound a delivery shares: its organization and its endpoint's destination host (and port). */
      const hostGroup = (delivery: Claimed) =>
        endpoints.sendTarget(delivery.orgId, delivery.targetId).pipe(
          Effect.map((target) => {
            if (target === undefined) return undefined
            try {
              return `${delivery.orgId} ${new URL(target.url).host}`
            } catch {
              return undefined
            }
          })
        )

      return WebhookSender.of({ deliver, deliverDirect, hostGroup })
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
    yield* runWorker({
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
      group: sender.hostGroup,
      perGroup: config.webhookPerHost,
      handle: sender.deliver,
      handleDirect: sender.deliverDirect
    })
  }))
}
