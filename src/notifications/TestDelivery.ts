/**
 * Test deliveries (`POST /v1/notification-endpoints/:id/test`): one signed
 * event sent at once while the caller waits, through the same outbound
 * guard and deadline as every delivery, with `"test": true` in the body and
 * an example approval (all-zero ids, step `example`). It is recorded among
 * the endpoint's deliveries (label `test <type>`, meta `test`), never
 * retried or replayed, and counts towards neither the cooldown nor the
 * statistics; a 410 answer does not deactivate the endpoint.
 *
 * How often one endpoint can be tested is bounded by
 * `SVC_WEBHOOK_TESTS_PER_MINUTE`, counted in a fixed one-minute window on
 * the endpoint's row and claimed by one UPDATE, so the bound holds across
 * processes.
 */
import { PgClient } from "@effect/sql-pg"
import { Clock, Context, Duration, Effect, Layer, Schema } from "effect"
import { NotFound, RateLimited } from "../api/Errors.ts"
import type { WebhookEvent } from "../api/Events.ts"
import { DeliveryFailed, type EventType, EventTypes, InvalidWebhookEvents } from "../api/Notifications.ts"
import { Brokers, ConnectionsBusy } from "../brokers/Brokers.ts"
import { DeliveryOperations } from "../deliveries/records/Operations.ts"
import { OutboundHttp } from "../outbound/OutboundHttp.ts"
import { SvcConfig } from "../platform/Config.ts"
import { newId } from "../platform/Ids.ts"
import { rowsOf } from "../platform/Rows.ts"
import { makeAuthorizedSend } from "./auth/AuthorizedSend.ts"
import { EndpointTokens } from "./auth/Tokens.ts"
import { NotificationEndpoints } from "./Endpoints.ts"
import { SendTargets } from "./send/SendTargets.ts"
import { deliveryHeaders } from "./send/Signing.ts"
import { httpError } from "./send/Verdict.ts"

/** Whether a test of the endpoint's window was taken, and how long until the next window. */
const WindowRows = rowsOf(
  "notification_endpoints",
  Schema.Struct({ claimed: Schema.Boolean, retry_after: Schema.Number })
)

/** The ids of the example approval a test event carries: plainly not a real one. */
const EXAMPLE_ID = "00000000-0000-0000-0000-000000000000"

/** Meta key marking a test delivery (bulk replay and statistics leave such deliveries out). */
export const TEST_META_KEY = "test"

const WINDOW_SECONDS = 60

const isEventType = (type: string): type is EventType => (EventTypes as ReadonlyArray<string>).includes(type)

/**
 * The body of a test event of `type` for the endpoint: an ordinary event of
 * that type (its schema in src/api/Events.ts) with `"test": true`. An
 * approval event carries an example approval; an operational one is about
 * the endpoint itself, as the real event would say it.
 */
const testEventBody = (input: {
  readonly id: string
  readonly type: EventType
  readonly orgId: string
  readonly occurredAt: Date
  readonly endpoint: { readonly id: string; readonly url_hint: string }
}): string => {
  const occurredAt = input.occurredAt.toISOString()
  const head = { id: input.id, org_id: input.orgId, occurred_at: occurredAt, test: true } as const
  const reason = "example: this is a test event"
  const endpoint = { id: input.endpoint.id, url_hint: input.endpoint.url_hint, reason }
  const later = (seconds: number) => new Date(input.occurredAt.getTime() + seconds * 1000).toISOString()
  const approval = <S extends "pending" | "approved" | "rejected" | "expired">(status: S) => ({
    approval_id: EXAMPLE_ID,
    session_id: EXAMPLE_ID,
    step_id: "example",
    task_id: null,
    status,
    deadline_at: later(600),
    expires_at: later(1200),
    timeout_action: "reject" as const
  })
  const decided = { decided_at: occurredAt, decided_by: "example", decision_reason: reason }
  const event: WebhookEvent = input.type === "endpoint.disabled"
    ? { ...head, type: input.type, endpoint: { ...endpoint, active: false, deactivated_at: occurredAt } }
    : input.type === "endpoint.failing"
    ? { ...head, type: input.type, endpoint: { ...endpoint, active: true, failing_since: occurredAt } }
    : input.type === "endpoint.certificate_expiring"
    ? { ...head, type: input.type, endpoint: { ...endpoint, active: true, certificate_expires_at: later(14 * 86_400) } }
    : input.type === "approval.approved"
    ? { ...head, type: input.type, approval: { ...approval("approved"), ...decided } }
    : input.type === "approval.rejected"
    ? { ...head, type: input.type, approval: { ...approval("rejected"), ...decided } }
    : input.type === "approval.expired"
    ? { ...head, type: input.type, approval: approval("expired") }
    : { ...head, type: input.type, approval: approval("pending") }
  // Key order as in every other event: id, type, org_id, occurred_at, test, then the snapshot.
  const { id, type, org_id, occurred_at, test, ...rest } = event
  return JSON.stringify({ id, type, org_id, occurred_at, test, ...rest })
}

