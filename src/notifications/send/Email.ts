/**
 * Reviewer email: approval requests and deadline notices (requested,
 * expiring, escalated) mailed to the organization's confirmed reviewer
 * address, or for an approval assigned to a reviewer group to each of its
 * members' confirmed own addresses, when `SVC_SMTP_URL` is set (final approved and rejected events
 * are for webhook receivers only), and the confirmation mail a new address
 * is sent (`ReviewerAddress.ts`). The dispatcher queues one `email`
 * delivery per such event; this worker sends it with nodemailer and the
 * shared queue retries it on the webhook schedule.
 *
 * The SMTP server is the operator's configuration, not a user-supplied
 * address, so it does not go through the outbound URL guard. A `from`
 * query parameter of `SVC_SMTP_URL` sets the sender address.
 */
import { PgClient } from "@effect/sql-pg"
import { Clock, Context, Duration, Effect, Layer, Option, Redacted, Schema } from "effect"
import nodemailer from "nodemailer"
import { ApprovalEvent } from "../../api/Events.ts"
import { CONFIRM_META_KEY } from "../../approvals/AddressConfirmations.ts"
import { issueMailLink, mailLinkUrl, serviceBaseUrl } from "../../approvals/MailLinks.ts"
import { MEMBER_META_KEY, memberAddressStands } from "../../approvals/MemberAddresses.ts"
import type { Claimed, Settlement } from "../../deliveries/DeliveryQueue.ts"
import { Outcome } from "../../deliveries/DeliveryQueue.ts"
import { runWorker } from "../../deliveries/worker/DeliveryWorker.ts"
import { SvcConfig } from "../../platform/Config.ts"
import { rowsOf } from "../../platform/Rows.ts"
import { confirmationUrl, issueConfirmation } from "./ConfirmationLinks.ts"
import { WebhookSender } from "./Sender.ts"
import { failedAttempt, notSent } from "./Verdict.ts"

const DEFAULT_FROM = "svc notifications <notifications@svc.invalid>"

const subjects: Record<string, string> = {
  "approval.requested": "Approval requested",
  "approval.expiring": "Approval deadline approaching",
  "approval.escalated": "Approval escalated: another review window"
}

/** The event to mail and where to: the confirmed reviewer address, if any, its setting's id and the member it is of (null: the organization's). */
const MailRows = rowsOf(
  "events",
  Schema.Struct({
    reviewer_email: Schema.NullOr(Schema.String),
    reviewer_address_id: Schema.NullOr(Schema.String),
    member: Schema.NullOr(Schema.String),
    type: Schema.String,
    body: Schema.String
  })
)

/**
 * What may appear in a reviewer email. The recipient is an address the
 * tenant chose, and the sender is the operator's: so a mail carries only
 * values svc made itself, each checked against the one form it can take
 * (ids, timestamps, fixed words), never a string the tenant wrote (a
 * `step_id`, a tool name, arguments...). Anything else is left out.
 */
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/
const TIMESTAMP = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d{1,9})?Z$/
const STATUSES = new Set(["pending", "approved", "rejected", "expired"])
const TIMEOUT_ACTIONS = new Set(["reject", "allow"])

const decodeEvent = Schema.decodeUnknownOption(Schema.fromJsonString(ApprovalEvent))

const safe = (value: unknown, form: RegExp | ReadonlySet<string>): string | undefined =>
  typeof value === "string" && (form instanceof RegExp ? form.test(value) : form.has(value)) ? value : undefined

/**
 * Subject and plain-text body of a reviewer email for one event: the event
 * type's fixed wording, the approval's ids, status, deadlines and timeout
 * action, and where to read it. `step_id` is the tenant's text: it is not
 * mailed (read it with the API). `link`, when given, is this approval's
 * page in the console (svc's own address and a token it made), where the
 * reviewer reads the step and approves or rejects it.
 */
