/**
 * What a person needs to decide: an approval's context (the task's name,
 * the session's earlier steps) and the history of closed approvals with who
 * decided, when and why.
 */
import { assert, describe, layer } from "@effect/vitest"
import { Effect } from "effect"
import { SvcTest } from "../../../src/testing.ts"
import { eventually } from "../../support/http.ts"

const governed = (step_id: string, tool = "stripe.refund", action_class = "payments.refund") => ({
  step_id,
  tool,
  action_class,
  arguments: { n: step_id } as any
})

layer(SvcTest.layer(), { excludeTestServices: true })("approval context and history", (it) => {
  describe("context", () => {
    it.effect("names the session's task and lists the steps before this one, oldest first, with resolution and outcome", () =>
      Effect.gen(function*() {
        const org = yield* SvcTest.org()
        yield* org.client.approvalPolicies.put({
          params: { action_class: "crm.read" },
          payload: { mode: "allow", review_seconds: 60, expiring_notice_seconds: 0, timeout_action: "reject" }
        })
        const task = yield* org.client.tasks.create({
          payload: { name: "Support refunds", answer_schema: { type: "object" } }
        })
        const session = yield* org.client.agentSessions.create({ payload: { task_id: task.id } })
        const params = { session_id: session.id }
        yield* org.client.agentSessions.governStep({ params, payload: governed("lookup", "crm.lookup", "crm.read") })
        yield* org.client.agentSessions.reportOutcome({
          params: { ...params, step_id: "lookup" },
          payload: { status: "succeeded" }
        })
        const first = yield* org.client.agentSessions.governStep({ params, payload: governed("refund-1") })
        yield* org.client.approvals.decide({
          params: { approval_id: first.approval_id! },
          payload: { decision: "reject" }
        })
        const second = yield* org.client.agentSessions.governStep({ params, payload: governed("refund-2") })
        // A later step is not "earlier".
        yield* org.client.agentSessions.governStep({ params, payload: governed("later", "crm.lookup", "crm.read") })

        const context = yield* org.client.approvals.context({ params: { approval_id: second.approval_id! } })
        assert.strictEqual(context.approval.approval_id, second.approval_id)
        assert.strictEqual(context.approval.tool, "stripe.refund")
        assert.strictEqual(context.task_name, "Support refunds")
        assert.deepStrictEqual(
          context.earlier_steps.map((s) => [s.step_id, s.tool, s.resolution, s.outcome]),
          [["lookup", "crm.lookup", "allow", "succeeded"], ["refund-1", "stripe.refund", "reject", undefined]]
        )
        assert.strictEqual(context.earlier_steps_total, 2)
        const firstContext = yield* org.client.approvals.context({ params: { approval_id: first.approval_id! } })
        assert.deepStrictEqual(firstContext.earlier_steps.map((s) => s.step_id), ["lookup"])
      }))

    it.effect("at most 20 earlier steps, the latest ones; the total counts all; no task is null; another organization's approval is 404", () =>
      Effect.gen(function*() {
        const org = yield* SvcTest.org()
        const other = yield* SvcTest.org()
        yield* org.client.approvalPolicies.put({
          params: { action_class: "crm.read" },
          payload: { mode: "allow", review_seconds: 60, expiring_notice_seconds: 0, timeout_action: "reject" }
        })
        const session = yield* org.client.agentSessions.create({ payload: {} })
        const params = { session_id: session.id }
        for (let i = 0; i < 23; i++) {
          yield* org.client.agentSessions.governStep({ params, payload: governed(`s${i}`, "crm.lookup", "crm.read") })
        }
        const pending = yield* org.client.agentSessions.governStep({ params, payload: governed("refund") })
        const context = yield* org.client.approvals.context({ params: { approval_id: pending.approval_id! } })
        assert.isNull(context.task_name)
        assert.strictEqual(context.earlier_steps_total, 23)
        assert.deepStrictEqual(
          context.earlier_steps.map((s) => s.step_id),
          Array.from({ length: 20 }, (_, i) => `s${i + 3}`)
        )
        const error = yield* other.client.approvals.context({ params: { approval_id: pending.approval_id! } }).pipe(
          Effect.flip
        )
        assert.strictEqual(error._tag, "NotFound")
      }))
  })

  describe("history", () => {
    it.effect("closed approvals only, latest first, with who, when and why and the task's name; pages by cursor", () =>
      Effect.gen(function*() {
        const org = yield* SvcTest.org()
        const reviewer = yield* org.newKey(["approvals.decide", "agents.read"])
        const task = yield* org.client.tasks.create({ payload: { name: "Payouts", answer_schema: { type: "object" } } })
        const session = yield* org.client.agentSessions.create({ payload: { task_id: task.id } })
        const params = { session_id: session.id }
        const ids: Array<string> = []
        for (let i = 0; i < 3; i++) {
          ids.push((yield* org.client.agentSessions.governStep({ params, payload: governed(`p${i}`) })).approval_id!)
        }
        const stillPending = (yield* org.client.agentSessions.governStep({ params, payload: governed("open") }))
          .approval_id!
        yield* reviewer.client.approvals.decide({
          params: { approval_id: ids[0]! },
          payload: { decision: "approve", reason: "Known payee." }
        })
        yield* reviewer.client.approvals.decide({ params: { approval_id: ids[1]! }, payload: { decision: "reject" } })
        yield* reviewer.client.approvals.decide({
          params: { approval_id: ids[2]! },
          payload: { decision: "reject", reason: "Duplicate." }
        })

        const firstPage = yield* reviewer.client.approvals.history({ query: { limit: 2 } })
        assert.deepStrictEqual(firstPage.approvals.map((a) => a.approval_id), [ids[2], ids[1]])
        assert.isString(firstPage.next_cursor)
        const secondPage = yield* reviewer.client.approvals.history({
          query: { limit: 2, cursor: firstPage.next_cursor! }
        })
        assert.deepStrictEqual(secondPage.approvals.map((a) => a.approval_id), [ids[0]])
        assert.isNull(secondPage.next_cursor)
        const all = [...firstPage.approvals, ...secondPage.approvals]
        assert.notInclude(all.map((a) => a.approval_id), stillPending)
        const approved = secondPage.approvals[0]!
        assert.strictEqual(approved.status, "approved")
        assert.strictEqual(approved.decided_by, reviewer.keyId)
        assert.isString(approved.decided_at)
        assert.strictEqual(approved.decision_reason, "Known payee.")
        assert.strictEqual(approved.task_name, "Payouts")
        assert.strictEqual(approved.tool, "stripe.refund")
        assert.strictEqual(firstPage.approvals[0]!.decision_reason, "Duplicate.")
        assert.notProperty(firstPage.approvals[1]!, "decision_reason")
        // A cursor of another list is refused.
        const error = yield* reviewer.client.approvals.history({ query: { cursor: "MQ.AAAAAAAAAAAAAAAAAAAAAA" } }).pipe(
          Effect.flip
        )
        assert.strictEqual(error._tag, "InvalidRequest")
      }))

    it.effect("expired approvals are in the history with their timeout action and no decider", () =>
      Effect.gen(function*() {
        const svc = yield* SvcTest
        const org = yield* SvcTest.org()
        yield* org.client.approvalPolicies.put({
          params: { action_class: "quick" },
          payload: { mode: "require_approval", review_seconds: 1, expiring_notice_seconds: 0, timeout_action: "allow" }
        })
        const session = yield* org.client.agentSessions.create({ payload: {} })
        const answer = yield* org.client.agentSessions.governStep({
          params: { session_id: session.id },
          payload: governed("q", "x", "quick")
        })
        // Move its deadline into the past; the scheduler closes it.
        yield* svc
          .sql`UPDATE approvals SET deadline_at = now() - interval '1 second', expires_at = now() - interval '1 second', next_due_at = now() - interval '1 second' WHERE id = ${answer
          .approval_id!}`
        const found = yield* eventually(
          Effect.map(
            org.client.approvals.history({ query: {} }),
            ({ approvals }) => approvals.find((a) => a.approval_id === answer.approval_id)
          ),
          { what: "the approval to expire" }
        )
        assert.strictEqual(found.status, "expired")
        assert.strictEqual(found.timeout_action, "allow")
        assert.notProperty(found, "decided_by")
      }))
  })
})
