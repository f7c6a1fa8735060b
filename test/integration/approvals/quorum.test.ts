/**
 * Quorum: an approval that k distinct people must approve. Each decision is
 * a vote, recorded with its decider, time and reason; the approval stays
 * pending until k have approved or one rejects; a decider votes once; the
 * closing vote sends the one `approval.approved`/`approval.rejected` event,
 * also when two votes race for the last needed approval.
 */
import { assert, describe, layer } from "@effect/vitest"
import { Effect } from "effect"
import type { PolicyInput } from "../../../src/api/Policies.ts"
import { SvcTest } from "../../../src/testing.ts"
import { outboxOf } from "../../support/approvals.ts"
import { eventually, raw } from "../../support/http.ts"

const settings = { review_seconds: 900, expiring_notice_seconds: 300, timeout_action: "reject" } as const

/** Refunds above 1 000 need two approvers; the class's settings need one. */
const refunds = (quorum?: number): PolicyInput => ({
  mode: "require_approval",
  ...settings,
  rules: [{
    name: "large",
    condition: "arguments.amount > 1000.0",
    result: { decision: "require_approval", ...settings, ...(quorum === undefined ? {} : { quorum }) }
  }]
})

const step = (step_id: string, amount: number) => ({
  step_id,
  tool: "stripe.refund",
  action_class: "payments.refund",
  arguments: { amount } as any
})

const setup = (policy: PolicyInput = refunds(2)) =>
  Effect.gen(function*() {
    const svc = yield* SvcTest
    const org = yield* SvcTest.org()
    yield* org.client.approvalPolicies.put({ params: { action_class: "payments.refund" }, payload: policy })
    const session = yield* org.client.agentSessions.create({ payload: {} })
    const pending = (stepId: string, amount = 5000) =>
      org.client.agentSessions.governStep({ params: { session_id: session.id }, payload: step(stepId, amount) }).pipe(
        Effect.map((answer) => answer.approval_id!)
      )
    const deciders = yield* Effect.all([1, 2, 3].map(() => org.newKey(["approvals.decide", "agents.read"])))
    const sessionEvents = svc.sql<{ name: string; data: string }>`
      SELECT name, data FROM session_events WHERE session_id = ${session.id} ORDER BY seq
    `.pipe(Effect.orDie, Effect.map((rows) => rows.map((row) => ({ name: row.name, data: JSON.parse(row.data) }))))
    return { svc, org, session, pending, deciders, sessionEvents }
  })

