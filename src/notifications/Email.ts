/**
 * Reviewer email: approval requests and deadline notices (requested,
 * expiring, escalated) mailed to the organization's reviewer address when
 * `SVC_SMTP_URL` is set (spec, delivery rule 6: final approved and rejected
 * events are for webhook receivers only). The dispatcher queues one `email`
 * delivery per such event; this worker sends it with nodemailer and the
 * shared queue retries it on the webhook schedule.
 *
 * The SMTP server is the operator's configuration, not a user-supplied
 * address, so it does not go through the outbound URL guard. A `from`
 * query parameter of `SVC_SMTP_URL` sets the sender address.
 */
import { PgClient } from "@effect/sql-pg"
import { Context, Duration, Effect, Layer, Option, Redacted } from "effect"
import nodemailer from "nodemailer"
import type { Claimed } from "../deliveries/DeliveryQueue.ts"
import { Outcome } from "../deliveries/DeliveryQueue.ts"
import { runWorker, type Settlement } from "../deliveries/DeliveryWorker.ts"
import { SvcConfig } from "../platform/Config.ts"
import { retryDelay, WebhookSender } from "./Sender.ts"

const DEFAULT_FROM = "svc notifications <notifications@svc.invalid>"

const subjects: Record<string, string> = {
  "approval.requested": "Approval requested",
  "approval.expiring": "Approval deadline approaching",
  "approval.escalated": "Approval escalated: another review window"
}

interface Approval {
  readonly approval_id?: string
  readonly session_id?: string
  readonly step_id?: string
  readonly task_id?: string | null
  readonly status?: string
  readonly deadline_at?: string | null
  readonly expires_at?: string | null
  readonly timeout_action?: string
}

/** Subject and plain-text body of a reviewer email for one event. */
export const renderEmail = (type: string, body: string) => {
  const event = JSON.parse(body) as { readonly id: string; readonly approval?: Approval }
  const approval = event.approval ?? {}
  const lines = [
    `${subjects[type] ?? type}.`,
    "",
    `Approval: ${approval.approval_id ?? "?"}`,
    `Session: ${approval.session_id ?? "?"}`,
    `Step: ${approval.step_id ?? "?"}`,
    ...(approval.task_id ? [`Task: ${approval.task_id}`] : []),
    `Status: ${approval.status ?? "?"}`,
    ...(approval.deadline_at ? [`Review deadline: ${approval.deadline_at}`] : []),
    ...(approval.expires_at ? [`Expires at: ${approval.expires_at}`] : []),
    ...(approval.timeout_action ? [`If nobody decides: ${approval.timeout_action}`] : []),
    "",
    `Event: ${event.id}`
  ]
  return { subject: `${subjects[type] ?? type}: ${approval.approval_id ?? ""}`.trim(), text: lines.join("\n") }
}

export class ReviewerEmail extends Context.Service<ReviewerEmail, {
  readonly deliver: (delivery: Claimed) => Effect.Effect<Settlement>
}>()("svc/notifications/ReviewerEmail") {
  static readonly layer = Layer.effect(
    ReviewerEmail,
    Effect.gen(function*() {
      const sql = yield* PgClient.PgClient
      const config = yield* SvcConfig
      const transport = Option.map(config.smtpUrl, (url) => {
        const parsed = new URL(Redacted.value(url))
        const from = parsed.searchParams.get("from") ?? DEFAULT_FROM
        parsed.searchParams.delete("from")
        return { from, mailer: nodemailer.createTransport(parsed.toString()) }
      })
      yield* Effect.addFinalizer(() => Effect.sync(() => Option.map(transport, (t) => t.mailer.close())))

      const deliver = Effect.fn("Notifications.email")(function*(delivery: Claimed) {
        yield* Effect.annotateCurrentSpan({ "svc.org_id": delivery.orgId, "svc.delivery_id": delivery.id })
        const [row] = yield* sql<{ reviewer_email: string | null; type: string; body: string }>`
          SELECT s.reviewer_email, e.type, e.body
          FROM events e LEFT JOIN notification_settings s ON s.org_id = e.org_id
          WHERE e.id = ${delivery.eventId} AND e.org_id = ${delivery.orgId}
        `.pipe(Effect.orDie)
        if (Option.isNone(transport) || row === undefined || row.reviewer_email === null) {
          const error = "reviewer email is not configured any more"
          return { outcome: Outcome.failed(error), attempt: { error, durationMs: 0 } }
        }
        const { subject, text } = renderEmail(row.type, row.body)
        const started = Date.now()
        const sent = yield* Effect.tryPromise({
          try: () =>
            transport.value.mailer.sendMail({
              from: transport.value.from,
              to: row.reviewer_email!,
              subject,
              text,
              headers: { "X-Svc-Event-Id": delivery.eventId ?? "", "X-Svc-Event-Type": row.type }
            }),
          // Only the SMTP reply code and status: messages may quote addresses.
          catch: (error) => {
            const e = error as { responseCode?: number; code?: string }
            return `SMTP send failed (${e.responseCode ?? e.code ?? "unknown"})`
          }
        }).pipe(Effect.timeout(Duration.seconds(30)), Effect.result)
        const durationMs = Date.now() - started
        if (sent._tag === "Success") return { outcome: Outcome.delivered(), attempt: { durationMs } }
        const error = typeof sent.failure === "string" ? sent.failure : "SMTP send timed out"
        const delay = retryDelay(config.webhookRetrySchedule, delivery.attempts)
        return {
          outcome: delay === undefined
            ? Outcome.failed(`${error}; no retries left`)
            : Outcome.retry(new Date(Date.now() + delay), error),
          attempt: { error, durationMs }
        }
      })

      return ReviewerEmail.of({ deliver })
    })
  )

  static readonly worker = Layer.effectDiscard(Effect.gen(function*() {
    const email = yield* ReviewerEmail
    const config = yield* SvcConfig
    yield* runWorker({
      kind: "email",
      concurrency: 4,
      perTarget: 2,
      leaseFor: Duration.minutes(2),
      pollEvery: Duration.seconds(5),
      cooldown: WebhookSender.cooldown(config),
      handle: email.deliver
    })
  }))
}
