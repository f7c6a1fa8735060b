/**
 * The organization's approvals by status, and its
 * resumable stream of approval changes, read with a real SSE client.
 */
import { assert, describe, layer } from "@effect/vitest"
import { Effect } from "effect"
import { SvcTest, type TestOrg } from "../../../src/testing.ts"
import { raw } from "../../support/http.ts"
import { openSse } from "../../support/sse.ts"

const KEEP_ALIVE_MS = 300

const governed = (org: TestOrg, sessionId: string, stepId: string, actionClass = "payments.refund") =>
  org.client.agentSessions.governStep({
    params: { session_id: sessionId },
    payload: {
      step_id: stepId,
      tool: "stripe.refunds.create",
      action_class: actionClass,
      arguments: { charge: stepId, amount: 1200 }
    }
  })

const streamUrl = (baseUrl: string, after?: string) =>
  `${baseUrl}/v1/agent-approvals/events/stream${after === undefined ? "" : `?after=${after}`}`

layer(SvcTest.layer({ config: { sseKeepAliveMs: KEEP_ALIVE_MS, ssePollMs: 5_000 } }), { excludeTestServices: true })(
  "approvals list and stream",
  (it) => {
    describe("the list of approvals by status", () => {
      it.effect("pending approvals, oldest first, with tool, action class, arguments, deadlines, escalation and timeout action", () =>
        Effect.gen(function*() {
          const org = yield* SvcTest.org()
          yield* org.client.approvalPolicies.put({
            params: { action_class: "payments.refund" },
            payload: {
              mode: "require_approval",
              review_seconds: 600,
              expiring_notice_seconds: 0,
              escalation_seconds: 600,
              timeout_action: "allow"
            }
          })
          const session = yield* org.client.agentSessions.create({ payload: {} })
          const first = yield* governed(org, session.id, "a")
          const second = yield* governed(org, session.id, "b", "db.drop")
          const third = yield* governed(org, session.id, "c")
          yield* org.client.approvals.decide({
            params: { approval_id: second.approval_id! },
            payload: { decision: "reject" }
          })

          const pending = yield* org.client.approvals.list({ query: { status: "pending" } })
          assert.deepStrictEqual(pending.approvals.map((a) => a.approval_id), [first.approval_id, third.approval_id])
          const item = pending.approvals[0]!
          assert.include(item, {
            tool: "stripe.refunds.create",
            action_class: "payments.refund",
            status: "pending",
            escalation: "pending",
            timeout_action: "allow",
            session_id: session.id,
            step_id: "a"
          })
          assert.deepStrictEqual(item.arguments, { charge: "a", amount: 1200 })
          assert.isString(item.deadline_at)
          assert.isString(item.expires_at)

          const rejected = yield* org.client.approvals.list({ query: { status: "rejected" } })
          assert.deepStrictEqual(rejected.approvals.map((a) => [a.approval_id, a.escalation, a.timeout_action]), [
            [second.approval_id, "none", "reject"]
          ])

          // Pages: keyset, no repeats, no gaps.
          const page1 = yield* org.client.approvals.list({ query: { limit: 2 } })
          assert.lengthOf(page1.approvals, 2)
          assert.isString(page1.next_cursor)
          const page2 = yield* org.client.approvals.list({ query: { limit: 2, cursor: page1.next_cursor! } })
          assert.deepStrictEqual([...page1.approvals, ...page2.approvals].map((a) => a.approval_id), [
            first.approval_id,
            second.approval_id,
            third.approval_id
          ])
          assert.isNull(page2.next_cursor)

          // Another organization sees none of them.
          const other = yield* SvcTest.org()
          assert.lengthOf((yield* other.client.approvals.list({ query: {} })).approvals, 0)
        }))

      it.effect("a cursor we did not issue is 400 naming the cursor", () =>
        Effect.gen(function*() {
          const svc = yield* SvcTest
          const org = yield* SvcTest.org()
          const response = yield* raw(`${svc.baseUrl}/v1/agent-approvals?cursor=nonsense`, {
            headers: { authorization: `Bearer ${org.key}` }
          })
          assert.strictEqual(response.status, 400)
          assert.strictEqual(response.json.field, "cursor")
        }))
    })

    describe("the organization's stream of approval changes", () => {
      it.effect("requested, decided and expired changes arrive live with ids; Last-Event-ID resumes exactly after", () =>
        Effect.gen(function*() {
          const svc = yield* SvcTest
          const org = yield* SvcTest.org()
          const other = yield* SvcTest.org()
          yield* org.client.approvalPolicies.put({
            params: { action_class: "fast" },
            payload: {
              mode: "require_approval",
              review_seconds: 1,
              expiring_notice_seconds: 0,
              timeout_action: "reject"
            }
          })
          const session = yield* org.client.agentSessions.create({ payload: {} })
          const otherSession = yield* other.client.agentSessions.create({ payload: {} })
          const sse = yield* Effect.promise(() => openSse(streamUrl(svc.baseUrl), { key: org.key }))
          let ids: Array<string> = []
          try {
            assert.strictEqual(sse.status, 200)
            assert.match(sse.headers.get("content-type") ?? "", /^text\/event-stream/)
            const requested = yield* governed(org, session.id, "r1")
            yield* governed(other, otherSession.id, "theirs")
            const [first] = yield* Effect.promise(() => sse.events(1))
            assert.match(first!.id!, /^\d+$/)
            assert.strictEqual(first!.event, "approval.requested")
            const data = JSON.parse(first!.data)
            assert.include(data, {
              approval_id: requested.approval_id,
              status: "pending",
              tool: "stripe.refunds.create"
            })
            assert.deepStrictEqual(data.arguments, { charge: "r1", amount: 1200 })

            yield* org.client.approvals.decide({
              params: { approval_id: requested.approval_id! },
              payload: { decision: "approve" }
            })
            const [second] = yield* Effect.promise(() => sse.events(1))
            assert.isTrue(BigInt(second!.id!) > BigInt(first!.id!), "ids grow")
            assert.strictEqual(second!.event, "approval.approved")
            assert.strictEqual(JSON.parse(second!.data).status, "approved")

            const fast = yield* governed(org, session.id, "f1", "fast")
            const [third, fourth] = yield* Effect.promise(() => sse.events(2, 15_000))
            assert.deepStrictEqual([third!.event, fourth!.event], ["approval.requested", "approval.expired"])
            assert.strictEqual(JSON.parse(fourth!.data).approval_id, fast.approval_id)
            assert.isTrue(
              BigInt(third!.id!) > BigInt(second!.id!) && BigInt(fourth!.id!) > BigInt(third!.id!),
              "ids grow"
            )
            ids = [first!.id!, second!.id!, third!.id!, fourth!.id!]
          } finally {
            sse.close()
          }

          // Resume: exactly the events after the given id.
          const resumed = yield* Effect.promise(() =>
            openSse(streamUrl(svc.baseUrl), { key: org.key, lastEventId: ids[1]! })
          )
          try {
            const events = yield* Effect.promise(() => resumed.events(2))
            assert.deepStrictEqual(events.map((e) => `${e.id} ${e.event}`), [
              `${ids[2]} approval.requested`,
              `${ids[3]} approval.expired`
            ])
          } finally {
            resumed.close()
          }
          const viaQuery = yield* Effect.promise(() => openSse(streamUrl(svc.baseUrl, ids[2]!), { key: org.key }))
          try {
            const [only] = yield* Effect.promise(() => viaQuery.events(1))
            assert.strictEqual(only!.id, ids[3])
          } finally {
            viaQuery.close()
          }
        }))

      it.effect("the stream needs agents.read", () =>
        Effect.gen(function*() {
          const svc = yield* SvcTest
          const org = yield* SvcTest.org()
          const reviewer = yield* org.newKey(["feedback.read"])
          const response = yield* raw(streamUrl(svc.baseUrl), { headers: { authorization: `Bearer ${reviewer.key}` } })
          assert.strictEqual(response.status, 403)
          assert.strictEqual(response.json.required_scope, "agents.read")
          // The route does not shadow a single approval's.
          const missing = yield* raw(`${svc.baseUrl}/v1/agent-approvals/0193a0a0-0000-7000-8000-0000000000a1`, {
            headers: { authorization: `Bearer ${org.key}` }
          })
          assert.strictEqual(missing.status, 404)
        }))
    })
  }
)
