/**
 * Rules and edits under budgets enforced while they run: a stored rule that
 * builds its own lists, a dry run of one, an edit's diff. The expensive
 * request ends with its documented outcome within the deadline. That another
 * organization is answered meanwhile is the hostile-tenant suite's
 * (test/hostile/approvals.test.ts): it times those reads alone on the
 * machine, where here other test files share the cores. Dry runs count against a
 * per-organization rate; a step sent again is answered from its row without
 * evaluating its rules; an edit's cheap refusals (403, 409) come before any
 * work on its body (422); type errors carry their line and column.
 */
import { assert, describe, layer } from "@effect/vitest"
import { Effect } from "effect"
import { MAX_EDITED_ARGUMENTS_CHARACTERS } from "../../../src/api/ApprovalEdits.ts"
import type { PolicyInput } from "../../../src/api/Policies.ts"
import { SvcTest, type TestOrg } from "../../../src/testing.ts"
import { hostileRules } from "../../support/hostileRules.ts"
import { raw } from "../../support/http.ts"

/** The deadline of a policy's rules in this file: the largest allowed, so a replay's answer is told apart from an evaluation's. */
const TIMEOUT_MS = 1000
const DRY_RUNS_PER_MINUTE = 4

const rulesConfig = {
  maxRules: 50,
  maxLength: 2000,
  maxNodes: 200,
  maxDepth: 12,
  timeoutMs: TIMEOUT_MS,
  // With a deadline of a second a rule building lists fills a small heap
  // first, and one native step past the heap's allowance ends the whole
  // process (RuleWorkers.ts): a heap the deadline always comes before.
  heapMb: 1024,
  workers: 2,
  queue: 128,
  dryRunsPerMinute: DRY_RUNS_PER_MINUTE
}

const hostile = (name: string) => hostileRules().find((rule) => rule.name === name)!

const settings = { review_seconds: 900, expiring_notice_seconds: 300, timeout_action: "reject" } as const

const step = (org: TestOrg, sessionId: string, stepId: string, args: unknown) =>
  Effect.gen(function*() {
    const svc = yield* SvcTest
    const started = performance.now()
    const answer = yield* raw(`${svc.baseUrl}/v1/agent-sessions/${sessionId}/steps`, {
      method: "POST",
      headers: { authorization: `Bearer ${org.key}`, "content-type": "application/json" },
      body: JSON.stringify({ step_id: stepId, tool: "mail.send", action_class: "mail.send", arguments: args })
    })
    return { ...answer, ms: performance.now() - started }
  })

