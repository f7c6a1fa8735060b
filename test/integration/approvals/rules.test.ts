/**
 * Rules on arguments through the API: stored with the policy (compiled, a
 * broken or oversized rule refused naming it), deciding governed steps before
 * the class's settings, named in the step's answer, the approval, the
 * session's `step:governed` event and the webhook body; and a dry run that
 * creates nothing.
 */
import { assert, describe, layer } from "@effect/vitest"
import { Effect } from "effect"
import type { PolicyInput } from "../../../src/api/Policies.ts"
import { SvcTest } from "../../../src/testing.ts"
import { outboxOf } from "../../support/approvals.ts"

const refunds: PolicyInput = {
  mode: "require_approval",
  review_seconds: 900,
  expiring_notice_seconds: 300,
  timeout_action: "reject",
  rules: [
    { name: "small", condition: "arguments.amount <= 100.0", result: { decision: "allow" } },
    {
      name: "huge",
      condition: "arguments.amount > 5000.0",
      result: { decision: "reject", reason: "Above 5 000: finance decides." }
    },
    {
      name: "eur",
      condition: "tool == 'stripe.refund' && arguments.currency == 'EUR'",
      result: {
        decision: "require_approval",
        review_seconds: 60,
        expiring_notice_seconds: 10,
        escalation_seconds: 120,
        timeout_action: "allow"
      }
    }
  ]
}

const refund = (step_id: string, args: Record<string, unknown>) => ({
  step_id,
  tool: "stripe.refund",
  action_class: "payments.refund",
  arguments: args as any
})

