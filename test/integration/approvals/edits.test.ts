/**
 * Approve with edits, or answer: a policy's `arguments_schema` (checked and
 * bounded as answer schemas are), a decision with edited `arguments`
 * (checked against it, 422 naming the field) or a `response` for the agent;
 * the approval read, the webhook events, the session's `approval:decided`
 * and the step show the final arguments, what changed and their digest; the
 * step's outcome is bound to that digest.
 */
import { assert, describe, layer } from "@effect/vitest"
import { Effect } from "effect"
import type { PolicyInput } from "../../../src/api/Policies.ts"
import { argumentsDigest } from "../../../src/approvals/ArgumentsDiff.ts"
import { SvcTest } from "../../../src/testing.ts"
import { outboxOf } from "../../support/approvals.ts"
import { raw } from "../../support/http.ts"

const refundSchema = {
  type: "object",
  required: ["amount", "currency"],
  properties: {
    amount: { type: "number", minimum: 0, maximum: 5000 },
    currency: { enum: ["EUR", "USD"] },
    note: { type: "string", maxLength: 200 }
  },
  additionalProperties: false
}

const refunds: PolicyInput = {
  mode: "require_approval",
  review_seconds: 900,
  expiring_notice_seconds: 300,
  timeout_action: "reject",
  arguments_schema: refundSchema
}

const setup = (policy: PolicyInput | null = refunds) =>
  Effect.gen(function*() {
    const svc = yield* SvcTest
    const org = yield* SvcTest.org()
    if (policy !== null) {
      yield* org.client.approvalPolicies.put({ params: { action_class: "payments.refund" }, payload: policy })
    }
    const session = yield* org.client.agentSessions.create({ payload: {} })
    const pending = (
      stepId: string,
      args: Record<string, unknown> = { amount: 120, currency: "EUR", note: "ticket 4411" }
    ) =>
      org.client.agentSessions.governStep({
        params: { session_id: session.id },
        payload: { step_id: stepId, tool: "stripe.refund", action_class: "payments.refund", arguments: args as any }
      }).pipe(Effect.map((answer) => answer.approval_id!))
    const send = (approvalId: string, body: unknown) =>
      raw(`${svc.baseUrl}/v1/agent-approvals/${approvalId}/decision`, {
        method: "POST",
        headers: { authorization: `Bearer ${org.key}`, "content-type": "application/json" },
        body: JSON.stringify(body)
      })
    const decidedEvents = svc.sql<{ data: string }>`
      SELECT data FROM session_events WHERE session_id = ${session.id} AND name = 'approval:decided' ORDER BY seq
    `.pipe(Effect.orDie, Effect.map((rows) => rows.map((row) => JSON.parse(row.data))))
    const stepOf = (stepId: string) =>
      org.client.agentSessions.get({ params: { session_id: session.id }, query: {} }).pipe(
        Effect.map((detail) => detail.steps.find((s) => s.step_id === stepId)!)
      )
    return { svc, org, session, pending, send, decidedEvents, stepOf }
  })

