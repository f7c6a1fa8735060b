/**
 * Deciding from a reviewer mail: mails about a pending approval (requested,
 * expiring, escalated) carry a link to that approval's page in the console
 * under the service's public address (by default the address it listens
 * on). The link opens that approval only, reading it changes nothing and
 * signs nobody in, a decision through it is a console-guarded POST naming
 * `email:<reviewer address>`, and once the approval is closed the link shows
 * the final state. Mails go through a real SMTP client to an SMTP server on
 * loopback.
 */
import { assert, describe, layer } from "@effect/vitest"
import { Effect, Layer, Option, Redacted } from "effect"
import { createHash } from "node:crypto"
import { ConsoleSessions } from "../../../src/console/ConsoleSessions.ts"
import { SvcTest } from "../../../src/testing.ts"
import { asConsole, consoleSession } from "../../support/console.ts"
import { eventually, raw } from "../../support/http.ts"
import { confirmedReviewer, decodeQuotedPrintable, smtpSink } from "../../support/reviewerMail.ts"
import { eventBody, insertEvents, webhookService } from "../webhooks/support.ts"

interface Mail {
  readonly to: ReadonlyArray<string>
  /** The message with quoted-printable soft breaks and escapes undone. */
  readonly text: string
}

const mails: Array<Mail> = []
const mailsTo = (address: string) => mails.filter((m) => m.to.includes(address)).map((m) => m.text)

const WithSmtp = Layer.unwrap(Effect.gen(function*() {
  const port = yield* smtpSink((mail) => mails.push({ to: mail.to, text: decodeQuotedPrintable(mail.data) }))
  // Console sessions too: a person signs in as themselves (`consoleSession`).
  return ConsoleSessions.layer.pipe(
    Layer.provideMerge(
      webhookService({ smtpUrl: Option.some(Redacted.make(`smtp://127.0.0.1:${port}/?from=approvals%40svc.test`)) })
    )
  )
}))

const LINK = /(\S+)\/console\/decide#(sva_[A-Za-z0-9_-]{43})/

const sha256 = (value: string) => createHash("sha256").update(value).digest("hex")

/** An organization with a reviewer address and a pending approval; the mail of its request and the link in it. */
const pendingWithMail = (address: string, stepId = "refund-1", quorum?: number) =>
  Effect.gen(function*() {
    const svc = yield* SvcTest
    const org = yield* SvcTest.org()
    yield* confirmedReviewer(org, svc.baseUrl, address, mailsTo)
    if (quorum !== undefined) {
      yield* org.client.approvalPolicies.put({
        params: { action_class: "payments.refund" },
        payload: {
          mode: "require_approval",
          review_seconds: 900,
          expiring_notice_seconds: 300,
          timeout_action: "reject",
          quorum
        }
      })
    }
    const task = yield* org.client.tasks.create({
      payload: { name: "Support refunds", answer_schema: { type: "object" } }
    })
    const session = yield* org.client.agentSessions.create({ payload: { task_id: task.id } })
    yield* org.client.agentSessions.governStep({
      params: { session_id: session.id },
      payload: { step_id: "lookup", tool: "crm.lookup", action_class: "crm.read", arguments: { customer: 7 } }
    })
    const answer = yield* org.client.agentSessions.governStep({
      params: { session_id: session.id },
      payload: { step_id: stepId, tool: "stripe.refund", action_class: "payments.refund", arguments: { amount: 42 } }
    })
    const approvalId = answer.approval_id!
    const mail = yield* eventually(
      Effect.sync(() => mails.find((m) => m.to.includes(address) && m.text.includes(approvalId))),
      { what: "the mail of the request" }
    )
    const match = LINK.exec(mail.text)
    assert.isNotNull(match, mail.text)
    const open = (token: string) =>
      raw(`${svc.baseUrl}/v1/approval-links/open`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ token })
      })
    const decide = (
      token: string,
      body: Record<string, unknown>,
      headers: Record<string, string> = { "x-svc-console": "1" }
    ) =>
      raw(`${svc.baseUrl}/v1/approval-links/decision`, {
        method: "POST",
        headers: { "content-type": "application/json", ...headers },
        body: JSON.stringify({ token, ...body })
      })
    return { svc, org, session, approvalId, mail, base: match![1]!, token: match![2]!, open, decide }
  })

