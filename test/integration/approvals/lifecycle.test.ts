/**
 * Policies, governed steps, the approval lifecycle and
 * its outbox events, through the typed client against the real server.
 */
import { assert, describe, layer } from "@effect/vitest"
import { Effect } from "effect"
import { SvcTest } from "../../../src/testing.ts"
import { outboxOf, outboxOfOrg } from "../../support/approvals.ts"
import { eventually, raw } from "../../support/http.ts"

const SNAPSHOT_KEYS = [
  "approval_id",
  "session_id",
  "step_id",
  "task_id",
  "status",
  "deadline_at",
  "expires_at",
  "timeout_action"
]
const DECIDED_KEYS = [...SNAPSHOT_KEYS, "decided_at", "decided_by"]

const step = (step_id: string, action_class = "payments.refund", args: unknown = { amount: 42, currency: "EUR" }) => ({
  step_id,
  tool: "stripe.refund",
  action_class,
  arguments: args as any
})

layer(SvcTest.layer(), { excludeTestServices: true })("approvals lifecycle", (it) => {
  describe("approval policies per organization and action class", () => {
    it.effect("PUT sets a policy, GET lists it; another organization does not see it", () =>
      Effect.gen(function*() {
        const org = yield* SvcTest.org()
        const other = yield* SvcTest.org()
        const put = yield* org.client.approvalPolicies.put({
          params: { action_class: "payments.refund" },
          payload: {
            mode: "require_approval",
            review_seconds: 600,
            expiring_notice_seconds: 60,
            escalation_seconds: 300,
            timeout_action: "allow"
          }
        })
        assert.strictEqual(put.action_class, "payments.refund")
        assert.strictEqual(put.escalation_seconds, 300)
        const replaced = yield* org.client.approvalPolicies.put({
          params: { action_class: "payments.refund" },
          payload: { mode: "allow", review_seconds: 60, expiring_notice_seconds: 0, timeout_action: "reject" }
        })
        assert.strictEqual(replaced.mode, "allow")
        assert.isUndefined(replaced.escalation_seconds)
        const { policies } = yield* org.client.approvalPolicies.list()
        assert.deepStrictEqual(policies.map((p) => [p.action_class, p.mode]), [["payments.refund", "allow"]])
        assert.deepStrictEqual((yield* other.client.approvalPolicies.list()).policies, [])
      }))

    it.effect("policies need org_config.write to set and org_config.read to list", () =>
      Effect.gen(function*() {
        const org = yield* SvcTest.org()
        const agent = yield* org.newKey(["agents.write", "agents.read"])
        const error = yield* agent.client.approvalPolicies.put({
          params: { action_class: "x" },
          payload: { mode: "allow", review_seconds: 60, expiring_notice_seconds: 0, timeout_action: "reject" }
        }).pipe(Effect.flip)
        assert.strictEqual(error._tag, "InsufficientScope")
        if (error._tag === "InsufficientScope") assert.strictEqual(error.required_scope, "org_config.write")
        const listError = yield* agent.client.approvalPolicies.list().pipe(Effect.flip)
        if (listError._tag === "InsufficientScope") assert.strictEqual(listError.required_scope, "org_config.read")
        else assert.fail(`expected InsufficientScope, got ${listError._tag}`)
      }))

    it.effect("an expiring notice that does not fall inside the review time is 400 naming the field (the typed client refuses it before sending)", () =>
      Effect.gen(function*() {
        const svc = yield* SvcTest
        const org = yield* SvcTest.org()
        const payload = {
          mode: "require_approval",
          review_seconds: 60,
          expiring_notice_seconds: 60,
          timeout_action: "reject"
        } as const
        const error = yield* org.client.approvalPolicies.put({ params: { action_class: "x" }, payload }).pipe(
          Effect.flip
        )
        assert.strictEqual(error._tag, "SchemaError")
        assert.include(String(error), "expiring_notice_seconds")
        const response = yield* raw(`${svc.baseUrl}/v1/approval-policies/x`, {
          method: "PUT",
          headers: { authorization: `Bearer ${org.key}`, "content-type": "application/json" },
          body: JSON.stringify(payload)
        })
        assert.strictEqual(response.status, 400)
        assert.strictEqual(response.json.code, "INVALID_REQUEST")
        assert.strictEqual(response.json.field, "expiring_notice_seconds")
      }))

    it.effect("an action class without a policy requires approval: 15 min review, reject on timeout", () =>
      Effect.gen(function*() {
        const org = yield* SvcTest.org()
        const session = yield* org.client.agentSessions.create({ payload: {} })
        const answer = yield* org.client.agentSessions.governStep({
          params: { session_id: session.id },
          payload: step("s1", "unknown.class")
        })
        assert.strictEqual(answer.decision, "pending")
        const snapshot = yield* org.client.approvals.get({ params: { approval_id: answer.approval_id! } })
        assert.strictEqual(snapshot.status, "pending")
        assert.strictEqual(snapshot.timeout_action, "reject")
        assert.strictEqual(snapshot.deadline_at, snapshot.expires_at)
        const created = new Date(session.created_at).getTime()
        const window = new Date(snapshot.expires_at).getTime() - created
        assert.isAtLeast(window, 895_000)
        assert.isAtMost(window, 905_000)
      }))
  })

  describe("sessions and governed steps", () => {
    it.effect("allow and reject policies answer at once, store the step as given, and emit no event", () =>
      Effect.gen(function*() {
        const svc = yield* SvcTest
        const org = yield* SvcTest.org()
        const task = yield* org.client.tasks.create({ payload: { name: "t", answer_schema: { type: "object" } } })
        for (const [cls, mode] of [["files.read", "allow"], ["files.delete", "reject"]] as const) {
          yield* org.client.approvalPolicies.put({
            params: { action_class: cls },
            payload: { mode, review_seconds: 60, expiring_notice_seconds: 0, timeout_action: "reject" }
          })
        }
        const session = yield* org.client.agentSessions.create({ payload: { task_id: task.id } })
        assert.strictEqual(session.task_id, task.id)
        const args = { path: "/etc/hosts", nested: { list: [1, "two", null, true] } }
        const allowed = yield* org.client.agentSessions.governStep({
          params: { session_id: session.id },
          payload: step("a", "files.read", args)
        })
        const rejected = yield* org.client.agentSessions.governStep({
          params: { session_id: session.id },
          payload: step("b", "files.delete", args)
        })
        assert.deepStrictEqual(allowed, { decision: "allow" })
        assert.deepStrictEqual(rejected, { decision: "reject" })
        const detail = yield* org.client.agentSessions.get({ params: { session_id: session.id }, query: {} })
        assert.deepStrictEqual(
          detail.steps.map((s) => [s.step_id, s.tool, s.action_class, s.arguments, s.decision, s.resolution]),
          [
            ["a", "stripe.refund", "files.read", args, "allow", "allow"],
            ["b", "stripe.refund", "files.delete", args, "reject", "reject"]
          ]
        )
        assert.deepStrictEqual(yield* outboxOfOrg(svc.sql, org.orgId), [])
      }))

    it.effect("re-sending a step_id returns the original answer, never a second approval", () =>
      Effect.gen(function*() {
        const svc = yield* SvcTest
        const org = yield* SvcTest.org()
        const session = yield* org.client.agentSessions.create({ payload: {} })
        const params = { session_id: session.id }
        const first = yield* org.client.agentSessions.governStep({ params, payload: step("once") })
        const again = yield* org.client.agentSessions.governStep({ params, payload: step("once") })
        const concurrent = yield* Effect.all(
          Array.from({ length: 4 }, () => org.client.agentSessions.governStep({ params, payload: step("twice") })),
          { concurrency: "unbounded" }
        )
        assert.strictEqual(first.decision, "pending")
        assert.deepStrictEqual(again, first)
        assert.strictEqual(new Set(concurrent.map((a) => a.approval_id)).size, 1)
        // Decided in the meantime: the re-send still answers what it first answered.
        yield* org.client.approvals.decide({
          params: { approval_id: first.approval_id! },
          payload: { decision: "approve" }
        })
        assert.deepStrictEqual(yield* org.client.agentSessions.governStep({ params, payload: step("once") }), first)
        const approvals = yield* svc.sql<
          { n: number }
        >`SELECT count(*)::int AS n FROM approvals WHERE session_id = ${session.id}`
        assert.strictEqual(approvals[0]!.n, 2)
        const requested = (yield* outboxOfOrg(svc.sql, org.orgId)).filter((e) => e.type === "approval.requested")
        assert.strictEqual(requested.length, 2)
        // The same step_id with other arguments is not a re-send: 400 naming step_id.
        const error = yield* org.client.agentSessions.governStep({
          params,
          payload: step("once", "payments.refund", { amount: 43 })
        }).pipe(Effect.flip)
        assert.strictEqual(error._tag, "InvalidRequest")
        if (error._tag === "InvalidRequest") assert.strictEqual(error.field, "step_id")
        // The same step_id in another session is another step.
        const other = yield* org.client.agentSessions.create({ payload: {} })
        const elsewhere = yield* org.client.agentSessions.governStep({
          params: { session_id: other.id },
          payload: step("once")
        })
        assert.notStrictEqual(elsewhere.approval_id, first.approval_id)
      }))

    it.effect("sessions, steps and approvals of another organization are 404; an unknown task is 404", () =>
      Effect.gen(function*() {
        const org = yield* SvcTest.org()
        const stranger = yield* SvcTest.org()
        const session = yield* org.client.agentSessions.create({ payload: {} })
        const answer = yield* org.client.agentSessions.governStep({
          params: { session_id: session.id },
          payload: step("x")
        })
        const errors = yield* Effect.all([
          stranger.client.agentSessions.get({ params: { session_id: session.id }, query: {} }).pipe(Effect.flip),
          stranger.client.agentSessions.governStep({ params: { session_id: session.id }, payload: step("y") }).pipe(
            Effect.flip
          ),
          stranger.client.approvals.get({ params: { approval_id: answer.approval_id! } }).pipe(Effect.flip),
          stranger.client.approvals.decide({
            params: { approval_id: answer.approval_id! },
            payload: { decision: "approve" }
          }).pipe(Effect.flip),
          stranger.client.agentSessions.create({ payload: { task_id: session.id } }).pipe(Effect.flip)
        ])
        assert.deepStrictEqual(errors.map((e) => e._tag), ["NotFound", "NotFound", "NotFound", "NotFound", "NotFound"])
        assert.strictEqual(
          (yield* org.client.approvals.get({ params: { approval_id: answer.approval_id! } })).status,
          "pending"
        )
      }))
  })

  describe("a person's decision, the outbox and the snapshot", () => {
    it.effect("approve: approved with decided_at and decided_by (the key id); requested then approved, once each, same snapshot", () =>
      Effect.gen(function*() {
        const svc = yield* SvcTest
        const org = yield* SvcTest.org()
        const reviewer = yield* org.newKey(["approvals.decide", "agents.read"])
        const task = yield* org.client.tasks.create({ payload: { name: "t", answer_schema: { type: "object" } } })
        const session = yield* org.client.agentSessions.create({ payload: { task_id: task.id } })
        const answer = yield* org.client.agentSessions.governStep({
          params: { session_id: session.id },
          payload: step("pay")
        })
        const approvalId = answer.approval_id!
        const pending = yield* reviewer.client.approvals.get({ params: { approval_id: approvalId } })
        assert.deepStrictEqual(Object.keys(pending), SNAPSHOT_KEYS)
        assert.deepStrictEqual(
          [pending.approval_id, pending.session_id, pending.step_id, pending.task_id, pending.status],
          [approvalId, session.id, "pay", task.id, "pending"]
        )
        const decided = yield* reviewer.client.approvals.decide({
          params: { approval_id: approvalId },
          payload: { decision: "approve" }
        })
        assert.strictEqual(decided.status, "approved")
        assert.strictEqual(decided.decided_by, reviewer.keyId)
        assert.isString(decided.decided_at)
        assert.deepStrictEqual(yield* reviewer.client.approvals.get({ params: { approval_id: approvalId } }), decided)

        const events = yield* outboxOf(svc.sql, approvalId)
        assert.deepStrictEqual(events.map((e) => e.type), ["approval.requested", "approval.approved"])
        for (const event of events) {
          assert.deepStrictEqual(Object.keys(event.json), ["id", "type", "org_id", "occurred_at", "approval"])
          assert.strictEqual(event.json.id, event.id)
          assert.strictEqual(event.json.type, event.type)
          assert.strictEqual(event.json.org_id, org.orgId)
          assert.strictEqual(event.json.occurred_at, event.occurred_at.toISOString())
        }
        assert.deepStrictEqual(events[0]!.json.approval, pending)
        assert.deepStrictEqual(Object.keys(events[1]!.json.approval), DECIDED_KEYS)
        assert.deepStrictEqual(events[1]!.json.approval, decided)
        assert.strictEqual(events[1]!.json.occurred_at, decided.decided_at)

        const detail = yield* org.client.agentSessions.get({ params: { session_id: session.id }, query: {} })
        assert.strictEqual(detail.steps[0]!.resolution, "allow")
        assert.strictEqual(detail.steps[0]!.decision, "pending")
      }))

    it.effect("reject: rejected, the step is rejected; a decision on a closed approval is 409 INVALID_TRANSITION", () =>
      Effect.gen(function*() {
        const svc = yield* SvcTest
        const org = yield* SvcTest.org()
        const session = yield* org.client.agentSessions.create({ payload: {} })
        const answer = yield* org.client.agentSessions.governStep({
          params: { session_id: session.id },
          payload: step("pay")
        })
        const params = { approval_id: answer.approval_id! }
        const decided = yield* org.client.approvals.decide({ params, payload: { decision: "reject" } })
        assert.strictEqual(decided.status, "rejected")
        assert.isNull(decided.task_id)
        for (const decision of ["approve", "reject"] as const) {
          const error = yield* org.client.approvals.decide({ params, payload: { decision } }).pipe(Effect.flip)
          assert.strictEqual(error._tag, "InvalidTransition")
          if (error._tag === "InvalidTransition") assert.strictEqual(error.status_now, "rejected")
        }
        const events = yield* outboxOf(svc.sql, params.approval_id)
        assert.deepStrictEqual(events.map((e) => e.type), ["approval.requested", "approval.rejected"])
        assert.deepStrictEqual(events[1]!.json.approval, decided)
        const detail = yield* org.client.agentSessions.get({ params: { session_id: session.id }, query: {} })
        assert.strictEqual(detail.steps[0]!.resolution, "reject")
      }))

    it.effect("two racing decisions: exactly one wins, the other is 409; one final event", () =>
      Effect.gen(function*() {
        const svc = yield* SvcTest
        const org = yield* SvcTest.org()
        const alice = yield* org.newKey(["approvals.decide"])
        const bob = yield* org.newKey(["approvals.decide"])
        const session = yield* org.client.agentSessions.create({ payload: {} })
        for (let round = 0; round < 5; round++) {
          const answer = yield* org.client.agentSessions.governStep({
            params: { session_id: session.id },
            payload: step(`race-${round}`)
          })
          const params = { approval_id: answer.approval_id! }
          const results = yield* Effect.all([
            alice.client.approvals.decide({ params, payload: { decision: "approve" } }).pipe(Effect.result),
            bob.client.approvals.decide({ params, payload: { decision: "reject" } }).pipe(Effect.result),
            alice.client.approvals.decide({ params, payload: { decision: "reject" } }).pipe(Effect.result)
          ], { concurrency: "unbounded" })
          const wins = results.filter((r) => r._tag === "Success")
          const losses = results.filter((r) => r._tag === "Failure")
          assert.strictEqual(wins.length, 1)
          for (const loss of losses) {
            if (loss._tag === "Failure") assert.strictEqual(loss.failure._tag, "InvalidTransition")
          }
          const events = yield* outboxOf(svc.sql, params.approval_id)
          assert.strictEqual(events.length, 2)
          const winner = wins[0]!
          if (winner._tag === "Success") assert.deepStrictEqual(events[1]!.json.approval, winner.success)
        }
      }))

    it.effect("deciding needs approvals.decide; reading needs agents.read; steps need agents.write", () =>
      Effect.gen(function*() {
        const org = yield* SvcTest.org()
        const agent = yield* org.newKey(["agents.write", "agents.read"])
        const session = yield* agent.client.agentSessions.create({ payload: {} })
        const answer = yield* agent.client.agentSessions.governStep({
          params: { session_id: session.id },
          payload: step("p")
        })
        const error = yield* agent.client.approvals.decide({
          params: { approval_id: answer.approval_id! },
          payload: { decision: "approve" }
        }).pipe(Effect.flip)
        assert.strictEqual(error._tag, "InsufficientScope")
        if (error._tag === "InsufficientScope") assert.strictEqual(error.required_scope, "approvals.decide")
        const reviewer = yield* org.newKey(["approvals.decide"])
        const readError = yield* reviewer.client.approvals.get({ params: { approval_id: answer.approval_id! } }).pipe(
          Effect.flip
        )
        if (readError._tag === "InsufficientScope") assert.strictEqual(readError.required_scope, "agents.read")
        else assert.fail(`expected InsufficientScope, got ${readError._tag}`)
        const stepError = yield* reviewer.client.agentSessions.governStep({
          params: { session_id: session.id },
          payload: step("q")
        }).pipe(Effect.flip)
        if (stepError._tag === "InsufficientScope") assert.strictEqual(stepError.required_scope, "agents.write")
        else assert.fail(`expected InsufficientScope, got ${stepError._tag}`)
      }))
  })

  describe("deadlines fire on time, each once", () => {
    it.effect("expiring, escalation with a new deadline, then expiry applying timeout_action allow", () =>
      Effect.gen(function*() {
        const svc = yield* SvcTest
        const org = yield* SvcTest.org()
        yield* org.client.approvalPolicies.put({
          params: { action_class: "deploy.prod" },
          payload: {
            mode: "require_approval",
            review_seconds: 2,
            expiring_notice_seconds: 1,
            escalation_seconds: 2,
            timeout_action: "allow"
          }
        })
        const session = yield* org.client.agentSessions.create({ payload: {} })
        const answer = yield* org.client.agentSessions.governStep({
          params: { session_id: session.id },
          payload: step("ship", "deploy.prod")
        })
        const approvalId = answer.approval_id!
        const requested = yield* org.client.approvals.get({ params: { approval_id: approvalId } })
        const created = new Date(session.created_at).getTime()
        const firstDeadline = new Date(requested.deadline_at).getTime()
        const expiresAt = new Date(requested.expires_at).getTime()
        assert.strictEqual(expiresAt - firstDeadline, 2000)

        const events = yield* eventually(
          Effect.map(outboxOf(svc.sql, approvalId), (rows) => rows.length >= 4 ? rows : undefined),
          { what: "four lifecycle events", timeoutMs: 20_000 }
        )
        assert.deepStrictEqual(events.map((e) => e.type), [
          "approval.requested",
          "approval.escalated",
          "approval.expiring",
          "approval.expired"
        ])
        const [, escalated, expiring, expired] = events.map((e) => e.json)
        // Never early: each fires at or after its instant.
        assert.isAtLeast(new Date(escalated.occurred_at).getTime(), firstDeadline)
        assert.isAtLeast(new Date(expiring.occurred_at).getTime(), expiresAt - 1000)
        assert.isAtLeast(new Date(expired.occurred_at).getTime(), expiresAt)
        assert.isAtLeast(firstDeadline, created)
        // Escalation keeps it pending with the new review window ending at expires_at.
        assert.strictEqual(escalated.approval.status, "pending")
        assert.strictEqual(escalated.approval.deadline_at, requested.expires_at)
        assert.strictEqual(escalated.approval.expires_at, requested.expires_at)
        assert.strictEqual(expiring.approval.status, "pending")
        assert.deepStrictEqual(Object.keys(expired.approval), SNAPSHOT_KEYS)
        assert.strictEqual(expired.approval.status, "expired")
        assert.strictEqual(expired.approval.timeout_action, "allow")
        assert.deepStrictEqual(
          yield* org.client.approvals.get({ params: { approval_id: approvalId } }),
          expired.approval
        )

        // The timeout action applies to the step and is a session event.
        const detail = yield* org.client.agentSessions.get({ params: { session_id: session.id }, query: {} })
        assert.strictEqual(detail.steps[0]!.resolution, "allow")
        const sessionEvents = yield* svc.sql<{ name: string; data: string }>`
          SELECT name, data FROM session_events WHERE session_id = ${session.id} ORDER BY seq
        `
        assert.deepStrictEqual(sessionEvents.map((e) => e.name), ["step:governed", "approval:expired"])
        assert.deepStrictEqual(JSON.parse(sessionEvents[1]!.data).timeout_action, "allow")

        const error = yield* org.client.approvals.decide({
          params: { approval_id: approvalId },
          payload: { decision: "approve" }
        }).pipe(Effect.flip)
        assert.strictEqual(error._tag, "InvalidTransition")
        // Nothing fires twice.
        assert.strictEqual((yield* outboxOf(svc.sql, approvalId)).length, 4)
      }))

    it.effect("without escalation the first deadline is the expiry; timeout_action reject rejects the step", () =>
      Effect.gen(function*() {
        const svc = yield* SvcTest
        const org = yield* SvcTest.org()
        yield* org.client.approvalPolicies.put({
          params: { action_class: "db.drop" },
          payload: { mode: "require_approval", review_seconds: 1, expiring_notice_seconds: 0, timeout_action: "reject" }
        })
        const session = yield* org.client.agentSessions.create({ payload: {} })
        const answer = yield* org.client.agentSessions.governStep({
          params: { session_id: session.id },
          payload: step("drop", "db.drop")
        })
        const snapshot = yield* eventually(
          Effect.map(
            org.client.approvals.get({ params: { approval_id: answer.approval_id! } }),
            (s) => s.status === "expired" ? s : undefined
          ),
          { what: "expiry" }
        )
        assert.strictEqual(snapshot.deadline_at, snapshot.expires_at)
        const events = yield* outboxOf(svc.sql, answer.approval_id!)
        assert.deepStrictEqual(events.map((e) => e.type), ["approval.requested", "approval.expired"])
        const detail = yield* org.client.agentSessions.get({ params: { session_id: session.id }, query: {} })
        assert.strictEqual(detail.steps[0]!.resolution, "reject")
      }))

    it.effect("a decision after the final deadline, before the scheduler got to it, is 409: the approval expires with its timeout action", () =>
      Effect.gen(function*() {
        const svc = yield* SvcTest
        const org = yield* SvcTest.org()
        yield* org.client.approvalPolicies.put({
          params: { action_class: "late" },
          payload: {
            mode: "require_approval",
            review_seconds: 600,
            expiring_notice_seconds: 60,
            escalation_seconds: 60,
            timeout_action: "allow"
          }
        })
        const session = yield* org.client.agentSessions.create({ payload: {} })
        const answer = yield* org.client.agentSessions.governStep({
          params: { session_id: session.id },
          payload: step("late", "late")
        })
        const approvalId = answer.approval_id!
        // Every deadline lapsed, but the scheduler has not fired them yet
        // (a process that was down, or busy): its next due instant is still ahead.
        yield* svc.sql`
          UPDATE approvals SET deadline_at = now() - interval '2 minutes', expires_at = now() - interval '1 minute',
            expiring_at = now() - interval '2 minutes', next_due_at = now() + interval '1 hour'
          WHERE id = ${approvalId}`
        const error = yield* org.client.approvals.decide({
          params: { approval_id: approvalId },
          payload: { decision: "reject" }
        }).pipe(Effect.flip)
        assert.strictEqual(error._tag, "InvalidTransition")
        if (error._tag === "InvalidTransition") assert.strictEqual(error.status_now, "expired")
        const snapshot = yield* org.client.approvals.get({ params: { approval_id: approvalId } })
        assert.strictEqual(snapshot.status, "expired")
        assert.isUndefined(snapshot.decided_by)
        const events = yield* outboxOf(svc.sql, approvalId)
        assert.deepStrictEqual(events.map((e) => e.type), [
          "approval.requested",
          "approval.expiring",
          "approval.escalated",
          "approval.expired"
        ])
        assert.deepStrictEqual(events[3]!.json.approval, snapshot)
        const detail = yield* org.client.agentSessions.get({ params: { session_id: session.id }, query: {} })
        assert.strictEqual(detail.steps[0]!.resolution, "allow")
        const sessionEvents = yield* svc.sql<
          { name: string }
        >`SELECT name FROM session_events WHERE session_id = ${session.id} ORDER BY seq`
        assert.deepStrictEqual(sessionEvents.map((e) => e.name), ["step:governed", "approval:expired"])
      }))

    it.effect("a decided approval's deadlines never fire", () =>
      Effect.gen(function*() {
        const svc = yield* SvcTest
        const org = yield* SvcTest.org()
        yield* org.client.approvalPolicies.put({
          params: { action_class: "quick" },
          payload: { mode: "require_approval", review_seconds: 1, expiring_notice_seconds: 0, timeout_action: "allow" }
        })
        const session = yield* org.client.agentSessions.create({ payload: {} })
        const early = yield* org.client.agentSessions.governStep({
          params: { session_id: session.id },
          payload: step("early", "quick")
        })
        yield* org.client.approvals.decide({
          params: { approval_id: early.approval_id! },
          payload: { decision: "reject" }
        })
        // A later approval of the same window expiring shows the scheduler ran past the first one's deadline.
        const later = yield* org.client.agentSessions.governStep({
          params: { session_id: session.id },
          payload: step("later", "quick")
        })
        yield* eventually(
          Effect.map(org.client.approvals.get({ params: { approval_id: later.approval_id! } }), (s) =>
            s.status === "expired" ? s : undefined),
          { what: "the later approval's expiry" }
        )
        assert.deepStrictEqual(
          (yield* outboxOf(svc.sql, early.approval_id!)).map((e) =>
            e.type
          ),
          ["approval.requested", "approval.rejected"]
        )
      }))
  })

  describe("tool outcomes", () => {
    it.effect("an allowed step takes one outcome; a pending or rejected step has none (409)", () =>
      Effect.gen(function*() {
        const org = yield* SvcTest.org()
        yield* org.client.approvalPolicies.put({
          params: { action_class: "files.read" },
          payload: { mode: "allow", review_seconds: 60, expiring_notice_seconds: 0, timeout_action: "reject" }
        })
        const session = yield* org.client.agentSessions.create({ payload: {} })
        const params = { session_id: session.id }
        yield* org.client.agentSessions.governStep({ params, payload: step("read", "files.read") })
        yield* org.client.agentSessions.governStep({ params, payload: step("wait") })
        const done = yield* org.client.agentSessions.reportOutcome({
          params: { ...params, step_id: "read" },
          payload: { status: "succeeded", result: { bytes: 12 } }
        })
        assert.deepStrictEqual(done.outcome && [done.outcome.status, done.outcome.result], ["succeeded", { bytes: 12 }])
        const again = yield* org.client.agentSessions.reportOutcome({
          params: { ...params, step_id: "read" },
          payload: { status: "succeeded" }
        })
        assert.deepStrictEqual(again, done)
        const changed = yield* org.client.agentSessions.reportOutcome({
          params: { ...params, step_id: "read" },
          payload: { status: "failed" }
        }).pipe(Effect.flip)
        assert.strictEqual(changed._tag, "InvalidTransition")
        const pending = yield* org.client.agentSessions.reportOutcome({
          params: { ...params, step_id: "wait" },
          payload: { status: "failed" }
        }).pipe(Effect.flip)
        assert.strictEqual(pending._tag, "InvalidTransition")
        const missing = yield* org.client.agentSessions.reportOutcome({
          params: { ...params, step_id: "nope" },
          payload: { status: "failed" }
        }).pipe(Effect.flip)
        assert.strictEqual(missing._tag, "NotFound")
      }))
  })
})
