/**
 * A reviewer address set through the API decides approvals (each approval
 * mail carries a decision link), so it receives approval mail only once its
 * mailbox has confirmed it: a new address is sent one confirmation mail,
 * through the same SMTP path, whose link confirms it once, before it
 * expires, and only while it is still the organization's address. Mails go
 * through a real SMTP client to an SMTP server on loopback.
 */
import { assert, describe, layer } from "@effect/vitest"
import { Duration, Effect, Layer, Option, Redacted } from "effect"
import { createHash } from "node:crypto"
import { SvcTest } from "../../../src/testing.ts"
import { eventually, raw } from "../../support/http.ts"
import {
  confirmAddress,
  confirmationsTo,
  confirmedReviewer,
  decodeQuotedPrintable,
  nextConfirmation,
  type SinkMail,
  smtpSink
} from "../../support/reviewerMail.ts"
import { eventBody, insertEvents, webhookService } from "./support.ts"

const mails: Array<SinkMail> = []
const mailsTo = (address: string) => mails.filter((m) => m.to.includes(address)).map((m) => m.data)

const PER_HOUR = 4

/** Recipients the SMTP server refuses for now (a temporary 451), so their mails wait to be retried. */
const refusing = new Set<string>()

const WithSmtp = Layer.unwrap(Effect.gen(function*() {
  const port = yield* smtpSink((mail) => mails.push(mail), (address) => refusing.has(address))
  return webhookService({
    smtpUrl: Option.some(Redacted.make(`smtp://127.0.0.1:${port}/?from=approvals%40svc.test`)),
    reviewerConfirmationsPerHour: PER_HOUR,
    // Room to change the settings between a refused attempt and its retry.
    webhookRetrySchedule: Array.from({ length: 8 }, () => Duration.millis(500))
  })
}))

const sha256 = (value: string) => createHash("sha256").update(value).digest("hex")

/** Waits until the event has been fanned out (so a mail it would cause is queued by now). */
const dispatched = (eventId: string) =>
  Effect.gen(function*() {
    const sql = (yield* SvcTest).sql
    yield* eventually(
      Effect.map(
        sql<{ n: number }>`SELECT count(*)::int AS n FROM undispatched_events WHERE id = ${eventId}`,
        (rows) => rows[0]!.n === 0 ? true : undefined
      ),
      { what: "the event dispatched" }
    )
  })