layer(WithSmtp, { excludeTestServices: true })("deciding from the reviewer mail", (it) => {
  describe("links of an address no longer in the settings", () => {
    for (const [change, next] of [["replaced", "successor@example.com"], ["removed", null]] as const) {
      it.effect(`once the address is ${change}, its links open and decide nothing: 410 REVIEWER_ADDRESS_REPLACED, the approval stays pending`, () =>
        Effect.gen(function*() {
          const address = `${change}@example.com`
          const { org, approvalId, token, open, decide } = yield* pendingWithMail(address)
          assert.strictEqual((yield* open(token)).status, 200)
          yield* org.client.notifications.updateSettings({ payload: { reviewer_email: next } })
          const opened = yield* open(token)
          assert.strictEqual(opened.status, 410, opened.text)
          assert.strictEqual(opened.json.code, "REVIEWER_ADDRESS_REPLACED")
          assert.notInclude(opened.text, "stripe.refund", "the approval's tool and arguments are not shown")
          const decided = yield* decide(token, { decision: "approve" })
          assert.strictEqual(decided.status, 410, decided.text)
          assert.strictEqual(decided.json.code, "REVIEWER_ADDRESS_REPLACED")
          assert.strictEqual(
            (yield* org.client.approvals.get({ params: { approval_id: approvalId } })).status,
            "pending"
          )
        }))
    }

    it.effect("setting the same address again after a replacement does not revive its earlier links", () =>
      Effect.gen(function*() {
        const { svc, org, approvalId, token, open, decide } = yield* pendingWithMail("comeback@example.com")
        yield* confirmedReviewer(org, svc.baseUrl, "interim@example.com", mailsTo)
        yield* confirmedReviewer(org, svc.baseUrl, "comeback@example.com", mailsTo)
        assert.strictEqual((yield* org.client.notifications.getSettings()).reviewer_email_status, "confirmed")
        assert.strictEqual((yield* open(token)).status, 410)
        assert.strictEqual((yield* decide(token, { decision: "reject" })).status, 410)
        assert.strictEqual((yield* org.client.approvals.get({ params: { approval_id: approvalId } })).status, "pending")
      }))
  })

  describe("the link in the mail", () => {
    it.effect("a requested mail links to /console/decide#<token> under the listen address; only the token's hash is stored, and no log line holds it", () =>
      Effect.gen(function*() {
        const { svc, approvalId, base, token, mail } = yield* pendingWithMail("link@example.com")
        assert.strictEqual(base, svc.baseUrl)
        assert.include(mail.text, "approve or reject it in the console")
        const rows = yield* svc.sql<{ token_hash: string; approval_id: string; reviewer_email: string }>`
          SELECT token_hash, approval_id, reviewer_email FROM approval_mail_links WHERE approval_id = ${approvalId}
        `
        assert.deepStrictEqual(rows.map((r) => [r.token_hash, r.reviewer_email]), [[sha256(token), "link@example.com"]])
        const stored = yield* svc.sql<{ row: string }>`SELECT row_to_json(l)::text AS row FROM approval_mail_links l`
        assert.isFalse(stored.some((r) => r.row.includes(token)), "the token itself is stored nowhere")
        const secret = token.slice(4)
        assert.isFalse(svc.logLines().some((line) => line.includes(secret)), "no log line holds the token")
      }))

    it.effect("expiring and escalated mails carry a link too, a new one each", () =>
      Effect.gen(function*() {
        const { org, approvalId, svc } = yield* pendingWithMail("notices@example.com")
        const events = (["approval.expiring", "approval.escalated"] as const).map((type) =>
          eventBody(org.orgId, type, approvalId)
        )
        yield* insertEvents(events)
        const noticeMails = yield* eventually(
          Effect.sync(() => {
            const found = events.map((event) => mails.find((m) => m.text.includes(event.id)))
            return found.every((m) => m !== undefined) ? found as Array<Mail> : undefined
          }),
          { what: "the expiring and escalated mails" }
        )
        const tokens = noticeMails.map((m) => LINK.exec(m.text)?.[2])
        assert.isTrue(tokens.every((t) => t !== undefined))
        const [{ n }] = yield* svc.sql<
          { n: number }
        >`SELECT count(*)::int AS n FROM approval_mail_links WHERE approval_id = ${approvalId}`
        assert.strictEqual(n, 3)
        assert.strictEqual(new Set(tokens).size, 2)
      }))
  })

  describe("opening the link", () => {
    it.effect("shows the approval, its task's name and earlier steps, and who a decision names; it changes nothing and signs nobody in", () =>
      Effect.gen(function*() {
        const { svc, org, approvalId, token, open } = yield* pendingWithMail("reader@example.com")
        // What a link scanner does: fetch the page, read the approval, twice.
        const page = yield* raw(`${svc.baseUrl}/console/decide`)
        assert.strictEqual(page.status, 200)
        for (let i = 0; i < 2; i++) {
          const opened = yield* open(token)
          assert.strictEqual(opened.status, 200, opened.text)
          assert.isNull(opened.headers.get("set-cookie"))
          assert.strictEqual(opened.json.approval.approval_id, approvalId)
          assert.strictEqual(opened.json.approval.status, "pending")
          assert.strictEqual(opened.json.approval.tool, "stripe.refund")
          assert.strictEqual(opened.json.task_name, "Support refunds")
          assert.deepStrictEqual(opened.json.earlier_steps.map((s: any) => s.step_id), ["lookup"])
          assert.strictEqual(opened.json.decider, "email:reader@example.com")
        }
        assert.strictEqual((yield* org.client.approvals.get({ params: { approval_id: approvalId } })).status, "pending")
        // The token is no credential anywhere else.
        for (const path of ["/v1/console/session", `/v1/agent-approvals/${approvalId}`]) {
          const asBearer = yield* raw(`${svc.baseUrl}${path}`, { headers: { authorization: `Bearer ${token}` } })
          assert.strictEqual(asBearer.status, 401, path)
        }
      }))

    it.effect("a token the service did not issue opens nothing: 404 APPROVAL_LINK_INVALID", () =>
      Effect.gen(function*() {
        const { open, decide, token } = yield* pendingWithMail("unknown@example.com")
        const forged = `sva_${"A".repeat(43)}`
        for (const bad of [forged, token.slice(0, -1), "svl_x", token.slice(4)]) {
          const opened = yield* open(bad)
          assert.strictEqual(opened.status, 404, opened.text)
          assert.strictEqual(opened.json.code, "APPROVAL_LINK_INVALID")
          assert.strictEqual((yield* decide(bad, { decision: "approve" })).status, 404)
        }
      }))
  })

  describe("deciding through the link", () => {
    it.effect("needs the console header and the console's own origin; a cross-site post decides nothing", () =>
      Effect.gen(function*() {
        const { org, approvalId, token, decide } = yield* pendingWithMail("csrf@example.com")
        const noHeader = yield* decide(token, { decision: "approve" }, {})
        assert.strictEqual(noHeader.status, 403, noHeader.text)
        assert.strictEqual(noHeader.json.code, "CROSS_SITE_REQUEST")
        const otherSite = yield* decide(token, { decision: "approve" }, {
          "x-svc-console": "1",
          origin: "https://evil.example"
        })
        assert.strictEqual(otherSite.status, 403)
        const fetchSite = yield* decide(token, { decision: "approve" }, {
          "x-svc-console": "1",
          "sec-fetch-site": "cross-site"
        })
        assert.strictEqual(fetchSite.status, 403)
        assert.strictEqual((yield* org.client.approvals.get({ params: { approval_id: approvalId } })).status, "pending")
      }))

    it.effect("approve: the record names email:<reviewer address>, with the reason; then the link shows the final state and decides no more", () =>
      Effect.gen(function*() {
        const { org, approvalId, token, open, decide } = yield* pendingWithMail("alex@example.com")
        const decided = yield* decide(token, { decision: "approve", reason: "Ticket 4411." })
        assert.strictEqual(decided.status, 200, decided.text)
        assert.strictEqual(decided.json.approval.status, "approved")
        const snapshot = yield* org.client.approvals.get({ params: { approval_id: approvalId } })
        assert.strictEqual(snapshot.status, "approved")
        assert.strictEqual(snapshot.decided_by, "email:alex@example.com")
        assert.strictEqual(snapshot.decision_reason, "Ticket 4411.")
        const after = yield* open(token)
        assert.strictEqual(after.status, 200)
        assert.deepStrictEqual(after.json.approval, { ...decided.json.approval })
        assert.strictEqual(after.json.approval.decided_by, "email:alex@example.com")
        const again = yield* decide(token, { decision: "reject" })
        assert.strictEqual(again.status, 409, again.text)
        assert.strictEqual(again.json.code, "INVALID_TRANSITION")
        assert.strictEqual(again.json.status_now, "approved")
      }))

    it.effect("with a quorum, the shared address's link names no person: it cannot vote (403 PERSON_REQUIRED), so it and one console vote cannot close a 2-of-n approval", () =>
      Effect.gen(function*() {
        const svc = yield* SvcTest
        const { org, approvalId, token, decide } = yield* pendingWithMail("quorum@example.com", "refund-1", 2)
        const viaMail = yield* decide(token, { decision: "approve", reason: "Ticket 4411." })
        assert.strictEqual(viaMail.status, 403, viaMail.text)
        assert.strictEqual(viaMail.json.code, "PERSON_REQUIRED")
        const rejecting = yield* decide(token, { decision: "reject" })
        assert.strictEqual(rejecting.status, 403, rejecting.text)
        const ana = yield* consoleSession(svc.baseUrl, org.orgId, "approver", "ana")
        const byAna = yield* asConsole(svc.baseUrl, ana.cookie, "POST", `/v1/agent-approvals/${approvalId}/decision`, {
          decision: "approve"
        })
        assert.strictEqual(byAna.status, 200, byAna.text)
        const after = yield* org.client.approvals.get({ params: { approval_id: approvalId } })
        assert.deepStrictEqual([after.status, after.approvals_remaining], ["pending", 1])
        assert.deepStrictEqual(after.votes!.map((v) => v.decided_by), ["console:ana"])
        // The page shows the approval and who it waits for; the link still decides nothing.
        assert.strictEqual((yield* decide(token, { decision: "approve" })).status, 403)
      }))

    it.effect("a link decides its own approval only: another approval of the same organization stays pending", () =>
      Effect.gen(function*() {
        const first = yield* pendingWithMail("one@example.com", "first")
        const answer = yield* first.org.client.agentSessions.governStep({
          params: { session_id: first.session.id },
          payload: {
            step_id: "second",
            tool: "stripe.refund",
            action_class: "payments.refund",
            arguments: { amount: 1 }
          }
        })
        const rejected = yield* first.decide(first.token, { decision: "reject" })
        assert.strictEqual(rejected.status, 200)
        assert.strictEqual(rejected.json.approval.approval_id, first.approvalId)
        assert.strictEqual(
          (yield* first.org.client.approvals.get({ params: { approval_id: answer.approval_id! } })).status,
          "pending"
        )
      }))

    it.effect("a link for approval A cannot decide approval B: naming B beside A's token is refused and B stays pending", () =>
      Effect.gen(function*() {
        const a = yield* pendingWithMail("a-not-b@example.com", "a")
        const b = yield* a.org.client.agentSessions.governStep({
          params: { session_id: a.session.id },
          payload: { step_id: "b", tool: "stripe.refund", action_class: "payments.refund", arguments: { amount: 2 } }
        })
        const named = yield* a.decide(a.token, { decision: "approve", approval_id: b.approval_id })
        assert.strictEqual(named.status, 400, named.text)
        const opened = yield* a.open(a.token)
        assert.strictEqual(opened.json.approval.approval_id, a.approvalId)
        const decided = yield* a.decide(a.token, { decision: "approve" })
        assert.strictEqual(decided.json.approval.approval_id, a.approvalId)
        assert.strictEqual(
          (yield* a.org.client.approvals.get({ params: { approval_id: b.approval_id! } })).status,
          "pending"
        )
      }))

    it.effect("edited arguments through a link: checked against the class's schema as it is when the person decides (refused without one)", () =>
      Effect.gen(function*() {
        const { org, approvalId, token, decide } = yield* pendingWithMail("edits@example.com")
        const unchecked = yield* decide(token, { decision: "approve", arguments: { amount: 40 } })
        assert.strictEqual(unchecked.status, 422, unchecked.text)
        assert.strictEqual(unchecked.json.code, "ARGUMENTS_SHAPE_MISMATCH")
        const misplaced = yield* decide(token, { decision: "approve", response: "no" })
        assert.strictEqual(misplaced.status, 400, misplaced.text)
        assert.strictEqual(misplaced.json.field, "response")
        yield* org.client.approvalPolicies.put({
          params: { action_class: "payments.refund" },
          payload: {
            mode: "require_approval",
            review_seconds: 900,
            expiring_notice_seconds: 300,
            timeout_action: "reject",
            arguments_schema: { type: "object", properties: { amount: { type: "number", maximum: 40 } } }
          }
        })
        const over = yield* decide(token, { decision: "approve", arguments: { amount: 41 } })
        assert.strictEqual(over.status, 422, over.text)
        assert.strictEqual(over.json.field, "arguments.amount")
        const decided = yield* decide(token, { decision: "approve", arguments: { amount: 40 } })
        assert.strictEqual(decided.status, 200, decided.text)
        assert.deepStrictEqual(decided.json.approval.approved_arguments, { amount: 40 })
        assert.deepStrictEqual(decided.json.approval.arguments_changed, ["/amount"])
        const snapshot = yield* org.client.approvals.get({ params: { approval_id: approvalId } })
        assert.strictEqual(snapshot.decided_by, "email:edits@example.com")
        assert.deepStrictEqual(snapshot.approved_arguments, { amount: 40 })
      }))

    it.effect("an answer through a link: rejected, with the response", () =>
      Effect.gen(function*() {
        const { org, approvalId, token, decide } = yield* pendingWithMail("answers@example.com")
        const decided = yield* decide(token, { decision: "reject", response: "Refunds go through the billing desk." })
        assert.strictEqual(decided.status, 200, decided.text)
        const snapshot = yield* org.client.approvals.get({ params: { approval_id: approvalId } })
        assert.deepStrictEqual([snapshot.status, snapshot.response], [
          "rejected",
          "Refunds go through the billing desk."
        ])
      }))

    it.effect("a reason over 1 000 characters is 400 naming reason", () =>
      Effect.gen(function*() {
        const { token, decide } = yield* pendingWithMail("long@example.com")
        const refused = yield* decide(token, { decision: "reject", reason: "y".repeat(1001) })
        assert.strictEqual(refused.status, 400)
        assert.strictEqual(refused.json.field, "reason")
      }))
  })
})
