/**
 * From the approvals capability's outbox to a receiver: a governed step that
 * needs a person produces `approval.requested`; a decision produces
 * `approval.approved`; both arrive signed, in order, and the receiver reads
 * the approval's current status through the API.
 */
import { assert, layer } from "@effect/vitest"
import { Effect } from "effect"
import { type ApprovalEvent, constructEvent } from "../../../packages/receiver/src/index.ts"
import { SvcTest } from "../../../src/testing.ts"
import { HttpsReceiver } from "../../support/HttpsReceiver.ts"
import { webhookService } from "./support.ts"

layer(webhookService(), { excludeTestServices: true })("approval events end to end", (it) => {
  it.effect("requested, then approved: delivered signed in order; the receiver reads the current status", () =>
    Effect.gen(function*() {
      const receiver = yield* HttpsReceiver.make()
      const org = yield* SvcTest.org()
      const { secret } = yield* org.client.notifications.create({ payload: { url: receiver.url("/e2e") } })
      yield* org.client.approvalPolicies.put({
        params: { action_class: "payments.refund" },
        payload: { mode: "require_approval", review_seconds: 600, expiring_notice_seconds: 0, timeout_action: "reject" }
      })
      const session = yield* org.client.agentSessions.create({ payload: {} })
      const answer = yield* org.client.agentSessions.governStep({
        params: { session_id: session.id },
        payload: {
          step_id: "refund-1",
          tool: "stripe.refund",
          action_class: "payments.refund",
          arguments: { amount: 5 }
        }
      })
      assert.strictEqual(answer.decision, "pending")
      const [requested] = yield* receiver.waitForRequests(1)
      const first = yield* Effect.promise(() =>
        constructEvent(requested!.body, requested!.headers["x-svc-signature"], secret, {
          expectedOrgId: org.orgId
        }) as Promise<ApprovalEvent>
      )
      assert.strictEqual(first.type, "approval.requested")
      assert.strictEqual(first.approval.approval_id, answer.approval_id)
      assert.strictEqual(first.approval.status, "pending")

      yield* org.client.approvals.decide({
        params: { approval_id: answer.approval_id! },
        payload: { decision: "approve" }
      })
      const [, decided] = yield* receiver.waitForRequests(2)
      const second = yield* Effect.promise(() =>
        constructEvent(decided!.body, decided!.headers["x-svc-signature"], secret) as Promise<ApprovalEvent>
      )
      assert.strictEqual(second.type, "approval.approved")
      assert.isString(second.approval.decided_at)
      // What a receiver does next: read the current status.
      const current = yield* org.client.approvals.get({ params: { approval_id: answer.approval_id! } })
      assert.strictEqual(current.status, "approved")
    }).pipe(Effect.scoped))
})
