/**
 * Reviewer mail to the assigned group: a group member may carry their own
 * address (one per person per organization), confirmed as the
 * organization's is. Mail about an approval assigned to a group (requested,
 * expiring, escalated) goes to each confirmed member address of the group
 * it is assigned to at that event (after each escalation, the chain's group
 * it was handed to), one mail each with its own link, and
 * not to the organization's address; a member's link decides as that
 * member (one vote under a quorum), and stops deciding once the member is
 * removed from the group or their address is replaced. Mails go through a
 * real SMTP client to an SMTP server on loopback.
 */
import { assert, describe, layer } from "@effect/vitest"
import { Effect, Layer, Option, Redacted } from "effect"
import type { PolicyInput } from "../../../src/api/Policies.ts"
import type { GroupMemberInput } from "../../../src/api/Reviewers.ts"
import { ConsoleSessions } from "../../../src/console/ConsoleSessions.ts"
import { SvcTest, type TestOrg } from "../../../src/testing.ts"
import { outboxOf } from "../../support/approvals.ts"
import { asConsole, consoleSession } from "../../support/console.ts"
import { eventually, raw } from "../../support/http.ts"
import {
  confirmAddress,
  confirmationsTo,
  confirmedReviewer,
  decodeQuotedPrintable,
  nextConfirmation,
  smtpSink
} from "../../support/reviewerMail.ts"
import { webhookService } from "../webhooks/support.ts"

interface Mail {
  readonly to: ReadonlyArray<string>
  readonly text: string
}

const mails: Array<Mail> = []
const mailsTo = (address: string) => mails.filter((m) => m.to.includes(address)).map((m) => m.text)
/** The approval mails `address` got about `approvalId` (its id is in the subject and body; confirmation mails carry none). */
const approvalMails = (address: string, approvalId: string) =>
  mailsTo(address).filter((text) => text.includes(`Approval: ${approvalId}`))

const WithSmtp = Layer.unwrap(Effect.gen(function*() {
  const port = yield* smtpSink((mail) => mails.push({ to: mail.to, text: decodeQuotedPrintable(mail.data) }))
  // Console sessions too: a member accepts their address signed in as themselves (`consoleSession`).
  return ConsoleSessions.layer.pipe(Layer.provideMerge(
    webhookService({
      smtpUrl: Option.some(Redacted.make(`smtp://127.0.0.1:${port}/?from=approvals%40svc.test`)),
      reviewerConfirmationsPerHour: 20
    })
  ))
}))

const LINK = /\/console\/decide#(sva_[A-Za-z0-9_-]{43})/

const settings = { review_seconds: 900, expiring_notice_seconds: 0, timeout_action: "reject" } as const

/** Each test its own addresses: the sink is shared by the file. */
let serial = 0
const addressOf = (name: string) => `${name}.${++serial}@example.com`

/** The secrets of the member keys the tests make, by id: a key accepts its own address with itself. */
const keySecrets = new Map<string, string>()
const memberKey = (org: TestOrg) =>
  Effect.tap(org.newKey(["approvals.decide"]), (key) => Effect.sync(() => keySecrets.set(key.keyId, key.key)))

/** `member` sets (or accepts) their own address, as themselves: signed in to the console, or with their own key. */
const acceptAs = (org: TestOrg, member: GroupMemberInput, email: string | null) =>
  Effect.gen(function*() {
    const svc = yield* SvcTest
    const body = { email }
    const answer = member.console_user !== undefined
      ? yield* asConsole(
        svc.baseUrl,
        (yield* consoleSession(svc.baseUrl, org.orgId, "approver", member.console_user)).cookie,
        "PUT",
        "/v1/reviewer-address",
        body
      )
      : yield* raw(`${svc.baseUrl}/v1/reviewer-address`, {
        method: "PUT",
        headers: { authorization: `Bearer ${keySecrets.get(member.key_id!)}`, "content-type": "application/json" },
        body: JSON.stringify(body)
      })
    return answer
  })

/** Sets a group; the members with an address in `confirm` accept it themselves and confirm it through its confirmation mail. */
const putGroup = (
  org: TestOrg,
  name: string,
  members: ReadonlyArray<GroupMemberInput>,
  confirm: ReadonlyArray<string> = []
) =>
  Effect.gen(function*() {
    const svc = yield* SvcTest
    const seen = new Map(confirm.map((address) => [address, confirmationsTo(mailsTo, address)]))
    const group = yield* org.client.reviewers.putGroup({ params: { name }, payload: { members } })
    for (const address of confirm) {
      const accepted = yield* acceptAs(org, members.find((member) => member.email === address)!, address)
      assert.strictEqual(accepted.status, 200, accepted.text)
      const token = yield* nextConfirmation(mailsTo, address, seen.get(address)!)
      const confirmed = yield* confirmAddress(svc.baseUrl, token)
      assert.strictEqual(confirmed.status, 200, confirmed.text)
      assert.strictEqual(confirmed.json.reviewer_email, address)
    }
    return group
  })