layer(SvcTest.layer(), { excludeTestServices: true })("quorum", (it) => {
  describe("what a quorum may be", () => {
    it.effect("1 to 10 in a rule and in the class's settings; 0 and 11 are 400 naming the field", () =>
      Effect.gen(function*() {
        const svc = yield* SvcTest
        const org = yield* SvcTest.org()
        const put = (body: unknown) =>
          raw(`${svc.baseUrl}/v1/approval-policies/payments.refund`, {
            method: "PUT",
            headers: { authorization: `Bearer ${org.key}`, "content-type": "application/json" },
            body: JSON.stringify(body)
          })
        for (const quorum of [0, 11, 1.5]) {
          const inRule = yield* put(refunds(quorum))
          assert.strictEqual(inRule.status, 400, inRule.text)
          assert.strictEqual(inRule.json.code, "INVALID_REQUEST")
          assert.strictEqual(inRule.json.field, "rules[0].result.quorum", inRule.text)
          const inClass = yield* put({ mode: "require_approval", ...settings, quorum })
          assert.strictEqual(inClass.status, 400, inClass.text)
          assert.strictEqual(inClass.json.field, "quorum")
        }
        assert.deepStrictEqual((yield* org.client.approvalPolicies.list()).policies, [])
        for (const quorum of [1, 10]) {
          assert.strictEqual((yield* put({ mode: "require_approval", ...settings, quorum })).status, 200)
          assert.strictEqual((yield* put(refunds(quorum))).status, 200)
        }
        const [stored] = (yield* org.client.approvalPolicies.list()).policies
        assert.strictEqual(
          stored!.rules[0]!.result.decision === "require_approval" && stored!.rules[0]!.result.quorum,
          10
        )
      }))

    it.effect("without a quorum an approval reads, decides and notifies exactly as before: no quorum members anywhere", () =>
      Effect.gen(function*() {
        const { deciders: [alice], pending, svc, sessionEvents } = yield* setup(refunds())
        const approvalId = yield* pending("single")
        const read = yield* alice!.client.approvals.get({ params: { approval_id: approvalId } })
        for (const member of ["quorum", "votes", "approvals_remaining"]) assert.notProperty(read, member)
        const decided = yield* alice!.client.approvals.decide({
          params: { approval_id: approvalId },
          payload: { decision: "approve" }
        })
        assert.strictEqual(decided.status, "approved")
        assert.strictEqual(decided.decided_by, alice!.keyId)
        const events = yield* outboxOf(svc.sql, approvalId)
        assert.deepStrictEqual(events.map((e) => e.type), ["approval.requested", "approval.approved"])
        for (const event of events) assert.notProperty(event.json.approval, "quorum")
        assert.deepStrictEqual((yield* sessionEvents).map((e) => e.name), ["step:governed", "approval:decided"])
        // The one vote is recorded all the same.
        const votes = yield* svc.sql<
          { decided_by: string }
        >`SELECT decided_by FROM approval_votes WHERE approval_id = ${approvalId}`
        assert.deepStrictEqual(votes.map((v) => v.decided_by), [alice!.keyId])
      }))
  })

  describe("voting", () => {
    it.effect("pending until two distinct deciders approve; each vote recorded with decider, time and reason; the closing vote decides", () =>
      Effect.gen(function*() {
        const { deciders: [alice, bob], org, pending, sessionEvents, svc } = yield* setup()
        const approvalId = yield* pending("two")
        const params = { approval_id: approvalId }
        const requested = yield* org.client.approvals.get({ params })
        assert.strictEqual(requested.quorum, 2)
        assert.deepStrictEqual(requested.votes, [])
        assert.strictEqual(requested.approvals_remaining, 2)

        const first = yield* alice!.client.approvals.decide({
          params,
          payload: { decision: "approve", reason: "Ticket matches." }
        })
        assert.strictEqual(first.status, "pending")
        assert.strictEqual(first.approvals_remaining, 1)
        assert.notProperty(first, "decided_by")
        assert.strictEqual(first.votes!.length, 1)
        const [vote] = first.votes!
        assert.strictEqual(vote!.decided_by, alice!.keyId)
        assert.strictEqual(vote!.decision, "approve")
        assert.strictEqual(vote!.reason, "Ticket matches.")
        assert.isFalse(Number.isNaN(Date.parse(vote!.decided_at)))
        // A vote moves no deadline and sends no webhook event.
        assert.strictEqual(first.deadline_at, requested.deadline_at)
        assert.strictEqual(first.expires_at, requested.expires_at)
        assert.deepStrictEqual((yield* outboxOf(svc.sql, approvalId)).map((e) => e.type), ["approval.requested"])
        assert.deepStrictEqual(yield* org.client.approvals.get({ params }), first)
        const listed = (yield* org.client.approvals.list({ query: { status: "pending" } })).approvals.find((a) =>
          a.approval_id === approvalId
        )
        assert.deepStrictEqual(listed!.votes, first.votes)
        assert.strictEqual(listed!.quorum, 2)

        const closing = yield* bob!.client.approvals.decide({ params, payload: { decision: "approve" } })
        assert.strictEqual(closing.status, "approved")
        assert.strictEqual(closing.decided_by, bob!.keyId)
        assert.notProperty(closing, "approvals_remaining")
        assert.deepStrictEqual(closing.votes!.map((v) => [v.decided_by, v.decision]), [[alice!.keyId, "approve"], [
          bob!.keyId,
          "approve"
        ]])
        assert.notProperty(closing.votes![1], "reason")

        const events = yield* outboxOf(svc.sql, approvalId)
        assert.deepStrictEqual(events.map((e) => e.type), ["approval.requested", "approval.approved"])
        assert.strictEqual(events[0]!.json.approval.quorum, 2)
        assert.deepStrictEqual(events[0]!.json.approval.votes, [])
        assert.deepStrictEqual(events[1]!.json.approval, closing)

        const stream = yield* sessionEvents
        assert.deepStrictEqual(stream.map((e) => e.name), ["step:governed", "approval:voted", "approval:decided"])
        assert.deepStrictEqual(stream[1]!.data, {
          approval_id: approvalId,
          step_id: "two",
          decision: "approve",
          decided_at: vote!.decided_at,
          decided_by: alice!.keyId,
          reason: "Ticket matches.",
          quorum: 2,
          approvals_remaining: 1
        })
        assert.strictEqual(stream[2]!.data.decided_by, bob!.keyId)
        assert.strictEqual(stream[2]!.data.votes.length, 2)
        const detail = yield* org.client.agentSessions.get({ params: { session_id: requested.session_id }, query: {} })
        assert.strictEqual(detail.steps[0]!.resolution, "allow")
      }))

    it.effect("a decider votes once: a second vote, either way, is 409 ALREADY_VOTED and changes nothing", () =>
      Effect.gen(function*() {
        const { deciders: [alice], pending, svc } = yield* setup()
        const approvalId = yield* pending("once")
        const params = { approval_id: approvalId }
        yield* alice!.client.approvals.decide({ params, payload: { decision: "approve" } })
        for (const decision of ["approve", "reject"] as const) {
          const error = yield* alice!.client.approvals.decide({ params, payload: { decision } }).pipe(Effect.flip)
          assert.strictEqual(error._tag, "AlreadyVoted")
          if (error._tag === "AlreadyVoted") assert.strictEqual(error.decided_by, alice!.keyId)
        }
        const after = yield* alice!.client.approvals.get({ params })
        assert.strictEqual(after.status, "pending")
        assert.strictEqual(after.votes!.length, 1)
        assert.strictEqual(after.approvals_remaining, 1)
        assert.deepStrictEqual((yield* outboxOf(svc.sql, approvalId)).map((e) => e.type), ["approval.requested"])
      }))

    it.effect("every approver approves the same arguments: edits are 422 naming arguments and cast no vote; a response rejects", () =>
      Effect.gen(function*() {
        const schema = { type: "object", properties: { amount: { type: "number" } } }
        const { deciders: [alice, bob], pending } = yield* setup({ ...refunds(2), arguments_schema: schema })
        const params = { approval_id: yield* pending("edited") }
        for (const decider of [alice!, bob!]) {
          const error = yield* decider.client.approvals.decide({
            params,
            payload: { decision: "approve", arguments: { amount: 900 } }
          }).pipe(
            Effect.flip
          )
          assert.strictEqual(error._tag, "ArgumentsShapeMismatch")
          if (error._tag === "ArgumentsShapeMismatch") assert.strictEqual(error.field, "arguments")
        }
        assert.deepStrictEqual((yield* alice!.client.approvals.get({ params })).votes, [])
        const answered = { approval_id: yield* pending("answered") }
        yield* alice!.client.approvals.decide({ params: answered, payload: { decision: "approve" } })
        const rejected = yield* bob!.client.approvals.decide({
          params: answered,
          payload: { decision: "reject", response: "Refund 900 instead." }
        })
        assert.strictEqual(rejected.status, "rejected")
        assert.strictEqual(rejected.response, "Refund 900 instead.")
      }))

    it.effect("one rejection rejects, whatever approvals came before", () =>
      Effect.gen(function*() {
        const { deciders: [alice, bob], pending, svc, org } = yield* setup(refunds(3))
        const approvalId = yield* pending("veto")
        const params = { approval_id: approvalId }
        yield* alice!.client.approvals.decide({ params, payload: { decision: "approve" } })
        const rejected = yield* bob!.client.approvals.decide({
          params,
          payload: { decision: "reject", reason: "Wrong account." }
        })
        assert.strictEqual(rejected.status, "rejected")
        assert.strictEqual(rejected.decided_by, bob!.keyId)
        assert.strictEqual(rejected.decision_reason, "Wrong account.")
        assert.deepStrictEqual(rejected.votes!.map((v) => v.decision), ["approve", "reject"])
        assert.deepStrictEqual((yield* outboxOf(svc.sql, approvalId)).map((e) => e.type), [
          "approval.requested",
          "approval.rejected"
        ])
        const detail = yield* org.client.agentSessions.get({ params: { session_id: rejected.session_id }, query: {} })
        assert.strictEqual(detail.steps[0]!.resolution, "reject")
      }))

    it.effect("the class's own quorum applies when no rule decides, and the dry run shows it", () =>
      Effect.gen(function*() {
        const { deciders: [alice], pending, org } = yield* setup({ mode: "require_approval", ...settings, quorum: 3 })
        const [policy] = (yield* org.client.approvalPolicies.list()).policies
        assert.strictEqual(policy!.quorum, 3)
        const approvalId = yield* pending("class", 10)
        const voted = yield* alice!.client.approvals.decide({
          params: { approval_id: approvalId },
          payload: { decision: "approve" }
        })
        assert.strictEqual(voted.quorum, 3)
        assert.strictEqual(voted.approvals_remaining, 2)
        const dry = yield* org.client.approvalPolicies.dryRun({
          params: { action_class: "payments.refund" },
          payload: { tool: "stripe.refund", arguments: { amount: 10 } }
        })
        assert.strictEqual(dry.approval!.quorum, 3)
        const given = yield* org.client.approvalPolicies.dryRun({
          params: { action_class: "payments.refund" },
          payload: { tool: "stripe.refund", arguments: { amount: 5000 }, policy: refunds(2) }
        })
        assert.deepStrictEqual([given.rule, given.approval!.quorum], ["large", 2])
      }))

    it.effect("an approval that expires with votes short of its quorum expires as before, its votes kept", () =>
      Effect.gen(function*() {
        const short = { review_seconds: 1, expiring_notice_seconds: 0, timeout_action: "reject" } as const
        const { deciders: [alice], pending, svc } = yield* setup({
          mode: "require_approval",
          ...short,
          rules: [{
            name: "large",
            condition: "arguments.amount > 1000.0",
            result: { decision: "require_approval", ...short, quorum: 2 }
          }]
        })
        const approvalId = yield* pending("lapse")
        yield* alice!.client.approvals.decide({ params: { approval_id: approvalId }, payload: { decision: "approve" } })
        const events = yield* eventually(
          Effect.map(outboxOf(svc.sql, approvalId), (rows) => rows.length >= 2 ? rows : undefined),
          { what: "the expiry", timeoutMs: 20_000 }
        )
        assert.deepStrictEqual(events.map((e) => e.type), ["approval.requested", "approval.expired"])
        assert.strictEqual(events[1]!.json.approval.status, "expired")
        assert.deepStrictEqual(events[1]!.json.approval.votes.map((v: { decided_by: string }) => v.decided_by), [
          alice!.keyId
        ])
        assert.notProperty(events[1]!.json.approval, "approvals_remaining")
      }))
  })

  describe("concurrency", () => {
    it.effect("votes racing for the last needed approval close the approval once: one approval.approved, the late vote 409", () =>
      Effect.gen(function*() {
        const { deciders, pending, svc } = yield* setup()
        for (let round = 0; round < 5; round++) {
          const approvalId = yield* pending(`race-${round}`)
          const params = { approval_id: approvalId }
          const results = yield* Effect.all(
            deciders.map((d) =>
              d.client.approvals.decide({ params, payload: { decision: "approve" } }).pipe(Effect.result)
            ),
            { concurrency: "unbounded" }
          )
          const statuses = results.map((r) => r._tag === "Success" ? r.success.status : r.failure._tag).sort()
          assert.deepStrictEqual(statuses, ["InvalidTransition", "approved", "pending"])
          const events = yield* outboxOf(svc.sql, approvalId)
          assert.deepStrictEqual(events.map((e) => e.type), ["approval.requested", "approval.approved"])
          assert.strictEqual(events[1]!.json.approval.votes.length, 2)
          const closing = results.find((r) => r._tag === "Success" && r.success.status === "approved")!
          if (closing._tag === "Success") assert.deepStrictEqual(events[1]!.json.approval, closing.success)
        }
      }))
  })
})