layer(SvcTest.layer(), { excludeTestServices: true })("rules on arguments", (it) => {
  describe("storing", () => {
    it.effect("the policy keeps its rules in order", () =>
      Effect.gen(function*() {
        const org = yield* SvcTest.org()
        const stored = yield* org.client.approvalPolicies.put({
          params: { action_class: "payments.refund" },
          payload: refunds
        })
        assert.deepStrictEqual(stored.rules.map((rule) => rule.name), ["small", "huge", "eur"])
        const [listed] = (yield* org.client.approvalPolicies.list()).policies
        assert.deepStrictEqual(listed!.rules, refunds.rules)
      }))

    it.effect("a rule that does not parse or type-check is 400 naming the rule and the position", () =>
      Effect.gen(function*() {
        const org = yield* SvcTest.org()
        const put = (condition: string) =>
          org.client.approvalPolicies.put({
            params: { action_class: "payments.refund" },
            payload: {
              ...refunds,
              rules: [...refunds.rules!, { name: "broken", condition, result: { decision: "allow" } }]
            }
          }).pipe(Effect.flip)
        for (
          const [condition, position] of [["arguments.amount >", "column 19"], [
            "true && tool > 1",
            "column 9"
          ]] as const
        ) {
          const error = yield* put(condition)
          assert.strictEqual(error._tag, "InvalidRequest")
          if (error._tag !== "InvalidRequest") continue
          assert.strictEqual(error.field, "rules[3].condition")
          assert.include(error.detail, "\"broken\"")
          assert.include(error.detail, position)
        }
        assert.deepStrictEqual((yield* org.client.approvalPolicies.list()).policies, [])
      }))

    it.effect("a rule over a limit is 400 POLICY_RULES_TOO_COMPLEX naming the setting", () =>
      Effect.gen(function*() {
        const org = yield* SvcTest.org()
        const deep = `${"(".repeat(40)}true${")".repeat(40)}`
        const error = yield* org.client.approvalPolicies.put({
          params: { action_class: "payments.refund" },
          payload: { ...refunds, rules: [{ name: "deep", condition: deep, result: { decision: "allow" } }] }
        }).pipe(Effect.flip)
        assert.strictEqual(error._tag, "PolicyRulesTooComplex")
        if (error._tag !== "PolicyRulesTooComplex") return
        assert.strictEqual(error.field, "rules[0].condition")
        assert.strictEqual(error.limit, "SVC_APPROVAL_RULE_MAX_DEPTH")
        assert.strictEqual(error.limit_value, 12)
      }))
  })

  describe("deciding steps", () => {
    it.effect("the first matching rule decides, a rejection carries its reason, the class's settings are the fallback", () =>
      Effect.gen(function*() {
        const org = yield* SvcTest.org()
        yield* org.client.approvalPolicies.put({ params: { action_class: "payments.refund" }, payload: refunds })
        const session = yield* org.client.agentSessions.create({ payload: {} })
        const govern = (stepId: string, args: Record<string, unknown>) =>
          org.client.agentSessions.governStep({ params: { session_id: session.id }, payload: refund(stepId, args) })

        // 20 EUR matches "small" and "eur": the first decides.
        assert.deepStrictEqual(yield* govern("s1", { amount: 20, currency: "EUR" }), {
          decision: "allow",
          rule: "small"
        })
        assert.deepStrictEqual(yield* govern("s2", { amount: 9000, currency: "EUR" }), {
          decision: "reject",
          rule: "huge",
          reason: "Above 5 000: finance decides."
        })
        const fallback = yield* govern("s3", { amount: 300, currency: "USD" })
        assert.strictEqual(fallback.decision, "pending")
        assert.isUndefined(fallback.rule)
        const approval = yield* org.client.approvals.get({ params: { approval_id: fallback.approval_id! } })
        assert.isUndefined(approval.rule)
        assert.strictEqual(Date.parse(approval.expires_at) - Date.parse(approval.deadline_at), 0)
        // A re-sent step answers as it did, rule and reason included.
        assert.deepStrictEqual(yield* govern("s2", { amount: 9000, currency: "EUR" }), {
          decision: "reject",
          rule: "huge",
          reason: "Above 5 000: finance decides."
        })
      }))

    it.effect("a rule requiring approval gives the approval its own deadlines, and the approval, its webhook body and the session's event name the rule", () =>
      Effect.gen(function*() {
        const svc = yield* SvcTest
        const org = yield* SvcTest.org()
        yield* org.client.approvalPolicies.put({ params: { action_class: "payments.refund" }, payload: refunds })
        const session = yield* org.client.agentSessions.create({ payload: {} })
        const args = { amount: 300, currency: "EUR" }
        const answer = yield* org.client.agentSessions.governStep({
          params: { session_id: session.id },
          payload: refund("s1", args)
        })
        assert.strictEqual(answer.decision, "pending")
        assert.strictEqual(answer.rule, "eur")
        const approval = yield* org.client.approvals.get({ params: { approval_id: answer.approval_id! } })
        assert.strictEqual(approval.rule, "eur")
        assert.strictEqual(approval.timeout_action, "allow")
        const [created] = yield* svc.sql<{ created_at: Date }>`SELECT created_at FROM approvals WHERE id = ${answer
          .approval_id!}`
        assert.strictEqual(Date.parse(approval.deadline_at) - created!.created_at.getTime(), 60_000)
        assert.strictEqual(Date.parse(approval.expires_at) - Date.parse(approval.deadline_at), 120_000)

        const [requested] = yield* outboxOf(svc.sql, answer.approval_id!)
        assert.strictEqual(requested!.json.approval.rule, "eur")
        const listed = yield* org.client.approvals.list({ query: {} })
        assert.strictEqual(listed.approvals[0]!.rule, "eur")
        const [governed] = yield* svc.sql<
          { data: string }
        >`SELECT data FROM session_events WHERE session_id = ${session.id} ORDER BY seq`
        assert.deepStrictEqual(JSON.parse(governed!.data), {
          step_id: "s1",
          tool: "stripe.refund",
          action_class: "payments.refund",
          arguments: args,
          decision: "pending",
          approval_id: answer.approval_id,
          rule: "eur"
        })
        // The decision's webhook body still names it.
        yield* org.client.approvals.decide({
          params: { approval_id: answer.approval_id! },
          payload: { decision: "approve" }
        })
        const events = yield* outboxOf(svc.sql, answer.approval_id!)
        assert.strictEqual(events.at(-1)!.json.type, "approval.approved")
        assert.strictEqual(events.at(-1)!.json.approval.rule, "eur")
      }))

    it.effect("the session's steps and an approval's earlier steps name the rule that decided each, with a rejecting rule's reason", () =>
      Effect.gen(function*() {
        const org = yield* SvcTest.org()
        yield* org.client.approvalPolicies.put({ params: { action_class: "payments.refund" }, payload: refunds })
        const session = yield* org.client.agentSessions.create({ payload: {} })
        const govern = (stepId: string, args: Record<string, unknown>) =>
          org.client.agentSessions.governStep({ params: { session_id: session.id }, payload: refund(stepId, args) })
        yield* govern("s1", { amount: 20, currency: "EUR" })
        yield* govern("s2", { amount: 9000, currency: "EUR" })
        yield* govern("s3", { amount: 300, currency: "USD" })
        const last = yield* govern("s4", { amount: 300, currency: "EUR" })
        const detail = yield* org.client.agentSessions.get({ params: { session_id: session.id }, query: {} })
        assert.deepStrictEqual(detail.steps.map((s) => [s.step_id, s.rule, s.reason]), [
          ["s1", "small", undefined],
          ["s2", "huge", "Above 5 000: finance decides."],
          ["s3", undefined, undefined],
          ["s4", "eur", undefined]
        ])
        const context = yield* org.client.approvals.context({ params: { approval_id: last.approval_id! } })
        assert.deepStrictEqual(context.earlier_steps.map((s) => [s.step_id, s.rule]), [
          ["s1", "small"],
          ["s2", "huge"],
          ["s3", undefined]
        ])
        assert.notProperty(context.earlier_steps[2], "rule")
      }))

    it.effect("a changed policy's rules apply to the next step", () =>
      Effect.gen(function*() {
        const org = yield* SvcTest.org()
        yield* org.client.approvalPolicies.put({ params: { action_class: "payments.refund" }, payload: refunds })
        const session = yield* org.client.agentSessions.create({ payload: {} })
        const govern = (stepId: string) =>
          org.client.agentSessions.governStep({
            params: { session_id: session.id },
            payload: refund(stepId, { amount: 20, currency: "EUR" })
          })
        assert.strictEqual((yield* govern("s1")).rule, "small")
        yield* org.client.approvalPolicies.put({
          params: { action_class: "payments.refund" },
          payload: { ...refunds, rules: [] }
        })
        const after = yield* govern("s2")
        assert.deepStrictEqual([after.decision, after.rule], ["pending", undefined])
      }))
  })

  describe("dry run", () => {
    it.effect("evaluates the stored policy, or a given one, against a sample step and creates nothing", () =>
      Effect.gen(function*() {
        const svc = yield* SvcTest
        const org = yield* SvcTest.org()
        const dry = (payload: Parameters<typeof org.client.approvalPolicies.dryRun>[0]["payload"]) =>
          org.client.approvalPolicies.dryRun({ params: { action_class: "payments.refund" }, payload })
        assert.deepStrictEqual(yield* dry({ tool: "stripe.refund", arguments: { amount: 20 } }), {
          decision: "pending",
          rule: null,
          approval: {
            review_seconds: 900,
            expiring_notice_seconds: 300,
            escalation_seconds: null,
            timeout_action: "reject"
          },
          policy: "default"
        })
        assert.deepStrictEqual(yield* dry({ tool: "stripe.refund", arguments: { amount: 9000 }, policy: refunds }), {
          decision: "reject",
          rule: "huge",
          reason: "Above 5 000: finance decides.",
          policy: "given"
        })
        yield* org.client.approvalPolicies.put({ params: { action_class: "payments.refund" }, payload: refunds })
        assert.deepStrictEqual(yield* dry({ tool: "stripe.refund", arguments: { amount: 300, currency: "EUR" } }), {
          decision: "pending",
          rule: "eur",
          approval: {
            review_seconds: 60,
            expiring_notice_seconds: 10,
            escalation_seconds: 120,
            timeout_action: "allow"
          },
          policy: "stored"
        })
        const missing = yield* dry({ tool: "stripe.refund", arguments: { currency: "EUR" } })
        assert.deepStrictEqual([missing.rule, missing.error?.rule], [null, "small"])
        const broken = yield* dry({
          tool: "t",
          arguments: {},
          policy: { ...refunds, rules: [{ name: "broken", condition: "1 +", result: { decision: "allow" } }] }
        }).pipe(Effect.flip)
        assert.strictEqual(broken._tag, "InvalidRequest")
        const [counts] = yield* svc.sql<{ steps: string; approvals: string; events: string }>`
          SELECT (SELECT count(*) FROM agent_steps WHERE org_id = ${org.orgId})::text AS steps,
            (SELECT count(*) FROM approvals WHERE org_id = ${org.orgId})::text AS approvals,
            (SELECT count(*) FROM events WHERE org_id = ${org.orgId})::text AS events
        `
        assert.deepStrictEqual(counts, { steps: "0", approvals: "0", events: "0" })
      }))
  })
})