export class TestDeliveries extends Context.Service<TestDeliveries, {
  readonly send: (orgId: string, endpointId: string, eventType: string | undefined) => Effect.Effect<
    { readonly delivered: true; readonly status?: number; readonly duration_ms: number },
    NotFound | InvalidWebhookEvents | DeliveryFailed | RateLimited
  >
}>()("svc/notifications/TestDeliveries") {
  static readonly layer = Layer.effect(
    TestDeliveries,
    Effect.gen(function*() {
      const sql = yield* PgClient.PgClient
      const endpoints = yield* NotificationEndpoints
      const targets = yield* SendTargets
      const outbound = yield* OutboundHttp
      const brokers = yield* Brokers
      const operations = yield* DeliveryOperations
      const config = yield* SvcConfig
      const limit = config.webhookTestsPerMinute
      const authorizedSend = makeAuthorizedSend(outbound, yield* EndpointTokens)

      /** Takes one test of the endpoint's window, or answers how long until the next window. */
      const claim = Effect.fnUntraced(function*(orgId: string, endpointId: string) {
        const lapsed = sql`test_window_at IS NULL OR test_window_at <= now() - make_interval(secs => ${WINDOW_SECONDS})`
        const row = yield* WindowRows.one(sql`
          WITH claimed AS (
            UPDATE notification_endpoints
            SET test_window_at = CASE WHEN ${lapsed} THEN now() ELSE test_window_at END,
                test_count = CASE WHEN ${lapsed} THEN 1 ELSE test_count + 1 END
            WHERE id = ${endpointId} AND org_id = ${orgId} AND (${lapsed} OR test_count < ${limit})
            RETURNING id
          )
          SELECT EXISTS (SELECT 1 FROM claimed) AS claimed,
                 coalesce((SELECT ceil(extract(epoch FROM test_window_at + make_interval(secs => ${WINDOW_SECONDS}) - now()))::int
                           FROM notification_endpoints WHERE id = ${endpointId} AND org_id = ${orgId}), 1) AS retry_after
        `)
        if (row?.claimed === true) return
        return yield* new RateLimited({
          limit: "SVC_WEBHOOK_TESTS_PER_MINUTE",
          limit_value: limit,
          retry_after_seconds: Math.max(1, row?.retry_after ?? 1),
          detail:
            `This endpoint was sent ${limit} test events in the last minute, the most allowed (SVC_WEBHOOK_TESTS_PER_MINUTE); retry in ${
              Math.max(1, row?.retry_after ?? 1)
            } s.`
        })
      })

      const send = Effect.fn("TestDeliveries.send")(
        function*(orgId: string, endpointId: string, eventType: string | undefined) {
          const endpoint = yield* endpoints.find(orgId, endpointId)
          const type = eventType ?? endpoint.events[0]!
          if (!endpoint.events.includes(type) || !isEventType(type)) {
            return yield* new InvalidWebhookEvents({
              field: "event_type",
              detail: `event_type ${JSON.stringify(type.slice(0, 100))} is not one of the endpoint's events`,
              supported: [...endpoint.events]
            })
          }
          yield* claim(orgId, endpointId)
          const target = yield* targets.get(orgId, endpointId)
          if (target === undefined) return yield* new NotFound({ detail: "No such notification endpoint." })
          const id = newId()
          const now = new Date(yield* Clock.currentTimeMillis)
          const body = Buffer.from(testEventBody({ id, type, orgId, occurredAt: now, endpoint }), "utf8")
          const started = performance.now()
          const headers = deliveryHeaders(
            target.secrets,
            { id, type },
            Math.floor(now.getTime() / 1000),
            body,
            target.headers
          )
          const record = (
            status: "delivered" | "failed",
            attempt: { statusCode?: number; error?: string; durationMs: number }
          ) =>
            operations.recordFinished({
              orgId,
              kind: "webhook",
              targetId: endpointId,
              label: `test ${type}`,
              eventId: id,
              status,
              meta: { [TEST_META_KEY]: true },
              attempt
            })
          const failed = Effect.fnUntraced(function*(error: string) {
            const durationMs = Math.round(performance.now() - started)
            yield* record("failed", { error, durationMs })
            return yield* new DeliveryFailed({
              error,
              duration_ms: durationMs,
              detail: `The test delivery failed: ${error}.`
            })
          })
          if (!target.url.startsWith("https:")) {
            // A broker destination: acknowledged, or failed; no HTTP status either way.
            const published = yield* brokers.publish(target.url, orgId, {
              eventId: id,
              type,
              headers,
              body,
              timeoutMs: Duration.toMillis(config.webhookSendTimeout)
            }).pipe(Effect.result)
            if (published._tag === "Failure" && published.failure instanceof ConnectionsBusy) {
              // A limit of this process, not the broker's answer: not recorded.
              const busy = published.failure
              return yield* new RateLimited({
                limit: busy.limit,
                limit_value: busy.limitValue,
                retry_after_seconds: 1,
                detail: `The test event was not sent: ${busy.message}; retry in 1 s.`
              })
            }
            if (published._tag === "Failure") return yield* failed(published.failure.message)
            const durationMs = Math.round(published.success.elapsedMs)
            yield* record("delivered", { durationMs })
            return { delivered: true as const, duration_ms: durationMs }
          }
          const sent = yield* authorizedSend(
            {
              url: target.url,
              method: "POST",
              headers,
              body,
              timeout: config.webhookSendTimeout,
              maxResponseBytes: 1,
              partition: orgId,
              connections: config.webhookPerHost + config.maxEndpointsPerOrg,
              orgId,
              clientCertificate: target.clientCertificate
            },
            target.oauth,
            orgId
          ).pipe(Effect.result)
          if (sent._tag === "Failure") return yield* failed(sent.failure.message)
          const response = sent.success
          const durationMs = Math.round(response.elapsedMs)
          if (response.status >= 200 && response.status < 300) {
            yield* record("delivered", { statusCode: response.status, durationMs })
            return { delivered: true as const, status: response.status, duration_ms: durationMs }
          }
          const error = httpError(response.status)
          yield* record("failed", { statusCode: response.status, error, durationMs })
          return yield* new DeliveryFailed({
            receiver_status: response.status,
            error,
            duration_ms: durationMs,
            detail: `The receiver answered ${response.status}.`
          })
        }
      )

      return TestDeliveries.of({ send })
    })
  )
}