export const renderEmail = (type: string, body: string, link?: string) => {
  // The body is the contract's event, decoded once; one that is not (never
  // written by svc) still gets the type's fixed wording and nothing else.
  const event = Option.getOrUndefined(decodeEvent(body))
  const approval = event?.approval
  // An escalation that handed the approval along a chain says so; the group's
  // name is the tenant's text, its level a number svc counted.
  const level = approval?.escalation_level ?? 0
  const handedOn = type === "approval.escalated" && level > 0
  const subject = handedOn
    ? "Approval escalated: handed to the next reviewer group"
    : subjects[type] ?? "Approval notice"
  const approvalId = safe(approval?.approval_id, UUID)
  const sessionId = safe(approval?.session_id, UUID)
  const taskId = safe(approval?.task_id, UUID)
  const status = safe(approval?.status, STATUSES)
  const deadline = safe(approval?.deadline_at, TIMESTAMP)
  const expires = safe(approval?.expires_at, TIMESTAMP)
  const timeoutAction = safe(approval?.timeout_action, TIMEOUT_ACTIONS)
  const eventId = safe(event?.id, UUID)
  const lines = [
    `${subject}.`,
    "",
    `Approval: ${approvalId ?? "?"}`,
    `Session: ${sessionId ?? "?"}`,
    ...(taskId ? [`Task: ${taskId}`] : []),
    `Status: ${status ?? "?"}`,
    ...(deadline ? [`Review deadline: ${deadline}`] : []),
    ...(expires ? [`Expires at: ${expires}`] : []),
    ...(timeoutAction ? [`If nobody decides: ${timeoutAction}`] : []),
    ...(handedOn ? [`Escalation level: ${level} (the group of the escalation chain it is now with)`] : []),
    "",
    ...(link === undefined
      ? []
      : ["Read the step and approve or reject it in the console (this link opens this approval only):", link, ""]),
    ...(approvalId
      ? [
        `Read the step and decide through the API: GET /v1/agent-approvals/${approvalId}, GET /v1/agent-sessions/${
          sessionId ?? "?"
        }`
      ]
      : []),
    `Event: ${eventId ?? "?"}`
  ]
  return { subject: `${subject}: ${approvalId ?? ""}`.trim(), text: lines.join("\n") }
}

/**
 * Subject and plain-text body of the mail that asks a new reviewer address
 * to confirm itself: svc's fixed wording, its own link and the link's
 * expiry; nothing the tenant wrote.
 */
export const renderConfirmation = (link: string, expiresAt: Date) => ({
  subject: "Confirm this address for approval requests",
  text: [
    "This address was set to receive approval requests of an organization on svc.",
    "It receives none until it is confirmed: open this link and press Confirm (it works once):",
    link,
    "",
    `The link expires at ${expiresAt.toISOString()}.`,
    "If you did not expect this mail, ignore it: nothing is sent to this address without confirmation."
  ].join("\n")
})