layer(SvcTest.layer(), { excludeTestServices: true })("approve with edits, or answer", (it) => {
  describe("the arguments schema of a policy", () => {
    it.effect("is stored with the policy and listed", () =>
      Effect.gen(function*() {
        const { org } = yield* setup()
        const [listed] = (yield* org.client.approvalPolicies.list()).policies
        assert.deepStrictEqual(listed!.arguments_schema, refundSchema)
      }))

    it.effect("one that is not JSON Schema is 400 INVALID_REQUEST naming arguments_schema", () =>
      Effect.gen(function*() {
        const { org } = yield* setup(null)
        const error = yield* org.client.approvalPolicies.put({
          params: { action_class: "payments.refund" },
          payload: { ...refunds, arguments_schema: { type: "no-such-type" } }
        }).pipe(Effect.flip)
        assert.strictEqual(error._tag, "InvalidRequest")
        if (error._tag === "InvalidRequest") assert.strictEqual(error.field, "arguments_schema")
        assert.deepStrictEqual((yield* org.client.approvalPolicies.list()).policies, [])
      }))

    it.effect("one over an answer-schema limit is 400 ANSWER_SCHEMA_TOO_COMPLEX naming the setting and the place", () =>
      Effect.gen(function*() {
        const { org } = yield* setup(null)
        let deep: Record<string, unknown> = { type: "string" }
        for (let i = 0; i < 20; i++) deep = { type: "object", properties: { a: deep } }
        const error = yield* org.client.approvalPolicies.put({
          params: { action_class: "payments.refund" },
          payload: { ...refunds, arguments_schema: deep as any }
        }).pipe(Effect.flip)
        assert.strictEqual(error._tag, "AnswerSchemaTooComplex")
        if (error._tag !== "AnswerSchemaTooComplex") return
        assert.strictEqual(error.limit, "SVC_ANSWER_SCHEMA_MAX_DEPTH")
        assert.match(error.field, /^arguments_schema\.properties\.a/)
      }))

    it.effect("a dry run's given policy has its arguments schema checked too", () =>
      Effect.gen(function*() {
        const { org } = yield* setup(null)
        const error = yield* org.client.approvalPolicies.dryRun({
          params: { action_class: "payments.refund" },
          payload: {
            tool: "stripe.refund",
            arguments: { amount: 1 },
            policy: { ...refunds, arguments_schema: { type: "no-such-type" } }
          }
        }).pipe(Effect.flip)
        assert.strictEqual(error._tag, "InvalidRequest")
        if (error._tag === "InvalidRequest") assert.strictEqual(error.field, "arguments_schema")
      }))

    it.effect("one that is not an object is 400 from the request schema", () =>
      Effect.gen(function*() {
        const { svc, org } = yield* setup(null)
        const response = yield* raw(`${svc.baseUrl}/v1/approval-policies/payments.refund`, {
          method: "PUT",
          headers: { authorization: `Bearer ${org.key}`, "content-type": "application/json" },
          body: JSON.stringify({ ...refunds, arguments_schema: [1] })
        })
        assert.strictEqual(response.status, 400)
        assert.strictEqual(response.json.field, "arguments_schema")
      }))
  })

  describe("approve with edited arguments", () => {
    it.effect("the read, approval.approved, approval:decided and the step show the final arguments, what changed and their digest", () =>
      Effect.gen(function*() {
        const { svc, org, pending, decidedEvents, stepOf } = yield* setup()
        const approvalId = yield* pending("edit-1")
        const edited = { amount: 100, currency: "EUR" }
        const decided = yield* org.client.approvals.decide({
          params: { approval_id: approvalId },
          payload: { decision: "approve", reason: "Capped at the order total.", arguments: edited }
        })
        const digest = argumentsDigest(edited)
        assert.strictEqual(decided.status, "approved")
        assert.deepStrictEqual(decided.approved_arguments, edited)
        assert.deepStrictEqual(decided.arguments_changed, ["/amount", "/note"])
        assert.strictEqual(decided.arguments_digest, digest)
        assert.deepStrictEqual(yield* org.client.approvals.get({ params: { approval_id: approvalId } }), decided)
        const events = yield* outboxOf(svc.sql, approvalId)
        assert.deepStrictEqual(events.map((e) => e.type), ["approval.requested", "approval.approved"])
        assert.deepStrictEqual(events[1]!.json.approval, decided)
        assert.notProperty(events[0]!.json.approval, "approved_arguments")
        const [streamed] = yield* decidedEvents
        assert.deepStrictEqual(streamed.approved_arguments, edited)
        assert.deepStrictEqual(streamed.arguments_changed, ["/amount", "/note"])
        assert.strictEqual(streamed.arguments_digest, digest)
        const step = yield* stepOf("edit-1")
        assert.strictEqual(step.resolution, "allow")
        assert.deepStrictEqual(step.arguments, { amount: 120, currency: "EUR", note: "ticket 4411" })
        assert.deepStrictEqual(step.approved_arguments, edited)
        assert.strictEqual(step.arguments_digest, digest)
        const { approvals } = yield* org.client.approvals.list({ query: { status: "approved" } })
        assert.deepStrictEqual(approvals.find((a) => a.approval_id === approvalId)?.approved_arguments, edited)
      }))

    it.effect("edited arguments that do not fit the schema are 422 ARGUMENTS_SHAPE_MISMATCH naming the field; nothing is decided", () =>
      Effect.gen(function*() {
        const { org, pending, send } = yield* setup()
        const approvalId = yield* pending("edit-bad")
        const response = yield* send(approvalId, { decision: "approve", arguments: { amount: 9000, currency: "EUR" } })
        assert.strictEqual(response.status, 422)
        assert.strictEqual(response.json.code, "ARGUMENTS_SHAPE_MISMATCH")
        assert.strictEqual(response.json.field, "arguments.amount")
        assert.deepStrictEqual(response.json.errors.map((e: { field: string }) => e.field), ["arguments.amount"])
        const missing = yield* send(approvalId, { decision: "approve", arguments: { amount: 10 } })
        assert.strictEqual(missing.status, 422)
        assert.strictEqual(missing.json.field, "arguments.currency")
        assert.strictEqual((yield* org.client.approvals.get({ params: { approval_id: approvalId } })).status, "pending")
      }))

    it.effect("the typed client gets ArgumentsShapeMismatch", () =>
      Effect.gen(function*() {
        const { org, pending } = yield* setup()
        const approvalId = yield* pending("edit-typed")
        const error = yield* org.client.approvals.decide({
          params: { approval_id: approvalId },
          payload: { decision: "approve", arguments: { amount: 1, currency: "GBP" } }
        }).pipe(Effect.flip)
        assert.strictEqual(error._tag, "ArgumentsShapeMismatch")
        if (error._tag === "ArgumentsShapeMismatch") assert.strictEqual(error.field, "arguments.currency")
      }))

    it.effect("without an arguments schema edits are refused (422 naming arguments); a plain approval works", () =>
      Effect.gen(function*() {
        const { arguments_schema: _, ...withoutSchema } = refunds
        const { org, pending, send } = yield* setup(withoutSchema)
        const approvalId = yield* pending("no-schema")
        const response = yield* send(approvalId, { decision: "approve", arguments: { amount: 1, currency: "EUR" } })
        assert.strictEqual(response.status, 422)
        assert.strictEqual(response.json.code, "ARGUMENTS_SHAPE_MISMATCH")
        assert.strictEqual(response.json.field, "arguments")
        assert.include(response.json.detail, "declares no arguments_schema")
        const decided = yield* org.client.approvals.decide({
          params: { approval_id: approvalId },
          payload: { decision: "approve" }
        })
        assert.notProperty(decided, "approved_arguments")
      }))

    it.effect("arguments go with approve only, a response with reject only, neither null: 400 from the request schema", () =>
      Effect.gen(function*() {
        const { pending, send } = yield* setup()
        const approvalId = yield* pending("mixups")
        for (
          const [body, field] of [
            [{ decision: "reject", arguments: { amount: 1, currency: "EUR" } }, "arguments"],
            [{ decision: "approve", response: "no" }, "response"],
            [{ decision: "reject", response: null }, "response"],
            [{ decision: "approve", arguments: null }, "arguments"]
          ] as const
        ) {
          const response = yield* send(approvalId, body)
          assert.strictEqual(response.status, 400, JSON.stringify(body))
          assert.strictEqual(response.json.field, field)
        }
      }))
  })

  describe("answer instead of running the tool", () => {
    it.effect("reject with a response: the step is rejected and carries it; approval.rejected and approval:decided too", () =>
      Effect.gen(function*() {
        const { svc, org, pending, decidedEvents, stepOf } = yield* setup()
        const approvalId = yield* pending("respond-1")
        const answer = { message: "Refunds above 100 go through the billing desk; I opened ticket 7 for you." }
        const decided = yield* org.client.approvals.decide({
          params: { approval_id: approvalId },
          payload: { decision: "reject", response: answer }
        })
        assert.strictEqual(decided.status, "rejected")
        assert.deepStrictEqual(decided.response, answer)
        assert.notProperty(decided, "approved_arguments")
        const events = yield* outboxOf(svc.sql, approvalId)
        assert.strictEqual(events[1]!.type, "approval.rejected")
        assert.deepStrictEqual(events[1]!.json.approval.response, answer)
        const [streamed] = yield* decidedEvents
        assert.strictEqual(streamed.resolution, "reject")
        assert.deepStrictEqual(streamed.response, answer)
        const step = yield* stepOf("respond-1")
        assert.strictEqual(step.resolution, "reject")
        assert.deepStrictEqual(step.response, answer)
        // The tool did not run: no outcome can be reported.
        const outcome = yield* org.client.agentSessions.reportOutcome({
          params: {
            session_id: (yield* org.client.approvals.get({ params: { approval_id: approvalId } })).session_id,
            step_id: "respond-1"
          },
          payload: { status: "succeeded" }
        }).pipe(Effect.flip)
        assert.strictEqual(outcome._tag, "InvalidTransition")
      }))

    it.effect("a text response works without an arguments schema", () =>
      Effect.gen(function*() {
        const { org, pending } = yield* setup(null)
        const approvalId = yield* pending("respond-text")
        const decided = yield* org.client.approvals.decide({
          params: { approval_id: approvalId },
          payload: { decision: "reject", response: "Ask the customer for the order number first." }
        })
        assert.strictEqual(decided.response, "Ask the customer for the order number first.")
      }))
  })

  describe("the outcome is bound to the approved arguments", () => {
    it.effect("a step approved with edits takes an outcome only with their digest", () =>
      Effect.gen(function*() {
        const { org, session, pending, stepOf } = yield* setup()
        const approvalId = yield* pending("bound")
        const edited = { amount: 80, currency: "EUR" }
        yield* org.client.approvals.decide({
          params: { approval_id: approvalId },
          payload: { decision: "approve", arguments: edited }
        })
        const report = (payload: { readonly status: "succeeded"; readonly arguments_digest?: string }) =>
          org.client.agentSessions.reportOutcome({ params: { session_id: session.id, step_id: "bound" }, payload })
        const without = yield* report({ status: "succeeded" }).pipe(Effect.flip)
        assert.strictEqual(without._tag, "InvalidRequest")
        if (without._tag === "InvalidRequest") assert.strictEqual(without.field, "arguments_digest")
        const other = yield* report({
          status: "succeeded",
          arguments_digest: argumentsDigest({ amount: 120, currency: "EUR" })
        }).pipe(Effect.flip)
        assert.strictEqual(other._tag, "InvalidRequest")
        const digest = (yield* stepOf("bound")).arguments_digest!
        const step = yield* report({ status: "succeeded", arguments_digest: digest })
        assert.strictEqual(step.outcome?.arguments_digest, digest)
        // Reported again: the same step.
        assert.deepStrictEqual(yield* report({ status: "succeeded", arguments_digest: digest }), step)
      }))

    it.effect("a step approved as sent takes no digest", () =>
      Effect.gen(function*() {
        const { org, session, pending } = yield* setup()
        const approvalId = yield* pending("plain")
        yield* org.client.approvals.decide({ params: { approval_id: approvalId }, payload: { decision: "approve" } })
        const refused = yield* org.client.agentSessions.reportOutcome({
          params: { session_id: session.id, step_id: "plain" },
          payload: { status: "succeeded", arguments_digest: "0".repeat(64) }
        }).pipe(Effect.flip)
        assert.strictEqual(refused._tag, "InvalidRequest")
        const step = yield* org.client.agentSessions.reportOutcome({
          params: { session_id: session.id, step_id: "plain" },
          payload: { status: "succeeded" }
        })
        assert.strictEqual(step.outcome?.status, "succeeded")
        assert.notProperty(step, "arguments_digest")
      }))
  })
})
