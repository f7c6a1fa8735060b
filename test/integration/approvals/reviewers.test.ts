/**
 * Named reviewers: reviewer groups (bounded, members are keys holding
 * `approvals.decide` or console persons), approvals assigned to a group by
 * the policy or the deciding rule, decided only by its members and their
 * active delegates (403 NOT_ASSIGNED), the first deadline handing the
 * approval to the chain's next group, and the inbox filter `assigned_to=me`.
 */
import { assert, describe, layer } from "@effect/vitest"
import { Deferred, Effect, Fiber } from "effect"
import type { PolicyInput } from "../../../src/api/Policies.ts"
import { MAX_GROUP_MEMBERS } from "../../../src/api/Reviewers.ts"
import { SvcTest } from "../../../src/testing.ts"
import { outboxOf } from "../../support/approvals.ts"
import { eventually, raw } from "../../support/http.ts"

const settings = { review_seconds: 900, expiring_notice_seconds: 300, timeout_action: "reject" } as const
const MAX_GROUPS = 3

const step = (step_id: string, amount: number) => ({
  step_id,
  tool: "stripe.refund",
  action_class: "payments.refund",
  arguments: { amount } as any
})

/** Refunds above 1 000 go to `leads` (escalating to `finance` when `chain`); smaller ones to anyone. */
const refunds = (
  options: { readonly chain?: boolean; readonly quorum?: number; readonly reviewSeconds?: number } = {}
): PolicyInput => ({
  mode: "require_approval",
  ...settings,
  rules: [{
    name: "large",
    condition: "arguments.amount > 1000.0",
    result: {
      decision: "require_approval",
      ...settings,
      review_seconds: options.reviewSeconds ?? 900,
      expiring_notice_seconds: 0,
      group: "leads",
      ...(options.chain === true ? { escalation_seconds: 600, escalation_chain: ["finance"] } : {}),
      ...(options.quorum === undefined ? {} : { quorum: options.quorum })
    }
  }]
})

const setup = Effect.gen(function*() {
  const svc = yield* SvcTest
  const org = yield* SvcTest.org()
  const [lead, lead2, financier, outsider] = yield* Effect.all(
    [1, 2, 3, 4].map(() => org.newKey(["approvals.decide", "agents.read"]))
  )
  yield* org.client.reviewers.putGroup({
    params: { name: "leads" },
    payload: { members: [{ key_id: lead!.keyId }, { key_id: lead2!.keyId }] }
  })
  yield* org.client.reviewers.putGroup({
    params: { name: "finance" },
    payload: { members: [{ key_id: financier!.keyId }] }
  })
  const session = yield* org.client.agentSessions.create({ payload: {} })
  const pending = (stepId: string, amount = 5000) =>
    org.client.agentSessions.governStep({ params: { session_id: session.id }, payload: step(stepId, amount) }).pipe(
      Effect.map((answer) => answer.approval_id!)
    )
  const usePolicy = (policy: PolicyInput) =>
    org.client.approvalPolicies.put({ params: { action_class: "payments.refund" }, payload: policy })
  const decideRaw = (key: string, approvalId: string, body: unknown = { decision: "approve" }) =>
    raw(`${svc.baseUrl}/v1/agent-approvals/${approvalId}/decision`, {
      method: "POST",
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
      body: JSON.stringify(body)
    })
  return {
    svc,
    org,
    lead: lead!,
    lead2: lead2!,
    financier: financier!,
    outsider: outsider!,
    pending,
    usePolicy,
    decideRaw
  }
})