export class ReviewerEmail extends Context.Service<ReviewerEmail, {
  readonly deliver: (delivery: Claimed) => Effect.Effect<Settlement>
}>()("svc/notifications/ReviewerEmail") {
  static readonly layer = Layer.effect(
    ReviewerEmail,
    Effect.gen(function*() {
      const sql = yield* PgClient.PgClient
      const config = yield* SvcConfig
      // Links name `SVC_PUBLIC_URL`, else the address the server listens on.
      const baseUrl = yield* serviceBaseUrl
      const transport = Option.map(config.smtpUrl, (url) => {
        const parsed = new URL(Redacted.value(url))
        const from = parsed.searchParams.get("from") ?? DEFAULT_FROM
        parsed.searchParams.delete("from")
        return { from, mailer: nodemailer.createTransport(parsed.toString()) }
      })
      yield* Effect.addFinalizer(() => Effect.sync(() => Option.map(transport, (t) => t.mailer.close())))

      /** A confirmation mail: its link is made now, for the address setting the delivery names, while it is pending. */
      const confirmation = Effect.fn("ReviewerEmail.confirmation")(function*(delivery: Claimed, addressId: string) {
        const issued = yield* issueConfirmation(sql, delivery.orgId, addressId, config.reviewerConfirmationTtl)
        if (Option.isNone(issued)) return Option.none()
        const { subject, text } = renderConfirmation(
          confirmationUrl(baseUrl(), issued.value.token),
          issued.value.expiresAt
        )
        return Option.some({
          to: issued.value.address,
          subject,
          text,
          headers: { "X-Svc-Mail-Type": "reviewer.confirmation" }
        })
      })

      /**
       * A mail about an approval event: to the organization's confirmed
       * address, or, when the delivery names a member's address setting
       * (`MEMBER_META_KEY`), to that member's, while it is confirmed.
       */
      const approvalMail = Effect.fn("ReviewerEmail.approvalMail")(function*(delivery: Claimed) {
        const memberAddress = delivery.meta[MEMBER_META_KEY]
        // The address is read when the mail goes: a pending one (replaced
        // after the delivery was queued) is sent nothing.
        const row = yield* MailRows.one(
          typeof memberAddress === "string"
            ? sql`
              SELECT a.email AS reviewer_email, a.address_id AS reviewer_address_id, a.member, e.type, e.body
              FROM events e LEFT JOIN reviewer_member_addresses a
                ON a.org_id = e.org_id AND a.address_id = ${memberAddress} AND ${sql.literal(memberAddressStands("a"))}
              WHERE e.id = ${delivery.eventId} AND e.org_id = ${delivery.orgId}
            `
            : sql`
              SELECT s.reviewer_email, s.reviewer_address_id, NULL::text AS member, e.type, e.body
              FROM events e LEFT JOIN notification_settings s ON s.org_id = e.org_id AND s.reviewer_confirmed_at IS NOT NULL
              WHERE e.id = ${delivery.eventId} AND e.org_id = ${delivery.orgId}
            `
        )
        if (row === undefined || row.reviewer_email === null || row.reviewer_address_id === null) {
          return "no confirmed reviewer address any more"
        }
        if (subjects[row.type] === undefined) return `${row.type} events are not mailed`
        // A new link for each mail (only its hash is kept, so an earlier
        // mail's link cannot be sent again); each opens this approval only,
        // while this address setting is current, and a member's decides as
        // that member.
        const approvalId = safe(Option.getOrUndefined(decodeEvent(row.body))?.approval.approval_id, UUID)
        const token = approvalId === undefined
          ? Option.none<string>()
          : yield* issueMailLink(
            sql,
            delivery.orgId,
            approvalId,
            row.reviewer_email,
            row.reviewer_address_id,
            row.member
          )
        const link = Option.map(token, (t) => mailLinkUrl(baseUrl(), t))
        const { subject, text } = renderEmail(row.type, row.body, Option.getOrUndefined(link))
        return {
          to: row.reviewer_email,
          subject,
          text,
          headers: {
            "X-Svc-Event-Id": safe(delivery.eventId, UUID) ?? "",
            "X-Svc-Event-Type": row.type
          }
        }
      })

      const deliver = Effect.fn("ReviewerEmail.deliver")(function*(delivery: Claimed) {
        yield* Effect.annotateCurrentSpan({ "svc.org_id": delivery.orgId, "svc.delivery_id": delivery.id })
        if (Option.isNone(transport)) return notSent("reviewer email is not configured any more")
        const confirms = delivery.meta[CONFIRM_META_KEY]
        // A string: why nothing is sent.
        const message = typeof confirms === "string"
          ? Option.getOrElse(
            yield* confirmation(delivery, confirms),
            () => "the address to confirm was replaced, removed or confirmed since"
          )
          : yield* approvalMail(delivery)
        if (typeof message === "string") return notSent(message)
        const started = yield* Clock.currentTimeMillis
        const sent = yield* Effect.tryPromise({
          // `message` is the mail's `to`, `subject`, `text` and `headers`.
          try: () => transport.value.mailer.sendMail({ from: transport.value.from, ...message }),
          // Only the SMTP reply code and status: messages may quote addresses.
          catch: (error) => {
            const e = error as { responseCode?: number; code?: string }
            return `SMTP send failed (${e.responseCode ?? e.code ?? "unknown"})`
          }
        }).pipe(Effect.timeout(Duration.seconds(30)), Effect.result)
        const durationMs = (yield* Clock.currentTimeMillis) - started
        if (sent._tag === "Success") return { outcome: Outcome.delivered(), attempt: { durationMs } }
        const error = typeof sent.failure === "string" ? sent.failure : "SMTP send timed out"
        return failedAttempt(config.webhookRetrySchedule, delivery, error, { error, durationMs })
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
