/**
 * Reviewer email: with SVC_SMTP_URL set and a confirmed reviewer
 * address, requests and deadline notices are mailed through a real SMTP
 * client to a local SMTP server; final decisions are for webhooks only.
 */
import { assert, describe, layer } from "@effect/vitest"
import { Effect, Layer, Option, Redacted } from "effect"
import { SvcTest } from "../../../src/testing.ts"
import { eventually } from "../../support/http.ts"
import { HttpsReceiver } from "../../support/HttpsReceiver.ts"
import { confirmedReviewer, type SinkMail, smtpSink } from "../../support/reviewerMail.ts"
import { eventBody, type EventType, insertEvents, waitForDeliveries, webhookService } from "./support.ts"

const mails: Array<SinkMail> = []
const mailsTo = (address: string) => mails.filter((m) => m.to.includes(address)).map((m) => m.data)

const WithSmtp = Layer.unwrap(Effect.gen(function*() {
  const port = yield* smtpSink((mail) => mails.push(mail))
  return webhookService({
    smtpUrl: Option.some(Redacted.make(`smtp://127.0.0.1:${port}/?from=approvals%40svc.test`))
  })
}))

layer(WithSmtp, { excludeTestServices: true })("reviewer email", (it) => {
  describe("email_notifier", () => {
    it.effect("is true exactly when SVC_SMTP_URL is set and the organization's reviewer address is confirmed", () =>
      Effect.gen(function*() {
        const org = yield* SvcTest.org()
        assert.strictEqual((yield* org.client.notifications.list()).email_notifier, false)
        const set = yield* org.client.notifications.updateSettings({
          payload: { reviewer_email: "reviewers@example.com" }
        })
        // Pending until its confirmation mail's link is opened.
        assert.isFalse(set.email_notifier)
        yield* confirmedReviewer(org, (yield* SvcTest).baseUrl, "reviewers@example.com", mailsTo)
        assert.isTrue((yield* org.client.notifications.list()).email_notifier)
        assert.deepStrictEqual(yield* org.client.notifications.getSettings(), {
          reviewer_email: "reviewers@example.com",
          reviewer_email_status: "confirmed",
          email_notifier: true
        })
        yield* org.client.notifications.updateSettings({ payload: { reviewer_email: null } })
        assert.isFalse((yield* org.client.notifications.list()).email_notifier)
      }))
  })

  describe("mail", () => {
    it.effect("requested, expiring and escalated are mailed to the reviewer; approved, rejected and expired are not; webhooks get all six", () =>
      Effect.gen(function*() {
        const receiver = yield* HttpsReceiver.make()
        const org = yield* SvcTest.org()
        const { endpoint } = yield* org.client.notifications.create({ payload: { url: receiver.url("/all") } })
        yield* confirmedReviewer(org, (yield* SvcTest).baseUrl, "team-reviewers@example.com", mailsTo)
        const types: ReadonlyArray<EventType> = [
          "approval.requested",
          "approval.expiring",
          "approval.escalated",
          "approval.approved",
          "approval.rejected",
          "approval.expired"
        ]
        const events = types.map((type) => eventBody(org.orgId, type))
        yield* insertEvents(events)
        yield* waitForDeliveries(
          endpoint.id,
          (rows) => rows.length === 6 && rows.every((r) => r.status === "delivered")
        )
        const mine = yield* eventually(
          Effect.sync(() => {
            const found = mails.filter((mail) =>
              mail.to.includes("team-reviewers@example.com") && /X-Svc-Event-Id/i.test(mail.data)
            )
            return found.length >= 3 ? found : undefined
          }),
          { what: "three mails" }
        )
        const ids = mine.map((mail) => /X-Svc-Event-Id: (\S+)/i.exec(mail.data)?.[1])
        assert.sameMembers(ids, events.slice(0, 3).map((e) => e.id))
        assert.strictEqual(mine[0]!.from, "approvals@svc.test")
        const requested = mine.find((mail) => mail.data.includes(events[0]!.id))!
        assert.include(requested.data, "Approval requested")
        assert.include(requested.data, events[0]!.approval.approval_id)
        const sql = (yield* SvcTest).sql
        // The mail server has the mails before the sender records them: poll for the records.
        const emailRows = yield* eventually(
          Effect.map(
            sql<
              { status: string }
            >`SELECT status FROM deliveries WHERE kind = 'email' AND org_id = ${org.orgId} AND event_id IS NOT NULL`,
            (rows) => rows.every((r) => r.status === "delivered") ? rows : undefined
          ),
          { what: "the email deliveries recorded" }
        )
        assert.deepStrictEqual(emailRows.map((r) => r.status), ["delivered", "delivered", "delivered"])
      }).pipe(Effect.scoped))

    it.effect("a mail carries no text the tenant wrote: a step_id is left out, only ids, statuses, timestamps and fixed words", () =>
      Effect.gen(function*() {
        const org = yield* SvcTest.org()
        yield* confirmedReviewer(org, (yield* SvcTest).baseUrl, "anyone@example.org", mailsTo)
        const spam = "WIN FREE MONEY at https://evil.example/claim?x=1"
        const base = eventBody(org.orgId, "approval.requested")
        const event = { ...base, approval: { ...base.approval, step_id: spam } }
        yield* insertEvents([event])
        const mail = yield* eventually(Effect.sync(() => mails.find((m) => m.data.includes(event.id))), {
          what: "the mail"
        })
        assert.deepStrictEqual(mail.to, ["anyone@example.org"])
        assert.include(mail.data, event.approval.approval_id)
        assert.include(mail.data, `GET /v1/agent-approvals/${event.approval.approval_id}`)
        assert.notInclude(mail.data, "evil.example")
        assert.notInclude(mail.data, "FREE MONEY")
        assert.notInclude(mail.data, "step-1")
        // The body, headers and subject decoded: every line is fixed wording or one of our ids and times.
        const body = mail.data.slice(mail.data.indexOf("\r\n\r\n") + 4).replace(/=\r\n/g, "")
        for (const line of body.split(/\r?\n/).filter((l) => l.trim() !== "")) {
          assert.match(
            line,
            /^(Approval requested\.|Approval: [0-9a-f-]{36}|Session: [0-9a-f-]{36}|Task: [0-9a-f-]{36}|Status: (pending|approved|rejected|expired)|Review deadline: [0-9T:.Z-]+|Expires at: [0-9T:.Z-]+|If nobody decides: (reject|allow)|Read the step and decide through the API: GET \/v1\/agent-approvals\/[0-9a-f-]{36}, GET \/v1\/agent-sessions\/[0-9a-f-]{36}|Event: [0-9a-f-]{36})$/,
            line
          )
        }
      }))

    it.effect("an organization without a reviewer address gets no mail", () =>
      Effect.gen(function*() {
        const org = yield* SvcTest.org()
        const event = eventBody(org.orgId, "approval.requested")
        yield* insertEvents([event])
        const sql = (yield* SvcTest).sql
        yield* eventually(Effect.map(
          sql<{ n: number }>`SELECT count(*)::int AS n FROM undispatched_events WHERE id = ${event.id}`,
          (rows) => rows[0]!.n === 0 ? true : undefined
        ))
        const rows = yield* sql`SELECT 1 FROM deliveries WHERE kind = 'email' AND org_id = ${org.orgId}`
        assert.strictEqual(rows.length, 0)
        assert.isFalse(mails.some((mail) => mail.data.includes(event.id)))
      }))
  })
})
