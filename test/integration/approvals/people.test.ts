/**
 * One person, one vote, and only the reviewer decides as the reviewer,
 * tried as an attacker would: each pair of credentials one person holds
 * tries to close a 2-of-n approval alone; an administrator
 * (`org_config.write`) tries to redirect a member's mail and decide with
 * it; a revoked key's delegate, links and new mail try to decide. Mail goes
 * through a real SMTP client to an SMTP server on loopback; people sign in
 * to the console as the browser does.
 */
import { assert, describe, layer } from "@effect/vitest"
import { Effect, Layer, Option, Redacted } from "effect"
import type { PolicyInput } from "../../../src/api/Policies.ts"
import { ConsoleSessions } from "../../../src/console/ConsoleSessions.ts"
import { SvcTest } from "../../../src/testing.ts"
import { asConsole, consoleSession } from "../../support/console.ts"
import { eventually, raw } from "../../support/http.ts"
import {
  confirmAddress,
  confirmationsTo,
  decodeQuotedPrintable,
  nextConfirmation,
  smtpSink
} from "../../support/reviewerMail.ts"
import { webhookService } from "../webhooks/support.ts"

const mails: Array<{ readonly to: ReadonlyArray<string>; readonly text: string }> = []
const mailsTo = (address: string) => mails.filter((m) => m.to.includes(address)).map((m) => m.text)
const approvalMails = (address: string, approvalId: string) =>
  mailsTo(address).filter((text) => text.includes(`Approval: ${approvalId}`))
const LINK = /\/console\/decide#(sva_[A-Za-z0-9_-]{43})/

const WithSmtp = Layer.unwrap(Effect.gen(function*() {
  const port = yield* smtpSink((mail) => mails.push({ to: mail.to, text: decodeQuotedPrintable(mail.data) }))
  return ConsoleSessions.layer.pipe(Layer.provideMerge(
    webhookService({
      smtpUrl: Option.some(Redacted.make(`smtp://127.0.0.1:${port}/?from=approvals%40svc.test`)),
      reviewerConfirmationsPerHour: 50
    })
  ))
}))

const settings = {
  mode: "require_approval",
  review_seconds: 900,
  expiring_notice_seconds: 0,
  timeout_action: "reject"
} as const

let serial = 0
const addressOf = (name: string) => `${name}.${++serial}@people.example.com`

const world = (policy: Partial<PolicyInput>) =>
  Effect.gen(function*() {
    const svc = yield* SvcTest
    const org = yield* SvcTest.org()
    const session = yield* org.client.agentSessions.create({ payload: {} })
    // The group exists before the policy names it; each test sets its members.
    yield* org.client.reviewers.putGroup({
      params: { name: "leads" },
      payload: { members: [{ console_user: "nobody" }] }
    })
    yield* org.client.approvalPolicies.put({
      params: { action_class: "payments.refund" },
      payload: { ...settings, ...policy }
    })
    let steps = 0
    const pending = () =>
      org.client.agentSessions.governStep({
        params: { session_id: session.id },
        payload: {
          step_id: `step-${++steps}`,
          tool: "stripe.refund",
          action_class: "payments.refund",
          arguments: { amount: 4200 }
        }
      }).pipe(Effect.map((answer) => answer.approval_id!))
    /** A person signed in to the console (approver preset unless told). */
    const person = (name: string, preset: "approver" | "admin" = "approver") =>
      consoleSession(svc.baseUrl, org.orgId, preset, name)
    const asPerson = (cookie: string, method: string, path: string, body?: unknown) =>
      asConsole(svc.baseUrl, cookie, method, path, body)
    const asKey = (key: string, method: string, path: string, body?: unknown) =>
      raw(`${svc.baseUrl}${path}`, {
        method,
        headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
        ...(body === undefined ? {} : { body: JSON.stringify(body) })
      })
    const decision = (approvalId: string) => `/v1/agent-approvals/${approvalId}/decision`
    const approve = { decision: "approve" }
    const read = (approvalId: string) => org.client.approvals.get({ params: { approval_id: approvalId } })
    const delegateFrom = (cookie: string, to: string) =>
      asPerson(cookie, "POST", "/v1/reviewer-delegations", {
        delegate: { console_user: to },
        ends_at: new Date(Date.now() + 86_400_000).toISOString()
      })
    const linkOf = (address: string, approvalId: string) =>
      eventually(
        Effect.sync(() => {
          const found = approvalMails(address, approvalId)
          return found.length === 0 ? undefined : LINK.exec(found[0]!)![1]!
        }),
        { what: `the approval mail to ${address}`, timeoutMs: 20_000 }
      )
    const decideByLink = (token: string) =>
      raw(`${svc.baseUrl}/v1/approval-links/decision`, {
        method: "POST",
        headers: { "content-type": "application/json", "x-svc-console": "1" },
        body: JSON.stringify({ token, decision: "approve" })
      })
    /** The member's own act: set (or accept) their address, then confirm it from the mailbox. */
    const ownConfirmedAddress = (
      setAddress: (body: unknown) => Effect.Effect<{ status: number; text: string }>,
      address: string
    ) =>
      Effect.gen(function*() {
        const seen = confirmationsTo(mailsTo, address)
        const set = yield* setAddress({ email: address })
        assert.strictEqual(set.status, 200, set.text)
        const confirmed = yield* confirmAddress(svc.baseUrl, yield* nextConfirmation(mailsTo, address, seen))
        assert.strictEqual(confirmed.status, 200, confirmed.text)
      })
    return {
      svc,
      org,
      pending,
      person,
      asPerson,
      asKey,
      decision,
      approve,
      read,
      delegateFrom,
      linkOf,
      decideByLink,
      ownConfirmedAddress
    }
  })

