/**
 * Decision reasons: `POST /v1/agent-approvals/:id/decision` takes an
 * optional `reason`; the snapshot carries it as `decision_reason`, so the
 * webhook event, the session stream's `approval:decided`, the approval read
 * and the organization's list all show it. Recognizable secrets in it are
 * replaced before it is stored.
 */
import { assert, describe, layer } from "@effect/vitest"
import { Effect } from "effect"
import { SvcTest } from "../../../src/testing.ts"
import { outboxOf } from "../../support/approvals.ts"
import { raw } from "../../support/http.ts"
import { awsSecretEndings, plantings, secretSamples, survivingWindows } from "../../support/secretSamples.ts"

const step = (step_id: string) => ({
  step_id,
  tool: "stripe.refund",
  action_class: "payments.refund",
  arguments: { amount: 42 } as any
})

const setup = Effect.gen(function*() {
  const svc = yield* SvcTest
  const org = yield* SvcTest.org()
  const session = yield* org.client.agentSessions.create({ payload: {} })
  const pending = (stepId: string) =>
    org.client.agentSessions.governStep({ params: { session_id: session.id }, payload: step(stepId) }).pipe(
      Effect.map((answer) => answer.approval_id!)
    )
  const send = (approvalId: string, body: unknown) =>
    raw(`${svc.baseUrl}/v1/agent-approvals/${approvalId}/decision`, {
      method: "POST",
      headers: { authorization: `Bearer ${org.key}`, "content-type": "application/json" },
      body: JSON.stringify(body)
    })
  const decidedEvents = svc.sql<{ data: string }>`
    SELECT data FROM session_events WHERE session_id = ${session.id} AND name = 'approval:decided' ORDER BY seq
  `.pipe(Effect.orDie, Effect.map((rows) => rows.map((row) => JSON.parse(row.data))))
  return { svc, org, session, pending, send, decidedEvents }
})

