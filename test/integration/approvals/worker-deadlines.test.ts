/**
 * The deadlines of the rule workers' checks as a decision or a policy
 * write meets them (`approvals/RuleWorkers.ts`): with a deadline no real
 * work fits in, the check of a policy's rules as it is stored is
 * `400 POLICY_RULES_TOO_COMPLEX` naming `rules` and
 * `SVC_ANSWER_VALIDATION_TIMEOUT`, and the scrub of a rejection's
 * `response` is `422 ARGUMENTS_TOO_COMPLEX` naming `response` and
 * `SVC_SCRUB_TIMEOUT`. Nothing is stored by either, and the worker the
 * deadline ended is replaced: the next check is answered.
 */
import { assert, describe, layer } from "@effect/vitest"
import { Effect } from "effect"
import { SvcTest } from "../../../src/testing.ts"
import { raw } from "../../support/http.ts"

/** Below what sending the work to a child process and back takes, let alone the work. */
const DEADLINE_MS = 1

const settings = { mode: "require_approval", review_seconds: 900, expiring_notice_seconds: 0, timeout_action: "reject" }

/** Fifty rules of about 200 nodes each, padded to 2 000 characters: tens of milliseconds to parse and type-check. */
const heavyRules = Array.from({ length: 50 }, (_, i) => {
  const terms = Array.from({ length: 96 }, (_, n) => (n === 0 ? `arguments.a${i}` : `${n}.0`))
  const balanced = (items: ReadonlyArray<string>): string =>
    items.length === 1
      ? items[0]!
      : `(${balanced(items.slice(0, items.length >> 1))} + ${balanced(items.slice(items.length >> 1))})`
  const condition = `${balanced(terms)} > 0.0 && "" != "`
  return {
    name: `r${i}`,
    condition: `${condition}${"p".repeat(2000 - condition.length - 1)}"`,
    result: { decision: "allow" }
  }
})

/** 65 000 characters of secret-shaped text: tens of milliseconds to scrub. */
const secretShaped = Array.from(
  { length: 4000 },
  (_, i) =>
    i % 2 === 0 ? `AWS_SECRET_ACCESS_KEY=${"wJalrXUtnFEMI/K7MDENG".padEnd(40, `${i % 10}`)}` : `password=s3cr3t${i}`
).join(" ").slice(0, 65_000)

layer(
  SvcTest.layer({ config: { answerValidationTimeoutMs: DEADLINE_MS, scrubTimeoutMs: DEADLINE_MS } }),
  { excludeTestServices: true }
)("the rule workers' deadlines", (it) => {
  const call = (key: string, method: string, path: string, body: unknown) =>
    Effect.gen(function*() {
      const svc = yield* SvcTest
      return yield* raw(`${svc.baseUrl}${path}`, {
        method,
        headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
        body: JSON.stringify(body)
      })
    })

  describe("past its deadline", () => {
    it.effect(
      "a policy's rules checked as it is stored are 400 POLICY_RULES_TOO_COMPLEX naming rules and SVC_ANSWER_VALIDATION_TIMEOUT; nothing is stored",
      () =>
        Effect.gen(function*() {
          const org = yield* SvcTest.org()
          for (const attempt of [1, 2]) {
            const answer = yield* call(org.key, "PUT", "/v1/approval-policies/rules.heavy", {
              ...settings,
              rules: heavyRules
            })
            assert.strictEqual(answer.status, 400, `attempt ${attempt}: ${answer.text.slice(0, 300)}`)
            assert.strictEqual(answer.json.code, "POLICY_RULES_TOO_COMPLEX")
            assert.strictEqual(answer.json.field, "rules")
            assert.strictEqual(answer.json.limit, "SVC_ANSWER_VALIDATION_TIMEOUT")
            assert.strictEqual(answer.json.limit_value, DEADLINE_MS)
            assert.include(answer.json.detail, `took longer than ${DEADLINE_MS} ms`)
          }
          const { policies } = yield* org.client.approvalPolicies.list()
          assert.deepStrictEqual(policies.map((policy) => policy.action_class), [])
        }),
      60_000
    )

    it.effect(
      "a rejection's response scrubbed of secrets is 422 ARGUMENTS_TOO_COMPLEX naming response and SVC_SCRUB_TIMEOUT; the approval stays pending",
      () =>
        Effect.gen(function*() {
          const org = yield* SvcTest.org()
          const policy = yield* call(org.key, "PUT", "/v1/approval-policies/answer.heavy", settings)
          assert.strictEqual(policy.status, 200, policy.text)
          const session = yield* org.client.agentSessions.create({ payload: {} })
          const step = yield* org.client.agentSessions.governStep({
            params: { session_id: session.id },
            payload: { step_id: "s1", tool: "t", action_class: "answer.heavy", arguments: {} }
          })
          const approvalId = step.approval_id!
          for (const attempt of [1, 2]) {
            const answer = yield* call(org.key, "POST", `/v1/agent-approvals/${approvalId}/decision`, {
              decision: "reject",
              response: secretShaped
            })
            assert.strictEqual(answer.status, 422, `attempt ${attempt}: ${answer.text.slice(0, 300)}`)
            assert.strictEqual(answer.json.code, "ARGUMENTS_TOO_COMPLEX")
            assert.strictEqual(answer.json.field, "response")
            assert.strictEqual(answer.json.limit, "SVC_SCRUB_TIMEOUT")
            assert.strictEqual(answer.json.limit_value, DEADLINE_MS)
            assert.include(answer.json.detail, `took longer than ${DEADLINE_MS} ms`)
          }
          const approval = yield* call(org.key, "GET", `/v1/agent-approvals/${approvalId}`, undefined)
          assert.strictEqual(approval.json.status, "pending", approval.text.slice(0, 300))
          assert.notProperty(approval.json, "response")
        }),
      60_000
    )
  })
})