const world = (policy: PolicyInput) =>
  Effect.gen(function*() {
    const svc = yield* SvcTest
    const org = yield* SvcTest.org()
    const session = yield* org.client.agentSessions.create({ payload: {} })
    yield* org.client.reviewers.putGroup({
      params: { name: "leads" },
      payload: { members: [{ console_user: "nobody" }] }
    })
    yield* org.client.reviewers.putGroup({
      params: { name: "finance" },
      payload: { members: [{ console_user: "nobody" }] }
    })
    yield* org.client.reviewers.putGroup({
      params: { name: "cfo" },
      payload: { members: [{ console_user: "nobody" }] }
    })
    const usePolicy = (p: PolicyInput) =>
      org.client.approvalPolicies.put({ params: { action_class: "payments.refund" }, payload: p })
    yield* usePolicy(policy)
    const pending = (stepId: string) =>
      org.client.agentSessions.governStep({
        params: { session_id: session.id },
        payload: { step_id: stepId, tool: "stripe.refund", action_class: "payments.refund", arguments: { amount: 42 } }
      }).pipe(Effect.map((answer) => answer.approval_id!))
    /** The link of the one approval mail `address` got about `approvalId` (of `type`, by its subject). */
    const linkOf = (address: string, approvalId: string, subject = "Approval requested") =>
      eventually(
        Effect.sync(() => {
          const found = approvalMails(address, approvalId).filter((text) => text.includes(`Subject: ${subject}:`))
          return found.length === 0 ? undefined : LINK.exec(found[0]!)![1]!
        }),
        { what: `the ${subject} mail to ${address}`, timeoutMs: 20_000 }
      )
    const post = (path: string, body: Record<string, unknown>) =>
      raw(`${svc.baseUrl}/v1/approval-links/${path}`, {
        method: "POST",
        headers: { "content-type": "application/json", "x-svc-console": "1" },
        body: JSON.stringify(body)
      })
    const open = (token: string) => post("open", { token })
    const decide = (token: string, decision: "approve" | "reject" = "approve") => post("decision", { token, decision })
    /** The reviewer mail deliveries queued for an event: their meta (a member address setting's id, or none for the organization's). */
    const emailsOf = (eventId: string) =>
      svc.sql<{ meta: unknown }>`SELECT meta FROM deliveries WHERE kind = 'email' AND event_id = ${eventId}`.pipe(
        Effect.orDie
      )
    return { svc, org, pending, usePolicy, linkOf, open, decide, emailsOf }
  })