layer(SvcTest.layer(), { excludeTestServices: true })("decision reasons", (it) => {
  describe("a reason given with the decision reaches every reader of the decision", () => {
    it.effect("approve with a reason: the answer, the read, the approval.approved event, approval:decided and the list carry decision_reason", () =>
      Effect.gen(function*() {
        const { svc, org, pending, decidedEvents } = yield* setup
        const approvalId = yield* pending("with-reason")
        const reason = "Refund matches ticket #4411; customer called twice. Ünïcödé and emoji 🙂 stay."
        const decided = yield* org.client.approvals.decide({
          params: { approval_id: approvalId },
          payload: { decision: "approve", reason }
        })
        assert.strictEqual(decided.decision_reason, reason)
        assert.deepStrictEqual(Object.keys(decided).slice(-3), ["decided_at", "decided_by", "decision_reason"])
        assert.deepStrictEqual(yield* org.client.approvals.get({ params: { approval_id: approvalId } }), decided)
        const events = yield* outboxOf(svc.sql, approvalId)
        assert.deepStrictEqual(events.map((e) => e.type), ["approval.requested", "approval.approved"])
        assert.deepStrictEqual(events[1]!.json.approval, decided)
        assert.notProperty(events[0]!.json.approval, "decision_reason")
        const [streamed] = yield* decidedEvents
        assert.strictEqual(streamed.approval_id, approvalId)
        assert.strictEqual(streamed.decision_reason, reason)
        const { approvals } = yield* org.client.approvals.list({ query: { status: "approved" } })
        assert.strictEqual(approvals.find((a) => a.approval_id === approvalId)?.decision_reason, reason)
      }))

    it.effect("reject with a reason: approval.rejected carries it", () =>
      Effect.gen(function*() {
        const { svc, org, pending } = yield* setup
        const approvalId = yield* pending("reject-reason")
        const decided = yield* org.client.approvals.decide({
          params: { approval_id: approvalId },
          payload: { decision: "reject", reason: "Wrong account." }
        })
        assert.strictEqual(decided.status, "rejected")
        const events = yield* outboxOf(svc.sql, approvalId)
        assert.strictEqual(events[1]!.type, "approval.rejected")
        assert.strictEqual(events[1]!.json.approval.decision_reason, "Wrong account.")
      }))

    it.effect("without a reason there is no decision_reason key anywhere", () =>
      Effect.gen(function*() {
        const { svc, org, pending, decidedEvents } = yield* setup
        const approvalId = yield* pending("no-reason")
        const decided = yield* org.client.approvals.decide({
          params: { approval_id: approvalId },
          payload: { decision: "approve" }
        })
        assert.notProperty(decided, "decision_reason")
        assert.notProperty((yield* outboxOf(svc.sql, approvalId))[1]!.json.approval, "decision_reason")
        assert.notProperty((yield* decidedEvents)[0], "decision_reason")
      }))
  })

  describe("what a reason may be", () => {
    it.effect("1 000 characters are accepted; 1 001 are 400 INVALID_REQUEST naming reason, and nothing is decided", () =>
      Effect.gen(function*() {
        const { org, pending, send } = yield* setup
        const longest = yield* pending("longest")
        const accepted = yield* send(longest, { decision: "approve", reason: "x".repeat(1000) })
        assert.strictEqual(accepted.status, 200, accepted.text)
        assert.strictEqual(accepted.json.decision_reason.length, 1000)
        const tooLong = yield* pending("too-long")
        const refused = yield* send(tooLong, { decision: "approve", reason: "x".repeat(1001) })
        assert.strictEqual(refused.status, 400, refused.text)
        assert.strictEqual(refused.json.code, "INVALID_REQUEST")
        assert.strictEqual(refused.json.field, "reason")
        assert.strictEqual((yield* org.client.approvals.get({ params: { approval_id: tooLong } })).status, "pending")
      }))

    it.effect("a reason that cannot be stored (NUL, a lone surrogate) is 400 naming reason", () =>
      Effect.gen(function*() {
        const { org, pending, send } = yield* setup
        const approvalId = yield* pending("unstorable")
        for (const bad of ["a\u0000b", "x\ud800y"]) {
          const refused = yield* send(approvalId, { decision: "reject", reason: bad })
          assert.strictEqual(refused.status, 400, refused.text)
          assert.strictEqual(refused.json.field, "reason")
        }
        assert.strictEqual((yield* org.client.approvals.get({ params: { approval_id: approvalId } })).status, "pending")
      }))

    it.effect("recognizable secrets in a reason are replaced by [REDACTED] before anyone sees it; the rest stays", () =>
      Effect.gen(function*() {
        const { svc, org, pending, decidedEvents } = yield* setup
        // One sample of each rule (the signing-secret rule has one per secret form).
        const samples = ["@secretlint/secretlint-rule-github", "svc-api-key", "svc-signing-secret"].map((rule) =>
          secretSamples().find((s) => s.rule === rule)!
        )
        assert.strictEqual(samples.length, 3)
        const reason = `Rejected: the agent pasted ${samples.map((s) => s.secret).join(" and ")} into the arguments.`
        const approvalId = yield* pending("secret")
        const decided = yield* org.client.approvals.decide({
          params: { approval_id: approvalId },
          payload: { decision: "reject", reason }
        })
        assert.strictEqual(
          decided.decision_reason,
          "Rejected: the agent pasted [REDACTED] and [REDACTED] and [REDACTED] into the arguments."
        )
        const events = yield* outboxOf(svc.sql, approvalId)
        const [stored] = yield* svc.sql<
          { decision_reason: string }
        >`SELECT decision_reason FROM approvals WHERE id = ${approvalId}`
        const streamed = JSON.stringify(yield* decidedEvents)
        for (const sample of samples) {
          assert.notInclude(events[1]!.body, sample.secret)
          assert.notInclude(stored!.decision_reason, sample.secret)
          assert.notInclude(streamed, sample.secret)
        }
      }))

    it.effect("an AWS secret access key in its assignment forms leaves no 12 characters of itself in the reason, the event or the stream", () =>
      Effect.gen(function*() {
        const { svc, org, pending, decidedEvents } = yield* setup
        for (
          const [i, planting] of [...plantings(), ...awsSecretEndings()].filter((p) =>
            p.rule.includes("aws") && p.forms.length > 1
          ).entries()
        ) {
          const forms = planting.forms.slice(0, 6)
          const approvalId = yield* pending(`aws-${i}`)
          const reason = `Pasted by mistake: ${forms.join(" | ")}`
          const decided = yield* org.client.approvals.decide({
            params: { approval_id: approvalId },
            payload: { decision: "reject", reason }
          })
          assert.strictEqual(
            decided.decision_reason,
            `Pasted by mistake: ${forms.map((f) => f.replace(planting.secret, "[REDACTED]")).join(" | ")}`
          )
          const [stored] = yield* svc.sql<
            { decision_reason: string }
          >`SELECT decision_reason FROM approvals WHERE id = ${approvalId}`
          for (
            const text of [
              stored!.decision_reason,
              (yield* outboxOf(svc.sql, approvalId))[1]!.body,
              JSON.stringify(yield* decidedEvents)
            ]
          ) {
            assert.deepStrictEqual(survivingWindows(text, planting.secret), [])
          }
        }
      }))

    it.effect("a rejection's response has its recognizable secrets replaced before the answer, the step, the event or the stream carry it", () =>
      Effect.gen(function*() {
        const { svc, session, pending, send, decidedEvents } = yield* setup
        const planted = [...plantings(), ...awsSecretEndings()].map((p) => [p.forms[0]!, p.secret] as const)
        const approvalId = yield* pending("response-secret")
        const response = { note: "Use the billing desk instead.", pasted: planted.map(([form]) => `see ${form} here`) }
        const decided = yield* send(approvalId, { decision: "reject", response })
        assert.strictEqual(decided.status, 200, decided.text)
        assert.strictEqual(decided.json.response.note, "Use the billing desk instead.")
        const [step] = yield* svc.sql<{ response: string }>`
          SELECT response::text AS response FROM agent_steps WHERE session_id = ${session.id} AND step_id = 'response-secret'
        `
        const texts = [
          decided.text,
          step!.response,
          (yield* outboxOf(svc.sql, approvalId))[1]!.body,
          JSON.stringify(yield* decidedEvents)
        ]
        for (const [, secret] of planted) {
          for (const text of texts) assert.deepStrictEqual(survivingWindows(text, secret), [], text)
        }
      }))
  })
})