layer(SvcTest.layer({ config: { approvalRules: rulesConfig } }), { excludeTestServices: true })(
  "budgets of rules and edits",
  (it) => {
    describe("a stored rule on a step", () => {
      it.effect(
        "one that builds its own lists ends at its deadline: the class's settings decide",
        () =>
          Effect.gen(function*() {
            const org = yield* SvcTest.org()
            const { rule, arguments: args } = hostile("recipients")
            yield* org.client.approvalPolicies.put({
              params: { action_class: "mail.send" },
              payload: { mode: "reject", ...settings, rules: [rule] }
            })
            const session = yield* org.client.agentSessions.create({ payload: {} })
            // The rule workers started (a server starts them with it; the test kit does not warm).
            const small = yield* step(org, session.id, "fan-out-0", { recipients: "a,b", blocked: "c" })
            assert.deepStrictEqual(small.json, { decision: "reject" })
            const result = yield* step(org, session.id, "fan-out-1", args)
            assert.strictEqual(result.status, 200, result.text.slice(0, 300))
            // The rule did not decide (it would allow): the class's settings did.
            assert.deepStrictEqual(result.json, { decision: "reject" })
            // The deadline, plus reading, checking and storing a 500 KB step on a machine shared by several test runs.
            assert.isBelow(result.ms, TIMEOUT_MS + 5000, `the step took ${result.ms} ms`)
          }),
        60_000
      )

      it.effect("string work in a comprehension is bounded alike", () =>
        Effect.gen(function*() {
          const org = yield* SvcTest.org()
          const { rule, arguments: args } = hostile("contains-loop")
          yield* org.client.approvalPolicies.put({
            params: { action_class: "mail.send" },
            payload: { mode: "reject", ...settings, rules: [rule] }
          })
          const session = yield* org.client.agentSessions.create({ payload: {} })
          yield* step(org, session.id, "contains-0", { l: [1], s: "ab", t: "c" })
          const result = yield* step(org, session.id, "contains-1", args)
          assert.strictEqual(result.status, 200, result.text.slice(0, 300))
          assert.deepStrictEqual(result.json, { decision: "reject" })
        }), 60_000)

      it.effect(
        "a step sent again is answered from its row, without evaluating its rules again",
        () =>
          Effect.gen(function*() {
            const org = yield* SvcTest.org()
            // A small step (2 KB) whose rule runs to the deadline: what the replay costs is not the step's size.
            const { rule, arguments: args } = hostile("bind-loop")
            yield* org.client.approvalPolicies.put({
              params: { action_class: "mail.send" },
              payload: { mode: "reject", ...settings, rules: [rule] }
            })
            const session = yield* org.client.agentSessions.create({ payload: {} })
            const first = yield* step(org, session.id, "again-1", args)
            assert.isAtLeast(first.ms, TIMEOUT_MS - 50)
            const again = yield* step(org, session.id, "again-1", args)
            assert.strictEqual(again.status, 200)
            assert.deepStrictEqual(again.json, first.json)
            // An evaluation runs to the deadline (the rule never ends sooner): the replay did not run it.
            assert.isBelow(again.ms, TIMEOUT_MS / 2, `the replay took ${again.ms} ms`)
          }),
        60_000
      )
    })

    describe("dry runs", () => {
      it.effect(
        "one of a rule that builds its own lists is 400 naming the limit, within the deadline, by a key holding only org_config.read",
        () =>
          Effect.gen(function*() {
            const svc = yield* SvcTest
            for (const name of ["split-exists", "split-map", "bind-loop"]) {
              const org = yield* SvcTest.org({ scopes: ["org_config.read"] })
              const { rule, arguments: args } = hostile(name)
              const dry = (rules: ReadonlyArray<unknown>) =>
                raw(`${svc.baseUrl}/v1/approval-policies/mail.send/dry-run`, {
                  method: "POST",
                  headers: { authorization: `Bearer ${org.key}`, "content-type": "application/json" },
                  body: JSON.stringify({
                    tool: "mail.send",
                    arguments: args,
                    policy: { mode: "reject", ...settings, rules }
                  })
                })
              // A rule worker ready (the previous case's was replaced): the time measured is this dry run's.
              assert.strictEqual(
                (yield* dry([{ name: "ready", condition: "[1].exists(x, x == 2)", result: { decision: "allow" } }]))
                  .status,
                200
              )
              const started = performance.now()
              const result = yield* dry([rule])
              const took = performance.now() - started
              assert.strictEqual(result.status, 400, `${name}: ${result.text.slice(0, 300)}`)
              assert.strictEqual(result.json.code, "POLICY_RULES_TOO_COMPLEX")
              assert.include(["SVC_APPROVAL_RULES_TIMEOUT", "SVC_APPROVAL_RULES_HEAP_MB"], result.json.limit)
              assert.strictEqual(result.json.field, "rules[0].condition")
              assert.isBelow(took, TIMEOUT_MS + 3000, `${name} took ${took} ms`)
            }
          }),
        120_000
      )

      it.effect(`count against SVC_APPROVAL_DRY_RUNS_PER_MINUTE: past ${DRY_RUNS_PER_MINUTE} a minute, 429 naming it with Retry-After`, () =>
        Effect.gen(function*() {
          const svc = yield* SvcTest
          const org = yield* SvcTest.org({ scopes: ["org_config.read"] })
          const other = yield* SvcTest.org({ scopes: ["org_config.read"] })
          const dry = (key: string) =>
            raw(`${svc.baseUrl}/v1/approval-policies/mail.send/dry-run`, {
              method: "POST",
              headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
              body: JSON.stringify({ tool: "mail.send", arguments: {} })
            })
          for (let i = 0; i < DRY_RUNS_PER_MINUTE; i++) {
            assert.strictEqual((yield* dry(org.key)).status, 200)
          }
          const refused = yield* dry(org.key)
          assert.strictEqual(refused.status, 429)
          assert.strictEqual(refused.json.code, "RATE_LIMITED")
          assert.strictEqual(refused.json.limit, "SVC_APPROVAL_DRY_RUNS_PER_MINUTE")
          assert.isAtLeast(Number(refused.headers.get("retry-after")), 1)
          // Another organization's allowance is its own.
          assert.strictEqual((yield* dry(other.key)).status, 200)
        }))
    })

    describe("type errors", () => {
      it.effect("a condition of the wrong type is 400 with its line and column, stored or dry run", () =>
        Effect.gen(function*() {
          const org = yield* SvcTest.org()
          const policy: PolicyInput = {
            mode: "reject",
            ...settings,
            rules: [{ name: "sized", condition: "size(tool)", result: { decision: "allow" } }]
          }
          const put = yield* org.client.approvalPolicies.put({ params: { action_class: "mail.send" }, payload: policy })
            .pipe(Effect.flip)
          assert.strictEqual(put._tag, "InvalidRequest")
          if (put._tag === "InvalidRequest") {
            assert.include(put.detail, "line 1, column 1")
          }
          const dry = yield* org.client.approvalPolicies.dryRun({
            params: { action_class: "mail.send" },
            payload: { tool: "t", arguments: {}, policy }
          })
            .pipe(Effect.flip)
          assert.strictEqual(dry._tag, "InvalidRequest")
          if (dry._tag === "InvalidRequest") assert.include(dry.detail, "line 1, column 1")
        }))
    })

    describe("edits", () => {
      const refundSchema = {
        type: "object",
        properties: { amount: { type: "number", maximum: 5000 } },
        required: ["amount"]
      }
      const setup = (policy: Partial<PolicyInput> = {}) =>
        Effect.gen(function*() {
          const svc = yield* SvcTest
          const org = yield* SvcTest.org()
          const [member, outsider] = yield* Effect.all(
            [1, 2].map(() => org.newKey(["approvals.decide", "agents.read"]))
          )
          yield* org.client.reviewers.putGroup({
            params: { name: "leads" },
            payload: { members: [{ key_id: member!.keyId }] }
          })
          yield* org.client.approvalPolicies.put({
            params: { action_class: "payments.refund" },
            payload: { mode: "require_approval", ...settings, arguments_schema: refundSchema, ...policy }
          })
          const session = yield* org.client.agentSessions.create({ payload: {} })
          const pending = (stepId: string, args: Record<string, unknown>) =>
            org.client.agentSessions.governStep({
              params: { session_id: session.id },
              payload: {
                step_id: stepId,
                tool: "stripe.refund",
                action_class: "payments.refund",
                arguments: args as any
              }
            }).pipe(Effect.map((answer) => answer.approval_id!))
          const decide = (key: string, approvalId: string, body: unknown) =>
            raw(`${svc.baseUrl}/v1/agent-approvals/${approvalId}/decision`, {
              method: "POST",
              headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
              body: JSON.stringify(body)
            })
          return { svc, org, member: member!, outsider: outsider!, pending, decide }
        })

      /** Edited arguments that do not fit the schema (a 422 if they were checked). */
      const unfit = { amount: "x".repeat(100_000) }

      it.effect("a non-member's edit is 403 before its arguments are checked (not 422)", () =>
        Effect.gen(function*() {
          const { outsider, pending, decide } = yield* setup({ group: "leads" })
          const approvalId = yield* pending("group-1", { amount: 10 })
          const answer = yield* decide(outsider.key, approvalId, { decision: "approve", arguments: unfit })
          assert.strictEqual(answer.status, 403)
          assert.strictEqual(answer.json.code, "NOT_ASSIGNED")
        }))

      it.effect("an edit of a closed approval is 409 before its arguments are checked (not 422)", () =>
        Effect.gen(function*() {
          const { org, pending, decide } = yield* setup()
          const approvalId = yield* pending("closed-1", { amount: 10 })
          assert.strictEqual((yield* decide(org.key, approvalId, { decision: "reject" })).status, 200)
          const answer = yield* decide(org.key, approvalId, { decision: "approve", arguments: unfit })
          assert.strictEqual(answer.status, 409)
          assert.strictEqual(answer.json.code, "INVALID_TRANSITION")
        }))

      it.effect(
        "a large edit stores a bounded list of what changed, not a pointer per item",
        () =>
          Effect.gen(function*() {
            const { svc, org, pending, decide } = yield* setup()
            // Long member names repeated in every pointer: 240 KB once grew into a 48 MB approval.
            const key = "k".repeat(2000)
            const before = { amount: 10, [key]: Array.from({ length: 60_000 }, () => 1) }
            const after = { amount: 10, [key]: Array.from({ length: 60_000 }, () => 2) }
            const approvalId = yield* pending("large-1", before)
            const answer = yield* decide(org.key, approvalId, { decision: "approve", arguments: after })
            assert.strictEqual(answer.status, 200, answer.text.slice(0, 300))
            assert.deepStrictEqual(answer.json.arguments_changed, [`/${key}`])
            const [row] = yield* svc.sql<
              { bytes: number }
            >`SELECT octet_length(arguments_changed::text) AS bytes FROM approvals WHERE id = ${approvalId}`
            assert.isBelow(Number(row!.bytes), 3000)
          }),
        60_000
      )

      it.effect(`edited arguments over ${MAX_EDITED_ARGUMENTS_CHARACTERS} characters are 400 naming arguments`, () =>
        Effect.gen(function*() {
          const { org, pending, decide } = yield* setup()
          const approvalId = yield* pending("huge-1", { amount: 10 })
          const answer = yield* decide(org.key, approvalId, {
            decision: "approve",
            arguments: { amount: 1, note: "x".repeat(MAX_EDITED_ARGUMENTS_CHARACTERS) }
          })
          assert.strictEqual(answer.status, 400)
          assert.strictEqual(answer.json.field, "arguments")
          const response = yield* decide(org.key, approvalId, { decision: "reject", response: "y".repeat(70_000) })
          assert.strictEqual(response.status, 400)
          assert.strictEqual(response.json.field, "response")
        }))
    })
  }
)