/** A 2-of-n approval that one person's two credentials tried to close: still pending, one vote counted. */
const stillOneVote = (
  approval: { status: string; approvals_remaining?: number | undefined; votes?: ReadonlyArray<unknown> | undefined }
) => {
  assert.strictEqual(approval.status, "pending")
  assert.strictEqual(approval.approvals_remaining, 1)
  assert.lengthOf(approval.votes ?? [], 1)
}

layer(WithSmtp, { excludeTestServices: true })("who counts as whom", (it) => {
  describe("one person, one vote: each pair one person holds cannot close a 2-of-n approval alone", () => {
    it.effect("a delegator and their delegate: the delegate's vote counts for the delegator (409 ALREADY_VOTED for the delegator after it)", () =>
      Effect.gen(function*() {
        const w = yield* world({ quorum: 2, group: "leads" })
        yield* w.org.client.reviewers.putGroup({
          params: { name: "leads" },
          payload: { members: [{ console_user: "ana" }, { console_user: "dan" }, { console_user: "eve" }] }
        })
        const ana = yield* w.person("ana")
        const ben = yield* w.person("ben")
        assert.strictEqual((yield* w.delegateFrom(ana.cookie, "ben")).status, 200)
        const approvalId = yield* w.pending()
        const byDelegate = yield* w.asPerson(ben.cookie, "POST", w.decision(approvalId), w.approve)
        assert.strictEqual(byDelegate.status, 200, byDelegate.text)
        assert.deepStrictEqual(byDelegate.json.votes[0], {
          decided_by: "console:ben",
          decided_for: "console:ana",
          decision: "approve",
          decided_at: byDelegate.json.votes[0].decided_at
        })
        const byDelegator = yield* w.asPerson(ana.cookie, "POST", w.decision(approvalId), w.approve)
        assert.strictEqual(byDelegator.status, 409, byDelegator.text)
        assert.strictEqual(byDelegator.json.code, "ALREADY_VOTED")
        stillOneVote(yield* w.read(approvalId))
        // And the other way round: the delegator first, then their delegate.
        const second = yield* w.pending()
        assert.strictEqual((yield* w.asPerson(ana.cookie, "POST", w.decision(second), w.approve)).status, 200)
        const late = yield* w.asPerson(ben.cookie, "POST", w.decision(second), w.approve)
        assert.strictEqual(late.status, 409, late.text)
        stillOneVote(yield* w.read(second))
        // Another member completes it: two people.
        const dan = yield* w.person("dan")
        const closed = yield* w.asPerson(dan.cookie, "POST", w.decision(second), w.approve)
        assert.strictEqual(closed.json.status, "approved", closed.text)
      }))

    it.effect("two delegates of one member count once", () =>
      Effect.gen(function*() {
        const w = yield* world({ quorum: 2, group: "leads" })
        yield* w.org.client.reviewers.putGroup({
          params: { name: "leads" },
          payload: { members: [{ console_user: "ana" }, { console_user: "dan" }] }
        })
        const ana = yield* w.person("ana")
        const [ben, cleo] = [yield* w.person("ben"), yield* w.person("cleo")]
        assert.strictEqual((yield* w.delegateFrom(ana.cookie, "ben")).status, 200)
        assert.strictEqual((yield* w.delegateFrom(ana.cookie, "cleo")).status, 200)
        const approvalId = yield* w.pending()
        assert.strictEqual((yield* w.asPerson(ben.cookie, "POST", w.decision(approvalId), w.approve)).status, 200)
        const other = yield* w.asPerson(cleo.cookie, "POST", w.decision(approvalId), w.approve)
        assert.strictEqual(other.status, 409, other.text)
        assert.strictEqual(other.json.code, "ALREADY_VOTED")
        stillOneVote(yield* w.read(approvalId))
      }))

    it.effect("a console person and the key they had just created: the key's vote is that person's", () =>
      Effect.gen(function*() {
        const w = yield* world({ quorum: 2 })
        const ana = yield* w.person("ana", "admin")
        const created = yield* w.asPerson(ana.cookie, "POST", "/v1/api-keys", {
          name: "ana-bot",
          scopes: ["approvals.decide"]
        })
        assert.strictEqual(created.status, 201, created.text)
        const approvalId = yield* w.pending()
        const byKey = yield* w.asKey(created.json.key, "POST", w.decision(approvalId), w.approve)
        assert.strictEqual(byKey.status, 200, byKey.text)
        assert.deepStrictEqual(
          [byKey.json.votes[0].decided_by, byKey.json.votes[0].decided_by_person, byKey.json.votes[0].decided_for],
          [created.json.api_key.id, "console:ana", undefined]
        )
        const byAna = yield* w.asPerson(ana.cookie, "POST", w.decision(approvalId), w.approve)
        assert.strictEqual(byAna.status, 409, byAna.text)
        assert.strictEqual(byAna.json.code, "ALREADY_VOTED")
        // A key that key makes is ana's too.
        const grandchild = yield* w.asKey(created.json.key, "POST", "/v1/api-keys", { scopes: ["approvals.decide"] })
        assert.strictEqual(grandchild.status, 403, "a key without keys.manage makes none")
        stillOneVote(yield* w.read(approvalId))
      }))

    it.effect("a key made by a key is its maker's person: the two cannot close it either", () =>
      Effect.gen(function*() {
        const w = yield* world({ quorum: 2 })
        const maker = yield* w.org.newKey(["keys.manage", "approvals.decide"])
        const made = yield* w.asKey(maker.key, "POST", "/v1/api-keys", { scopes: ["approvals.decide"] })
        assert.strictEqual(made.status, 201, made.text)
        const approvalId = yield* w.pending()
        assert.strictEqual((yield* w.asKey(maker.key, "POST", w.decision(approvalId), w.approve)).status, 200)
        const second = yield* w.asKey(made.json.key, "POST", w.decision(approvalId), w.approve)
        assert.strictEqual(second.status, 409, second.text)
        stillOneVote(yield* w.read(approvalId))
      }))
  })

  describe("only the reviewer decides as the reviewer", () => {
    it.effect("org_config.write cannot redirect a member's mail and decide: its address is an invitation, mailed nothing, until the member accepts", () =>
      Effect.gen(function*() {
        const w = yield* world({ quorum: 2, group: "leads" })
        const admin = yield* w.org.newKey(["org_config.write", "org_config.read", "approvals.decide"])
        const [anaOwn, attacker] = [addressOf("ana"), addressOf("attacker")]
        yield* w.org.client.reviewers.putGroup({
          params: { name: "leads" },
          payload: { members: [{ console_user: "ana" }, { console_user: "dan" }] }
        })
        // Ana's own confirmed address first: her links decide as her.
        const ana = yield* w.person("ana")
        yield* w.ownConfirmedAddress((body) => w.asPerson(ana.cookie, "PUT", "/v1/reviewer-address", body), anaOwn)
        const before = yield* w.pending()
        const anaLink = yield* w.linkOf(anaOwn, before)
        // The administrator points ana's address at a mailbox they read.
        const redirected = yield* admin.client.reviewers.putGroup({
          params: { name: "leads" },
          payload: {
            members: [{ console_user: "ana", email: attacker }, { console_user: "dan", email: addressOf("dan") }]
          }
        })
        assert.deepStrictEqual(redirected.members.map((m) => m.email_status), ["invited", "invited"])
        // Nothing to confirm from there: no confirmation mail goes to an invitation.
        const after = yield* w.pending()
        yield* Effect.sleep("1500 millis")
        assert.deepStrictEqual(mailsTo(attacker), [], "no confirmation or approval mail reaches the invited mailbox")
        // Ana's earlier link ended with her address: 410.
        assert.strictEqual((yield* w.decideByLink(anaLink)).status, 410)
        // The administrator cannot accept for ana: the caller's own address is the caller's.
        const selfSet = yield* w.asKey(admin.key, "PUT", "/v1/reviewer-address", { email: attacker })
        assert.strictEqual(selfSet.status, 200, selfSet.text)
        assert.strictEqual(selfSet.json.key_id, admin.keyId)
        const group = yield* w.org.client.reviewers.getGroup({ params: { name: "leads" } })
        assert.deepStrictEqual(group.members[0], { console_user: "ana", email: attacker, email_status: "invited" })
        assert.deepStrictEqual(approvalMails(attacker, after), [])
        const stillPending = yield* w.read(after)
        assert.deepStrictEqual([stillPending.status, stillPending.votes], ["pending", []])
        // An invited address's stored state decides nothing even when someone confirms it by hand.
        yield* w.svc
          .sql`UPDATE reviewer_member_addresses SET confirmed_at = now() WHERE org_id = ${w.org.orgId} AND member = 'console:ana'`
        const third = yield* w.pending()
        yield* Effect.sleep("1500 millis")
        assert.deepStrictEqual(
          approvalMails(attacker, third),
          [],
          "an address its member never accepted gets no approval mail"
        )
      }))

    it.effect("revoking a key ends its reviewing at once: its delegate, its links and new mail to its address decide nothing", () =>
      Effect.gen(function*() {
        const w = yield* world({ group: "leads" })
        const lead = yield* w.org.newKey(["approvals.decide"])
        const leadAddress = addressOf("lead")
        yield* w.org.client.reviewers.putGroup({
          params: { name: "leads" },
          payload: { members: [{ key_id: lead.keyId }] }
        })
        yield* w.ownConfirmedAddress((body) => w.asKey(lead.key, "PUT", "/v1/reviewer-address", body), leadAddress)
        const ben = yield* w.person("ben")
        const delegated = yield* w.asKey(lead.key, "POST", "/v1/reviewer-delegations", {
          delegate: { console_user: "ben" },
          ends_at: new Date(Date.now() + 86_400_000).toISOString()
        })
        assert.strictEqual(delegated.status, 200, delegated.text)
        const approvalId = yield* w.pending()
        const link = yield* w.linkOf(leadAddress, approvalId)
        // Revoked as another process (or the CLI) would: straight in the database, so no cache of this process hears of it.
        yield* w.svc.sql`UPDATE api_keys SET revoked_at = now() WHERE id = ${lead.keyId}`
        const byKey = yield* w.asKey(lead.key, "POST", w.decision(approvalId), w.approve)
        assert.strictEqual(byKey.status, 401, `the key itself, however fresh its cache entry: ${byKey.text}`)
        const byDelegate = yield* w.asPerson(ben.cookie, "POST", w.decision(approvalId), w.approve)
        assert.strictEqual(byDelegate.status, 403, byDelegate.text)
        assert.strictEqual(byDelegate.json.code, "NOT_ASSIGNED")
        const byLink = yield* w.decideByLink(link)
        assert.strictEqual(byLink.status, 410, byLink.text)
        const delegations = yield* w.asPerson(ben.cookie, "GET", "/v1/reviewer-delegations")
        assert.deepStrictEqual(delegations.json.delegations, [], "the delegation ended")
        const next = yield* w.pending()
        yield* Effect.sleep("1500 millis")
        assert.deepStrictEqual(approvalMails(leadAddress, next), [], "no new mail to the revoked key's address")
        assert.strictEqual((yield* w.read(approvalId)).status, "pending")
      }))

    it.effect("ending a console person's access ends their sessions, their keys, their delegations given and received, their links and mail", () =>
      Effect.gen(function*() {
        const w = yield* world({ group: "leads" })
        const sessions = yield* ConsoleSessions
        yield* w.org.client.reviewers.putGroup({
          params: { name: "leads" },
          payload: { members: [{ console_user: "ana" }, { console_user: "dan" }] }
        })
        const ana = yield* w.person("ana", "admin")
        const dan = yield* w.person("dan")
        const ben = yield* w.person("ben")
        const anaAddress = addressOf("ana")
        yield* w.ownConfirmedAddress((body) => w.asPerson(ana.cookie, "PUT", "/v1/reviewer-address", body), anaAddress)
        const key = yield* w.asPerson(ana.cookie, "POST", "/v1/api-keys", { scopes: ["approvals.decide"] })
        assert.strictEqual((yield* w.delegateFrom(ana.cookie, "ben")).status, 200)
        assert.strictEqual((yield* w.delegateFrom(dan.cookie, "ana")).status, 200)
        const approvalId = yield* w.pending()
        const link = yield* w.linkOf(anaAddress, approvalId)
        assert.deepStrictEqual(yield* sessions.revokePerson(w.org.orgId, "ana"), { sessions: 1, keys: 1 })
        assert.strictEqual((yield* w.asPerson(ana.cookie, "POST", w.decision(approvalId), w.approve)).status, 401)
        assert.strictEqual((yield* w.asKey(key.json.key, "POST", w.decision(approvalId), w.approve)).status, 401)
        assert.strictEqual((yield* w.decideByLink(link)).status, 410)
        assert.strictEqual((yield* w.asPerson(ben.cookie, "POST", w.decision(approvalId), w.approve)).status, 403)
        assert.deepStrictEqual((yield* w.asPerson(dan.cookie, "GET", "/v1/reviewer-delegations")).json.delegations, [])
        assert.strictEqual((yield* w.read(approvalId)).status, "pending")
      }))
  })
})