layer(SvcTest.layer({ config: { reviewerLimits: { groups: MAX_GROUPS, delegations: 1000 } } }), {
  excludeTestServices: true
})("reviewer groups", (it) => {
  describe("groups", () => {
    it.effect("a group is set by name with keys and console persons, read back, listed, and deleted", () =>
      Effect.gen(function*() {
        const { lead, org } = yield* setup
        const put = yield* org.client.reviewers.putGroup({
          params: { name: "oncall" },
          payload: { members: [{ console_user: "ana" }, { key_id: lead.keyId }] }
        })
        assert.strictEqual(put.name, "oncall")
        const none = { email: null, email_status: null }
        assert.sameDeepMembers([...put.members], [{ console_user: "ana", ...none }, { key_id: lead.keyId, ...none }])
        assert.deepStrictEqual(yield* org.client.reviewers.getGroup({ params: { name: "oncall" } }), put)
        const replaced = yield* org.client.reviewers.putGroup({
          params: { name: "oncall" },
          payload: { members: [{ console_user: "ben" }] }
        })
        assert.deepStrictEqual(replaced.members, [{ console_user: "ben", ...none }])
        assert.deepStrictEqual((yield* org.client.reviewers.listGroups()).groups.map((g) => g.name), [
          "finance",
          "leads",
          "oncall"
        ])
        yield* org.client.reviewers.deleteGroup({ params: { name: "oncall" } })
        const gone = yield* Effect.flip(org.client.reviewers.getGroup({ params: { name: "oncall" } }))
        assert.strictEqual(gone._tag, "NotFound")
      }))

    it.effect("members are keys of the organization holding approvals.decide, each once, at most the documented number; the name has a pattern", () =>
      Effect.gen(function*() {
        const { org, svc } = yield* setup
        const reader = yield* org.newKey(["agents.read"])
        const put = (name: string, body: unknown) =>
          raw(`${svc.baseUrl}/v1/reviewer-groups/${name}`, {
            method: "PUT",
            headers: { authorization: `Bearer ${org.key}`, "content-type": "application/json" },
            body: JSON.stringify(body)
          })
        const noScope = yield* put("x", { members: [{ console_user: "ana" }, { key_id: reader.keyId }] })
        // A reference to no such key is answered as an absent task is: 404, the detail naming the member.
        assert.strictEqual(noScope.status, 404, noScope.text)
        assert.include(noScope.json.detail, "members[1].key_id")
        const other = yield* SvcTest.org()
        const foreign = yield* put("x", { members: [{ key_id: other.keyId }] })
        assert.strictEqual(foreign.status, 404, foreign.text)
        // Exactly one of key_id and console_user; a bad key_id is named as key_id.
        const both = yield* put("x", { members: [{ key_id: other.keyId, console_user: "ana" }] })
        assert.strictEqual(both.status, 400, both.text)
        const neither = yield* put("x", { members: [{}] })
        assert.strictEqual(neither.status, 400, neither.text)
        const badKey = yield* put("x", { members: [{ key_id: "not-a-uuid" }] })
        assert.strictEqual(badKey.json.field, "members[0].key_id", badKey.text)
        const twice = yield* put("x", { members: [{ console_user: "ana" }, { console_user: "ana" }] })
        assert.strictEqual(twice.status, 400, twice.text)
        const tooMany = yield* put("x", {
          members: Array.from({ length: MAX_GROUP_MEMBERS + 1 }, (_, i) => ({ console_user: `p${i}` }))
        })
        assert.strictEqual(tooMany.status, 400, tooMany.text)
        assert.strictEqual(
          (yield* put("x", {
            members: Array.from({ length: MAX_GROUP_MEMBERS }, (_, i) => ({ console_user: `p${i}` }))
          })).status,
          200
        )
        const badName = yield* put("-bad", { members: [] })
        assert.strictEqual(badName.status, 400, badName.text)
      }))

    it.effect("an organization has at most SVC_MAX_REVIEWER_GROUPS_PER_ORG groups: one more is 409 LIMIT_REACHED; replacing one still works", () =>
      Effect.gen(function*() {
        const { org } = yield* setup
        yield* org.client.reviewers.putGroup({ params: { name: "third" }, payload: { members: [] } })
        const refused = yield* Effect.flip(
          org.client.reviewers.putGroup({ params: { name: "fourth" }, payload: { members: [] } })
        )
        assert.strictEqual(refused._tag, "LimitReached")
        assert.strictEqual(refused._tag === "LimitReached" && refused.limit, "SVC_MAX_REVIEWER_GROUPS_PER_ORG")
        yield* org.client.reviewers.putGroup({
          params: { name: "third" },
          payload: { members: [{ console_user: "ana" }] }
        })
      }))

    // Two connections at once: on the embedded database (one session) the held transaction would hold every request.
    it.effect.runIf(process.env.TEST_DATABASE_URL)(
      "a policy stored while the group it names is being deleted waits for the delete, then is 404: no policy names a deleted group",
      () =>
        Effect.gen(function*() {
          const { org, svc } = yield* setup
          yield* org.client.reviewers.putGroup({ params: { name: "leaving" }, payload: { members: [] } })
          const deleted = yield* Deferred.make<void>()
          // What a group's delete does first: lock its row; then, in the same transaction, remove it.
          const deleting = yield* svc.sql.withTransaction(Effect.gen(function*() {
            yield* svc.sql`SELECT id FROM reviewer_groups WHERE org_id = ${org.orgId} AND name = 'leaving' FOR UPDATE`
            yield* Deferred.await(deleted)
            yield* svc.sql`DELETE FROM reviewer_groups WHERE org_id = ${org.orgId} AND name = 'leaving'`
          })).pipe(Effect.forkChild)
          yield* Effect.sleep("200 millis")
          const storing = yield* raw(`${svc.baseUrl}/v1/approval-policies/payments.refund`, {
            method: "PUT",
            headers: { authorization: `Bearer ${org.key}`, "content-type": "application/json" },
            body: JSON.stringify({ mode: "require_approval", ...settings, group: "leaving" })
          }).pipe(Effect.forkChild)
          yield* Effect.sleep("300 millis")
          yield* Deferred.succeed(deleted, undefined)
          yield* Fiber.join(deleting)
          const answer = yield* Fiber.join(storing)
          assert.strictEqual(answer.status, 404, answer.text)
          const policies = yield* org.client.approvalPolicies.list()
          assert.notInclude(policies.policies.map((p) => p.group), "leaving")
        })
    )

    it.effect("a policy naming a group that does not exist is 404 naming the field; a group in use is not deleted (409 GROUP_IN_USE)", () =>
      Effect.gen(function*() {
        const { org, usePolicy, pending, svc } = yield* setup
        const unknown = yield* Effect.flip(org.client.approvalPolicies.put({
          params: { action_class: "payments.refund" },
          payload: { mode: "require_approval", ...settings, group: "nobody" }
        }))
        assert.strictEqual(unknown._tag, "NotFound")
        assert.include(unknown._tag === "NotFound" ? unknown.detail : "", "(group)")
        const inRule = yield* Effect.flip(
          usePolicy({
            ...refunds(),
            rules: [{ ...refunds().rules![0]!, result: { ...refunds().rules![0]!.result, group: "nobody" } as any }]
          })
        )
        assert.include(inRule._tag === "NotFound" ? inRule.detail : "", "(rules[0].result.group)")
        // The schema says it (the typed client checks it before sending): the server answers 400 too.
        const noEscalation = yield* raw(`${svc.baseUrl}/v1/approval-policies/payments.refund`, {
          method: "PUT",
          headers: { authorization: `Bearer ${org.key}`, "content-type": "application/json" },
          body: JSON.stringify({ mode: "require_approval", ...settings, escalation_chain: ["finance"] })
        })
        assert.strictEqual(noEscalation.status, 400, noEscalation.text)
        assert.strictEqual(noEscalation.json.field, "escalation_chain")

        const stored = yield* usePolicy(refunds({ chain: true }))
        const result = stored.rules[0]!.result
        assert.deepStrictEqual(result.decision === "require_approval" && [result.group, result.escalation_chain], [
          "leads",
          ["finance"]
        ])
        const tried = yield* org.client.approvalPolicies.dryRun({
          params: { action_class: "payments.refund" },
          payload: { tool: "stripe.refund", arguments: { amount: 5000 } }
        })
        assert.strictEqual(tried.approval?.group, "leads")
        assert.deepStrictEqual(tried.approval?.escalation_chain, ["finance"])
        for (const name of ["leads", "finance"]) {
          const used = yield* Effect.flip(org.client.reviewers.deleteGroup({ params: { name } }))
          assert.strictEqual(used._tag, "GroupInUse")
        }
        yield* pending("in-use")
        yield* usePolicy({ mode: "require_approval", ...settings })
        // No policy names it now, but a pending approval is assigned to it.
        const assigned = yield* Effect.flip(org.client.reviewers.deleteGroup({ params: { name: "leads" } }))
        assert.strictEqual(assigned._tag, "GroupInUse")
      }))

    it.effect("an escalation chain names groups that exist: an unknown one is 404 naming its index, in the policy or in a rule", () =>
      Effect.gen(function*() {
        const { org, usePolicy } = yield* setup
        const chained = { mode: "require_approval", ...settings, escalation_seconds: 600, group: "leads" } as const
        const unknown = yield* Effect.flip(usePolicy({ ...chained, escalation_chain: ["finance", "nobody"] }))
        assert.strictEqual(unknown._tag, "NotFound")
        assert.include(unknown._tag === "NotFound" ? unknown.detail : "", "(escalation_chain[1])")
        const rule = refunds({ chain: true }).rules![0]!
        const inRule = yield* Effect.flip(
          usePolicy({
            ...refunds(),
            rules: [{ ...rule, result: { ...rule.result, escalation_chain: ["nobody"] } as any }]
          })
        )
        assert.include(inRule._tag === "NotFound" ? inRule.detail : "", "(rules[0].result.escalation_chain[0])")
        const stored = yield* usePolicy({ ...chained, escalation_chain: ["finance"] })
        assert.deepStrictEqual(stored.escalation_chain, ["finance"])
        assert.deepStrictEqual((yield* org.client.approvalPolicies.list()).policies[0]!.escalation_chain, ["finance"])
      }))

    it.effect("an escalation chain has 1 to 5 distinct groups: duplicates, six entries or none are 400 naming the field", () =>
      Effect.gen(function*() {
        const { org, svc } = yield* setup
        const put = (body: unknown) =>
          raw(`${svc.baseUrl}/v1/approval-policies/payments.refund`, {
            method: "PUT",
            headers: { authorization: `Bearer ${org.key}`, "content-type": "application/json" },
            body: JSON.stringify(body)
          })
        const chained = (chain: ReadonlyArray<string>) => ({
          mode: "require_approval",
          ...settings,
          escalation_seconds: 600,
          escalation_chain: chain
        })
        const twice = yield* put(chained(["finance", "leads", "finance"]))
        assert.strictEqual(twice.status, 400, twice.text)
        assert.strictEqual(twice.json.field, "escalation_chain[2]")
        const six = yield* put(chained(["a", "b", "c", "d", "e", "f"]))
        assert.strictEqual(six.status, 400, six.text)
        assert.strictEqual(six.json.field, "escalation_chain")
        const none = yield* put(chained([]))
        assert.strictEqual(none.status, 400, none.text)
        assert.strictEqual(none.json.field, "escalation_chain")
        const inRule = yield* put({
          ...refunds(),
          rules: [{
            ...refunds().rules![0]!,
            result: { ...refunds({ chain: true }).rules![0]!.result, escalation_chain: ["finance", "finance"] }
          }]
        })
        assert.strictEqual(inRule.status, 400, inRule.text)
        assert.strictEqual(inRule.json.field, "rules[0].result.escalation_chain[1]")
      }))
  })

  describe("who may decide", () => {
    it.effect("an approval assigned to a group carries it everywhere; only members decide, others get 403 NOT_ASSIGNED naming it", () =>
      Effect.gen(function*() {
        const { decideRaw, lead, org, outsider, pending, svc, usePolicy } = yield* setup
        yield* usePolicy(refunds())
        const approvalId = yield* pending("big")
        const read = yield* org.client.approvals.get({ params: { approval_id: approvalId } })
        assert.strictEqual(read.assigned_group, "leads")
        assert.strictEqual(read.escalation_level, 0)
        const [requested] = yield* outboxOf(svc.sql, approvalId)
        assert.deepStrictEqual(requested!.json.approval, read)
        const listed = (yield* org.client.approvals.list({ query: {} })).approvals.find((a) =>
          a.approval_id === approvalId
        )
        assert.strictEqual(listed!.assigned_group, "leads")
        // The organization's stream carries the same item as the list, written by the step's own statement.
        const [streamed] = yield* svc.sql<{ data: string }>`
          SELECT data FROM approval_stream_events WHERE name = 'approval.requested' AND data::jsonb ->> 'approval_id' = ${approvalId}
        `
        assert.deepStrictEqual(JSON.parse(streamed!.data), listed)

        const refused = yield* decideRaw(outsider.key, approvalId)
        assert.strictEqual(refused.status, 403, refused.text)
        assert.strictEqual(refused.json.code, "NOT_ASSIGNED")
        assert.strictEqual(refused.json.assigned_group, "leads")
        assert.strictEqual((yield* org.client.approvals.get({ params: { approval_id: approvalId } })).status, "pending")

        const decided = yield* lead.client.approvals.decide({
          params: { approval_id: approvalId },
          payload: { decision: "approve" }
        })
        assert.strictEqual(decided.status, "approved")
        assert.strictEqual(decided.decided_by, lead.keyId)
      }))

    it.effect("an approval no group reviews is decided by anyone with approvals.decide, and carries no assignment", () =>
      Effect.gen(function*() {
        const { outsider, pending, usePolicy } = yield* setup
        yield* usePolicy(refunds())
        const approvalId = yield* pending("small", 500)
        const decided = yield* outsider.client.approvals.decide({
          params: { approval_id: approvalId },
          payload: { decision: "approve" }
        })
        assert.strictEqual(decided.status, "approved")
        assert.notProperty(decided, "assigned_group")
        assert.notProperty(decided, "escalation_level")
      }))

    it.effect("a quorum from a group: only members vote; two members close it", () =>
      Effect.gen(function*() {
        const { decideRaw, lead, lead2, outsider, pending, usePolicy } = yield* setup
        yield* usePolicy(refunds({ quorum: 2 }))
        const approvalId = yield* pending("quorum")
        assert.strictEqual((yield* decideRaw(outsider.key, approvalId)).status, 403)
        const first = yield* lead.client.approvals.decide({
          params: { approval_id: approvalId },
          payload: { decision: "approve" }
        })
        assert.strictEqual(first.approvals_remaining, 1)
        assert.strictEqual((yield* decideRaw(outsider.key, approvalId)).status, 403)
        const closing = yield* lead2.client.approvals.decide({
          params: { approval_id: approvalId },
          payload: { decision: "approve" }
        })
        assert.strictEqual(closing.status, "approved")
      }))
  })

  describe("delegation", () => {
    it.effect("a member's delegate decides the group's approvals within the window only; ending it ends that", () =>
      Effect.gen(function*() {
        const { decideRaw, lead, outsider, pending, usePolicy } = yield* setup
        yield* usePolicy(refunds())
        const first = yield* pending("d1")
        const later = yield* lead.client.reviewers.delegate({
          payload: {
            delegate: { key_id: outsider.keyId },
            starts_at: new Date(Date.now() + 3_600_000).toISOString(),
            ends_at: new Date(Date.now() + 7_200_000).toISOString()
          }
        })
        assert.deepStrictEqual(later.delegator, { key_id: lead.keyId })
        assert.strictEqual((yield* decideRaw(outsider.key, first)).status, 403, "not before the window starts")
        const now = yield* lead.client.reviewers.delegate({
          payload: { delegate: { key_id: outsider.keyId }, ends_at: new Date(Date.now() + 3_600_000).toISOString() }
        })
        const listed = (yield* outsider.client.reviewers.listDelegations()).delegations.map((d) => d.delegation_id)
        assert.includeMembers(listed, [later.delegation_id, now.delegation_id])
        const mine =
          (yield* outsider.client.approvals.list({ query: { assigned_to: "me", status: "pending" } })).approvals
        assert.deepStrictEqual(mine.map((a) => a.approval_id), [first])
        const decided = yield* decideRaw(outsider.key, first)
        assert.strictEqual(decided.status, 200, decided.text)
        assert.strictEqual(decided.json.decided_by, outsider.keyId)

        // Only the delegator ends it; then the delegate no longer decides.
        const notTheirs = yield* Effect.flip(
          outsider.client.reviewers.endDelegation({ params: { delegation_id: now.delegation_id } })
        )
        assert.strictEqual(notTheirs._tag, "NotFound")
        const ended = yield* lead.client.reviewers.endDelegation({ params: { delegation_id: now.delegation_id } })
        assert.isNotNull(ended.ended_at)
        yield* lead.client.reviewers.endDelegation({ params: { delegation_id: later.delegation_id } })
        const second = yield* pending("d2")
        assert.strictEqual((yield* decideRaw(outsider.key, second)).status, 403)
        assert.deepStrictEqual((yield* outsider.client.approvals.list({ query: { assigned_to: "me" } })).approvals, [])
        assert.deepStrictEqual((yield* outsider.client.reviewers.listDelegations()).delegations, [])
      }))

    it.effect("a delegation's window is bounded and its delegate is another person holding approvals.decide", () =>
      Effect.gen(function*() {
        const { lead, org, svc } = yield* setup
        const reader = yield* org.newKey(["agents.read"])
        const post = (body: unknown) =>
          raw(`${svc.baseUrl}/v1/reviewer-delegations`, {
            method: "POST",
            headers: { authorization: `Bearer ${lead.key}`, "content-type": "application/json" },
            body: JSON.stringify(body)
          })
        const hour = new Date(Date.now() + 3_600_000).toISOString()
        const self = yield* post({ delegate: { key_id: lead.keyId }, ends_at: hour })
        assert.strictEqual(self.json.field, "delegate", self.text)
        const noScope = yield* post({ delegate: { key_id: reader.keyId }, ends_at: hour })
        assert.strictEqual(noScope.status, 404, noScope.text)
        const past = yield* post({
          delegate: { console_user: "ben" },
          ends_at: new Date(Date.now() - 1000).toISOString()
        })
        assert.strictEqual(past.json.field, "ends_at", past.text)
        const tooLong = yield* post({
          delegate: { console_user: "ben" },
          starts_at: new Date(Date.now()).toISOString(),
          ends_at: new Date(Date.now() + 91 * 86_400_000).toISOString()
        })
        assert.strictEqual(tooLong.status, 400, tooLong.text)
        assert.strictEqual((yield* post({ delegate: { console_user: "ben" }, ends_at: hour })).status, 200)
      }))
  })

  describe("the escalation chain", () => {
    it.effect("the first deadline hands the approval to the chain's next group: the first group no longer decides, the next does", () =>
      Effect.gen(function*() {
        const { decideRaw, financier, lead, pending, svc, usePolicy } = yield* setup
        yield* usePolicy(refunds({ chain: true, reviewSeconds: 1 }))
        const approvalId = yield* pending("chain")
        const mineBefore = (yield* financier.client.approvals.list({ query: { assigned_to: "me" } })).approvals
        assert.deepStrictEqual(mineBefore, [])
        const events = yield* eventually(
          Effect.map(outboxOf(svc.sql, approvalId), (rows) => rows.length >= 2 ? rows : undefined),
          { what: "the escalation", timeoutMs: 20_000 }
        )
        assert.deepStrictEqual(events.map((e) => e.type), ["approval.requested", "approval.escalated"])
        // The requested body, written by the step statement, names the first group as every later one names its group.
        assert.deepStrictEqual([events[0]!.json.approval.assigned_group, events[0]!.json.approval.escalation_level], [
          "leads",
          0
        ])
        assert.strictEqual(events[1]!.json.approval.assigned_group, "finance")
        assert.strictEqual(events[1]!.json.approval.escalation_level, 1)
        assert.strictEqual((yield* decideRaw(lead.key, approvalId)).status, 403)
        const mine = (yield* financier.client.approvals.list({ query: { assigned_to: "me" } })).approvals
        assert.deepStrictEqual(mine.map((a) => [a.approval_id, a.assigned_group, a.escalation]), [[
          approvalId,
          "finance",
          "escalated"
        ]])
        const decided = yield* financier.client.approvals.decide({
          params: { approval_id: approvalId },
          payload: { decision: "reject" }
        })
        assert.strictEqual(decided.status, "rejected")
      }))

    it.effect("without a chain the escalation keeps the group, as before", () =>
      Effect.gen(function*() {
        const { lead, org, pending, svc } = yield* setup
        yield* org.client.approvalPolicies.put({
          params: { action_class: "payments.refund" },
          payload: {
            mode: "require_approval",
            review_seconds: 1,
            expiring_notice_seconds: 0,
            escalation_seconds: 600,
            timeout_action: "reject",
            group: "leads"
          }
        })
        const approvalId = yield* pending("nochain")
        const events = yield* eventually(
          Effect.map(outboxOf(svc.sql, approvalId), (rows) => rows.length >= 2 ? rows : undefined),
          { what: "the escalation", timeoutMs: 20_000 }
        )
        assert.strictEqual(events[1]!.json.approval.assigned_group, "leads")
        assert.strictEqual(events[1]!.json.approval.escalation_level, 0)
        const decided = yield* lead.client.approvals.decide({
          params: { approval_id: approvalId },
          payload: { decision: "approve" }
        })
        assert.strictEqual(decided.status, "approved")
      }))
  })
})