layer(WithSmtp, { excludeTestServices: true })("confirming a reviewer address", (it) => {
  describe("a new address", () => {
    it.effect("is pending and sent one confirmation mail; it gets no approval mail until confirmed, then it does", () =>
      Effect.gen(function*() {
        const svc = yield* SvcTest
        const org = yield* SvcTest.org()
        const address = "new-reviewer@example.com"
        const set = yield* org.client.notifications.updateSettings({ payload: { reviewer_email: address } })
        assert.deepStrictEqual(set, {
          reviewer_email: address,
          reviewer_email_status: "pending",
          email_notifier: false
        })
        assert.deepStrictEqual(yield* org.client.notifications.getSettings(), set)
        assert.isFalse((yield* org.client.notifications.list()).email_notifier)
        const token = yield* nextConfirmation(mailsTo, address, 0)
        const mail = decodeQuotedPrintable(mailsTo(address)[0]!)
        assert.include(mail, `${svc.baseUrl}/console/confirm-address#${token}`)
        assert.match(mail, /Subject: Confirm this address for approval requests/)
        // Only the token's hash is stored.
        const stored = yield* svc.sql<
          { token_hash: string }
        >`SELECT token_hash FROM reviewer_confirmations WHERE org_id = ${org.orgId}`
        assert.deepStrictEqual(stored.map((r) => r.token_hash), [sha256(token)])
        assert.isFalse(svc.logLines().some((line) => line.includes(token.slice(4))), "no log line holds the token")

        // An approval request while pending: no mail, no email delivery.
        const before = eventBody(org.orgId, "approval.requested")
        yield* insertEvents([before])
        yield* dispatched(before.id)
        const queued = yield* svc.sql<{ n: number }>`
          SELECT count(*)::int AS n FROM deliveries WHERE kind = 'email' AND org_id = ${org.orgId} AND event_id IS NOT NULL
        `
        assert.strictEqual(queued[0]!.n, 0)
        assert.isFalse(mails.some((m) => m.data.includes(before.approval.approval_id)))

        const confirmed = yield* confirmAddress(svc.baseUrl, token)
        assert.strictEqual(confirmed.status, 200, confirmed.text)
        assert.strictEqual(confirmed.json.reviewer_email, address)
        assert.strictEqual(confirmed.json.reviewer_email_status, "confirmed")
        assert.deepStrictEqual(yield* org.client.notifications.getSettings(), {
          reviewer_email: address,
          reviewer_email_status: "confirmed",
          email_notifier: true
        })

        const after = eventBody(org.orgId, "approval.requested")
        yield* insertEvents([after])
        const decision = yield* eventually(
          Effect.sync(() =>
            mailsTo(address).map(decodeQuotedPrintable).find((text) => text.includes(after.approval.approval_id))
          ),
          { what: "the approval mail after confirmation" }
        )
        assert.include(decision, "Approval requested.")
        assert.isFalse(
          mails.some((m) => m.data.includes(before.approval.approval_id)),
          "the earlier request stays unmailed"
        )
      }))

    it.effect("the confirmation link works once: a second use is 410 CONFIRMATION_LINK_USED", () =>
      Effect.gen(function*() {
        const svc = yield* SvcTest
        const org = yield* SvcTest.org()
        yield* org.client.notifications.updateSettings({ payload: { reviewer_email: "once@example.com" } })
        const token = yield* nextConfirmation(mailsTo, "once@example.com", 0)
        assert.strictEqual((yield* confirmAddress(svc.baseUrl, token)).status, 200)
        const again = yield* confirmAddress(svc.baseUrl, token)
        assert.strictEqual(again.status, 410, again.text)
        assert.strictEqual(again.json.code, "CONFIRMATION_LINK_USED")
        assert.isString(again.json.used_at)
      }))

    it.effect("an expired confirmation link is 410 CONFIRMATION_LINK_EXPIRED and the address stays pending", () =>
      Effect.gen(function*() {
        const svc = yield* SvcTest
        const org = yield* SvcTest.org()
        yield* org.client.notifications.updateSettings({ payload: { reviewer_email: "late@example.com" } })
        const token = yield* nextConfirmation(mailsTo, "late@example.com", 0)
        // Its time to live (SVC_REVIEWER_CONFIRMATION_TTL) has passed, by the database's clock.
        const [{ ttl }] = yield* svc.sql<{ ttl: number }>`
          SELECT extract(epoch FROM expires_at - created_at)::int AS ttl FROM reviewer_confirmations WHERE token_hash = ${
          sha256(token)
        }
        `
        assert.strictEqual(ttl, 24 * 3600)
        yield* svc.sql`UPDATE reviewer_confirmations SET expires_at = now() - interval '1 second' WHERE token_hash = ${
          sha256(token)
        }`
        const late = yield* confirmAddress(svc.baseUrl, token)
        assert.strictEqual(late.status, 410, late.text)
        assert.strictEqual(late.json.code, "CONFIRMATION_LINK_EXPIRED")
        assert.strictEqual((yield* org.client.notifications.getSettings()).reviewer_email_status, "pending")
      }))

    it.effect("a confirmation link of a replaced address confirms nothing: 410 REVIEWER_ADDRESS_REPLACED; the new address stays pending", () =>
      Effect.gen(function*() {
        const svc = yield* SvcTest
        const org = yield* SvcTest.org()
        yield* org.client.notifications.updateSettings({ payload: { reviewer_email: "first@example.com" } })
        const first = yield* nextConfirmation(mailsTo, "first@example.com", 0)
        yield* org.client.notifications.updateSettings({ payload: { reviewer_email: "second@example.com" } })
        const refused = yield* confirmAddress(svc.baseUrl, first)
        assert.strictEqual(refused.status, 410, refused.text)
        assert.strictEqual(refused.json.code, "REVIEWER_ADDRESS_REPLACED")
        assert.deepStrictEqual(yield* org.client.notifications.getSettings(), {
          reviewer_email: "second@example.com",
          reviewer_email_status: "pending",
          email_notifier: false
        })
        // Set back to the first address: a new setting, which the old link does not confirm either.
        yield* org.client.notifications.updateSettings({ payload: { reviewer_email: "first@example.com" } })
        const old = yield* confirmAddress(svc.baseUrl, first)
        assert.strictEqual(old.status, 410)
        assert.strictEqual((yield* org.client.notifications.getSettings()).reviewer_email_status, "pending")
      }))

    it.effect("confirming needs the console header and the console's own origin", () =>
      Effect.gen(function*() {
        const svc = yield* SvcTest
        const org = yield* SvcTest.org()
        yield* org.client.notifications.updateSettings({ payload: { reviewer_email: "csrf-confirm@example.com" } })
        const token = yield* nextConfirmation(mailsTo, "csrf-confirm@example.com", 0)
        const bare = yield* confirmAddress(svc.baseUrl, token, {})
        assert.strictEqual(bare.status, 403)
        assert.strictEqual(bare.json.code, "CROSS_SITE_REQUEST")
        const otherSite = yield* confirmAddress(svc.baseUrl, token, {
          "x-svc-console": "1",
          origin: "https://evil.example"
        })
        assert.strictEqual(otherSite.status, 403)
        assert.strictEqual((yield* org.client.notifications.getSettings()).reviewer_email_status, "pending")
      }))

    it.effect("a token the service did not issue is 404 CONFIRMATION_LINK_INVALID; a decision link's token confirms nothing", () =>
      Effect.gen(function*() {
        const svc = yield* SvcTest
        for (const bad of [`svr_${"A".repeat(43)}`, `sva_${"A".repeat(43)}`, "x"]) {
          const refused = yield* confirmAddress(svc.baseUrl, bad)
          assert.strictEqual(refused.status, 404, refused.text)
          assert.strictEqual(refused.json.code, "CONFIRMATION_LINK_INVALID")
        }
      }))
  })

  describe("a mail queued before the address changed", () => {
    it.effect("is not sent to the new, pending address: the address is read when the mail goes", () =>
      Effect.gen(function*() {
        const svc = yield* SvcTest
        const org = yield* SvcTest.org()
        yield* confirmedReviewer(org, svc.baseUrl, "outgoing@example.com", mailsTo)
        refusing.add("outgoing@example.com")
        const event = eventBody(org.orgId, "approval.requested")
        yield* insertEvents([event])
        // Its first attempt was refused and recorded; it waits for a retry.
        yield* eventually(
          Effect.map(
            svc.sql<{ status: string }>`SELECT status FROM deliveries WHERE kind = 'email' AND event_id = ${event.id}`,
            (rows) => rows[0]?.status === "retrying" ? true : undefined
          ),
          { what: "a refused first attempt" }
        )
        yield* org.client.notifications.updateSettings({ payload: { reviewer_email: "incoming@example.com" } })
        refusing.delete("outgoing@example.com")
        const [row] = yield* eventually(
          Effect.map(
            svc.sql<{ status: string; last_error: string | null }>`
            SELECT status, last_error FROM deliveries WHERE kind = 'email' AND event_id = ${event.id}
          `,
            (rows) => rows[0]?.status === "failed" ? rows : undefined
          ),
          { what: "the delivery given up" }
        )
        assert.strictEqual(row!.last_error, "no confirmed reviewer address any more")
        assert.isFalse(mails.some((m) => m.data.includes(event.id)), "mailed to nobody")
      }))
  })

  describe("setting the address again", () => {
    it.effect("the same pending address is sent a new mail; the same confirmed address nothing; clearing it ends it", () =>
      Effect.gen(function*() {
        const svc = yield* SvcTest
        const org = yield* SvcTest.org()
        const address = "again@example.com"
        yield* org.client.notifications.updateSettings({ payload: { reviewer_email: address } })
        const first = yield* nextConfirmation(mailsTo, address, 0)
        yield* org.client.notifications.updateSettings({ payload: { reviewer_email: address } })
        const second = yield* nextConfirmation(mailsTo, address, 1)
        assert.notStrictEqual(first, second)
        assert.strictEqual((yield* confirmAddress(svc.baseUrl, second)).status, 200)
        const still = yield* org.client.notifications.updateSettings({ payload: { reviewer_email: address } })
        assert.strictEqual(still.reviewer_email_status, "confirmed")
        // Nothing more is queued for it.
        const [{ n }] = yield* svc.sql<{ n: number }>`
          SELECT count(*)::int AS n FROM deliveries WHERE kind = 'email' AND org_id = ${org.orgId} AND label = 'reviewer.confirmation'
        `
        assert.strictEqual(n, 2)
        const cleared = yield* org.client.notifications.updateSettings({ payload: { reviewer_email: null } })
        assert.deepStrictEqual(cleared, { reviewer_email: null, reviewer_email_status: null, email_notifier: false })
        assert.strictEqual(confirmationsTo(mailsTo, address), 2)
      }))

    it.effect(`over SVC_REVIEWER_CONFIRMATIONS_PER_HOUR confirmation mails an hour: 429 RATE_LIMITED naming it, the address unchanged`, () =>
      Effect.gen(function*() {
        const svc = yield* SvcTest
        const org = yield* SvcTest.org()
        for (let i = 0; i < PER_HOUR; i++) {
          yield* org.client.notifications.updateSettings({ payload: { reviewer_email: `r${i}@example.com` } })
        }
        const refused = yield* raw(`${svc.baseUrl}/v1/notification-settings`, {
          method: "PUT",
          headers: { authorization: `Bearer ${org.key}`, "content-type": "application/json" },
          body: JSON.stringify({ reviewer_email: "one-too-many@example.com" })
        })
        assert.strictEqual(refused.status, 429, refused.text)
        assert.strictEqual(refused.json.code, "RATE_LIMITED")
        assert.strictEqual(refused.json.limit, "SVC_REVIEWER_CONFIRMATIONS_PER_HOUR")
        assert.strictEqual(refused.json.limit_value, PER_HOUR)
        assert.isAbove(refused.json.retry_after_seconds, 0)
        assert.strictEqual(
          (yield* org.client.notifications.getSettings()).reviewer_email,
          `r${PER_HOUR - 1}@example.com`
        )
        // Clearing the address sends nothing and is never refused.
        const cleared = yield* org.client.notifications.updateSettings({ payload: { reviewer_email: null } })
        assert.isNull(cleared.reviewer_email)
        // Another organization has its own window.
        const other = yield* SvcTest.org()
        assert.strictEqual(
          (yield* other.client.notifications.updateSettings({ payload: { reviewer_email: "other@example.com" } }))
            .reviewer_email_status,
          "pending"
        )
      }))
  })
})