layer(WithSmtp, { excludeTestServices: true })("reviewer mail to the assigned group", (it) => {
  describe("members' own addresses", () => {
    it.effect("an administrator's address is an invitation: invited, mailed nothing; the member accepts it (pending, one confirmation mail), confirms it; one address per person across groups; null clears it", () =>
      Effect.gen(function*() {
        const { org } = yield* world({ mode: "require_approval", ...settings, group: "leads" })
        const ana = addressOf("ana")
        const put = yield* org.client.reviewers.putGroup({
          params: { name: "leads" },
          payload: { members: [{ console_user: "ana", email: ana }] }
        })
        assert.deepStrictEqual(put.members, [{ console_user: "ana", email: ana, email_status: "invited" }])
        const accepted = yield* acceptAs(org, { console_user: "ana" }, ana)
        assert.strictEqual(accepted.status, 200, accepted.text)
        assert.deepStrictEqual(accepted.json, { console_user: "ana", email: ana, email_status: "pending" })
        const token = yield* nextConfirmation(mailsTo, ana, 0)
        assert.strictEqual(confirmationsTo(mailsTo, ana), 1, "the invitation itself mailed nothing")
        assert.strictEqual((yield* confirmAddress((yield* SvcTest).baseUrl, token)).status, 200)
        // The same person in another group, without `email`: the one address, confirmed.
        const finance = yield* org.client.reviewers.putGroup({
          params: { name: "finance" },
          payload: { members: [{ console_user: "ana" }] }
        })
        assert.deepStrictEqual(finance.members, [{ console_user: "ana", email: ana, email_status: "confirmed" }])
        // Giving the confirmed address again changes nothing and mails nothing.
        yield* org.client.reviewers.putGroup({
          params: { name: "leads" },
          payload: { members: [{ console_user: "ana", email: ana }] }
        })
        assert.strictEqual(
          (yield* org.client.reviewers.getGroup({ params: { name: "leads" } })).members[0]!.email_status,
          "confirmed"
        )
        assert.strictEqual(confirmationsTo(mailsTo, ana), 1)
        const cleared = yield* org.client.reviewers.putGroup({
          params: { name: "leads" },
          payload: { members: [{ console_user: "ana", email: null }] }
        })
        assert.deepStrictEqual(cleared.members, [{ console_user: "ana", email: null, email_status: null }])
        assert.deepStrictEqual((yield* org.client.reviewers.getGroup({ params: { name: "finance" } })).members[0], {
          console_user: "ana",
          email: null,
          email_status: null
        })
        // Clearing ends the confirmation link too.
        const again = yield* confirmAddress((yield* SvcTest).baseUrl, token)
        assert.strictEqual(again.status, 410)
      }))

    it.effect("members' confirmation mails count in the organization's hourly bound: past it the member's PUT is 429 RATE_LIMITED and changes nothing", () =>
      Effect.gen(function*() {
        const { org } = yield* world({ mode: "require_approval", ...settings, group: "leads" })
        // The layer allows 20 an hour: the 21st member to set an address is one too many (keys: each accepts with itself).
        const keys = yield* Effect.forEach(Array.from({ length: 21 }), () => memberKey(org))
        const members = keys.map((key, i) => ({ key_id: key.keyId, email: addressOf(`p${i}`) }))
        const invited = yield* org.client.reviewers.putGroup({ params: { name: "leads" }, payload: { members } })
        assert.isTrue(
          invited.members.every((m) => m.email_status === "invited"),
          "invitations mail nothing, so none is refused"
        )
        for (const member of members.slice(0, 20)) {
          assert.strictEqual((yield* acceptAs(org, member, member.email)).status, 200)
        }
        const last = members[20]!
        const refused = yield* acceptAs(org, last, last.email)
        assert.strictEqual(refused.status, 429, refused.text)
        assert.deepStrictEqual([refused.json.code, refused.json.limit], [
          "RATE_LIMITED",
          "SVC_REVIEWER_CONFIRMATIONS_PER_HOUR"
        ])
        const group = yield* org.client.reviewers.getGroup({ params: { name: "leads" } })
        assert.strictEqual(group.members.find((m) => m.key_id === last.key_id)!.email_status, "invited")
      }))

    it.effect("a member is exactly one of key_id and console_user, beside which email may stand; the address has the documented form and length", () =>
      Effect.gen(function*() {
        const svc = yield* SvcTest
        const org = yield* SvcTest.org()
        const put = (members: unknown) =>
          raw(`${svc.baseUrl}/v1/reviewer-groups/g`, {
            method: "PUT",
            headers: { authorization: `Bearer ${org.key}`, "content-type": "application/json" },
            body: JSON.stringify({ members })
          })
        const key = "0193b7a2-6f1e-7c3a-9a55-2f4e8c1d0b17"
        for (
          const members of [
            [{ email: "x@example.com" }],
            [{ key_id: key, console_user: "ana" }],
            [{ key_id: key, console_user: "ana", email: "x@example.com" }],
            [{ console_user: "ana", email: "not an address" }],
            [{ console_user: "ana", email: `${"a".repeat(243)}@example.com` }]
          ]
        ) {
          const answer = yield* put(members)
          assert.strictEqual(answer.status, 400, JSON.stringify(members))
          assert.strictEqual(answer.json.code, "INVALID_REQUEST")
        }
        const longest = `${"a".repeat(242)}@example.com`
        assert.lengthOf(longest, 254)
        const ok = yield* put([{ console_user: "ana", email: longest }])
        assert.strictEqual(ok.status, 200, ok.text)
      }))
  })

  describe("where the mail goes", () => {
    it.effect("an assigned approval's mail goes to each confirmed member address, one each with its own link; not to one its member has not accepted, nor to the organization's address; an unassigned one still goes there", () =>
      Effect.gen(function*() {
        const { svc, org, pending, linkOf, emailsOf, usePolicy } = yield* world({
          mode: "require_approval",
          ...settings,
          group: "leads"
        })
        const orgAddress = addressOf("reviewers")
        yield* confirmedReviewer(org, svc.baseUrl, orgAddress, mailsTo)
        const lead = yield* memberKey(org)
        const [ana, leadAddress, ben] = [addressOf("ana"), addressOf("lead"), addressOf("ben")]
        const group = yield* putGroup(org, "leads", [
          { console_user: "ana", email: ana },
          { key_id: lead.keyId, email: leadAddress },
          { console_user: "ben", email: ben },
          { console_user: "cleo" }
        ], [ana, leadAddress])
        assert.deepStrictEqual(
          (yield* org.client.reviewers.getGroup({ params: { name: "leads" } })).members.map((
            m
          ) => [m.email, m.email_status]),
          group.members.map((m) => [m.email, m.email === null ? null : m.email === ben ? "invited" : "confirmed"])
        )
        const approvalId = yield* pending("assigned")
        const anaToken = yield* linkOf(ana, approvalId)
        const leadToken = yield* linkOf(leadAddress, approvalId)
        assert.notStrictEqual(anaToken, leadToken)
        const [requested] = yield* outboxOf(svc.sql, approvalId)
        const queued = yield* emailsOf(requested!.id)
        assert.lengthOf(queued, 2, "one delivery per confirmed member address, none for the organization's")
        // An unassigned approval goes to the organization's address as before, and to no member.
        yield* usePolicy({ mode: "require_approval", ...settings })
        const unassigned = yield* pending("unassigned")
        yield* linkOf(orgAddress, unassigned)
        const [unassignedEvent] = yield* outboxOf(svc.sql, unassigned)
        assert.lengthOf(yield* emailsOf(unassignedEvent!.id), 1)
        assert.deepStrictEqual(
          approvalMails(orgAddress, approvalId),
          [],
          "the organization's address gets no mail of the assigned approval"
        )
        assert.deepStrictEqual(
          approvalMails(ben, approvalId),
          [],
          "an address its member has not accepted gets no approval mail"
        )
        assert.lengthOf(approvalMails(ana, approvalId), 1)
        assert.lengthOf(approvalMails(leadAddress, approvalId), 1)
        assert.deepStrictEqual([approvalMails(ana, unassigned), approvalMails(leadAddress, unassigned)], [[], []])
        // Mail carries no tenant-written text: not the person's name, the group's, the step's or the tool.
        const text = approvalMails(ana, approvalId)[0]!
        for (const tenantText of ["leads", "console:ana", "assigned", "stripe.refund"]) {
          assert.notInclude(text.split("\n\n").slice(1).join("\n\n"), tenantText)
        }
      }))

    it.effect("each escalation moves the mail to the group it hands the approval to: each hop's escalated mail goes to that group's members only", () =>
      Effect.gen(function*() {
        const { svc, org, pending, linkOf, emailsOf, decide } = yield* world({
          mode: "require_approval",
          ...settings,
          review_seconds: 1,
          escalation_seconds: 5,
          group: "leads",
          escalation_chain: ["finance", "cfo"]
        })
        const [ana, fin, chief] = [addressOf("ana"), addressOf("fin"), addressOf("chief")]
        yield* putGroup(org, "leads", [{ console_user: "ana", email: ana }], [ana])
        yield* putGroup(org, "finance", [{ console_user: "fin", email: fin }], [fin])
        yield* putGroup(org, "cfo", [{ console_user: "chief", email: chief }], [chief])
        const approvalId = yield* pending("escalating")
        const anaToken = yield* linkOf(ana, approvalId)
        const finToken = yield* linkOf(fin, approvalId, "Approval escalated")
        const chiefToken = yield* linkOf(chief, approvalId, "Approval escalated")
        const events = yield* outboxOf(svc.sql, approvalId)
        assert.deepStrictEqual(events.map((e) => e.type), [
          "approval.requested",
          "approval.escalated",
          "approval.escalated"
        ])
        for (const event of events) {
          assert.lengthOf(yield* emailsOf(event.id), 1, `${event.type} ${event.json.approval.assigned_group}`)
        }
        assert.lengthOf(approvalMails(ana, approvalId), 1, "leads got the request only")
        assert.lengthOf(approvalMails(fin, approvalId), 1, "finance got the first escalation only")
        assert.lengthOf(approvalMails(chief, approvalId), 1, "cfo got the second escalation only")
        // Each hop's mail says it was handed on, and how far along the chain.
        assert.include(
          approvalMails(fin, approvalId)[0],
          "Subject: Approval escalated: handed to the next reviewer group:"
        )
        assert.include(approvalMails(chief, approvalId)[0], "Escalation level: 2 ")
        // The earlier groups' members no longer decide; the group it is with now does.
        for (const token of [anaToken, finToken]) {
          const refused = yield* decide(token)
          assert.strictEqual(refused.status, 403, refused.text)
          assert.deepStrictEqual([refused.json.code, refused.json.assigned_group], ["NOT_ASSIGNED", "cfo"])
        }
        const decided = yield* decide(chiefToken, "reject")
        assert.strictEqual(decided.status, 200, decided.text)
        assert.strictEqual(decided.json.approval.decided_by, "console:chief")
      }))
  })

  describe("a member's link", () => {
    it.effect("decides as the member: the page names them and the record says console:<name>, or the key's id", () =>
      Effect.gen(function*() {
        const { org, pending, linkOf, open, decide } = yield* world({
          mode: "require_approval",
          ...settings,
          group: "leads"
        })
        const lead = yield* memberKey(org)
        const [ana, leadAddress] = [addressOf("ana"), addressOf("lead")]
        yield* putGroup(
          org,
          "leads",
          [{ console_user: "ana", email: ana }, { key_id: lead.keyId, email: leadAddress }],
          [ana, leadAddress]
        )
        const first = yield* pending("by-ana")
        const opened = yield* open(yield* linkOf(ana, first))
        assert.strictEqual(opened.status, 200, opened.text)
        assert.strictEqual(opened.json.decider, "console:ana")
        const decided = yield* decide(yield* linkOf(ana, first))
        assert.strictEqual(decided.status, 200, decided.text)
        assert.deepStrictEqual([decided.json.approval.status, decided.json.approval.decided_by], [
          "approved",
          "console:ana"
        ])
        const second = yield* pending("by-key")
        const byKey = yield* decide(yield* linkOf(leadAddress, second), "reject")
        assert.strictEqual(byKey.status, 200, byKey.text)
        assert.deepStrictEqual([byKey.json.approval.status, byKey.json.approval.decided_by], ["rejected", lead.keyId])
      }))

    it.effect("under a quorum of 2 each member's link is that member's one vote: two members' links approve it", () =>
      Effect.gen(function*() {
        const { org, pending, linkOf, decide } = yield* world({
          mode: "require_approval",
          ...settings,
          group: "leads",
          quorum: 2
        })
        const [ana, ben] = [addressOf("ana"), addressOf("ben")]
        yield* putGroup(org, "leads", [{ console_user: "ana", email: ana }, { console_user: "ben", email: ben }], [
          ana,
          ben
        ])
        const approvalId = yield* pending("quorum")
        const anaToken = yield* linkOf(ana, approvalId)
        const first = yield* decide(anaToken)
        assert.strictEqual(first.status, 200, first.text)
        assert.deepStrictEqual([first.json.approval.status, first.json.approval.approvals_remaining], ["pending", 1])
        const twice = yield* decide(anaToken)
        assert.strictEqual(twice.status, 409)
        assert.strictEqual(twice.json.code, "ALREADY_VOTED")
        const second = yield* decide(yield* linkOf(ben, approvalId))
        assert.strictEqual(second.status, 200, second.text)
        assert.strictEqual(second.json.approval.status, "approved")
        assert.deepStrictEqual(second.json.approval.votes.map((v: { decided_by: string }) => v.decided_by), [
          "console:ana",
          "console:ben"
        ])
      }))

    it.effect("a member removed from the group loses the link's power (403 NOT_ASSIGNED); a replaced address's link is 410; the approval stays pending", () =>
      Effect.gen(function*() {
        const { org, pending, linkOf, decide, open } = yield* world({
          mode: "require_approval",
          ...settings,
          group: "leads"
        })
        const [ana, ben] = [addressOf("ana"), addressOf("ben")]
        yield* putGroup(org, "leads", [{ console_user: "ana", email: ana }, { console_user: "ben", email: ben }], [
          ana,
          ben
        ])
        const approvalId = yield* pending("removed")
        const anaToken = yield* linkOf(ana, approvalId)
        const benToken = yield* linkOf(ben, approvalId)
        yield* org.client.reviewers.putGroup({
          params: { name: "leads" },
          payload: { members: [{ console_user: "ben", email: addressOf("ben-new") }] }
        })
        const removed = yield* decide(anaToken)
        assert.strictEqual(removed.status, 403, removed.text)
        assert.deepStrictEqual([removed.json.code, removed.json.assigned_group], ["NOT_ASSIGNED", "leads"])
        const replaced = yield* decide(benToken)
        assert.strictEqual(replaced.status, 410, replaced.text)
        assert.strictEqual(replaced.json.code, "REVIEWER_ADDRESS_REPLACED")
        assert.strictEqual((yield* open(benToken)).status, 410)
        assert.strictEqual((yield* org.client.approvals.get({ params: { approval_id: approvalId } })).status, "pending")
      }))
  })
})
