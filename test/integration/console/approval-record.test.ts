/**
 * What the approvals list, its stream, an approval's context and the
 * history tell a person beyond the snapshot: the escalation chain the
 * approval was requested with (so the groups still to come can be shown),
 * and the names of the API keys that decided or voted, so a decider reads
 * as "bob" and not as a key id.
 */
import { assert, describe, layer } from "@effect/vitest"
import { Effect } from "effect"
import { SvcTest, type TestOrg } from "../../../src/testing.ts"
import { openSse } from "../../support/sse.ts"

const governed = (org: TestOrg, sessionId: string, stepId: string, actionClass: string) =>
  org.client.agentSessions.governStep({
    params: { session_id: sessionId },
    payload: { step_id: stepId, tool: "stripe.refunds.create", action_class: actionClass, arguments: { amount: 1200 } }
  })

/** An API key made through the API by `maker` (whose person it then is), with a name (or none). */
const keyNamed = (maker: TestOrg["client"], name: string | undefined) =>
  Effect.gen(function*() {
    const svc = yield* SvcTest
    const made = yield* maker.apiKeys.create({
      payload: { ...(name === undefined ? {} : { name }), scopes: ["approvals.decide", "agents.read"] }
    })
    return { id: made.api_key.id, client: yield* svc.client(made.key) }
  })

layer(SvcTest.layer(), { excludeTestServices: true })("the approval record a person reads", (it) => {
  describe("the escalation chain", () => {
    it.effect("list, stream, context and history carry the chain the approval was requested with; none without one", () =>
      Effect.gen(function*() {
        const svc = yield* SvcTest
        const org = yield* SvcTest.org()
        for (const name of ["leads", "finance", "cfo"]) {
          yield* org.client.reviewers.putGroup({ params: { name }, payload: { members: [{ key_id: org.keyId }] } })
        }
        yield* org.client.approvalPolicies.put({
          params: { action_class: "payments.refund" },
          payload: {
            mode: "require_approval",
            review_seconds: 600,
            expiring_notice_seconds: 0,
            escalation_seconds: 600,
            timeout_action: "reject",
            group: "leads",
            escalation_chain: ["finance", "cfo"]
          }
        })
        yield* org.client.approvalPolicies.put({
          params: { action_class: "plain" },
          payload: {
            mode: "require_approval",
            review_seconds: 600,
            expiring_notice_seconds: 0,
            timeout_action: "reject"
          }
        })
        const session = yield* org.client.agentSessions.create({ payload: {} })
        const sse = yield* Effect.promise(() =>
          openSse(`${svc.baseUrl}/v1/agent-approvals/events/stream`, { key: org.key })
        )
        try {
          const chained = yield* governed(org, session.id, "chained", "payments.refund")
          const [requested] = yield* Effect.promise(() => sse.events(1))
          const streamed = JSON.parse(requested!.data)
          assert.deepStrictEqual([streamed.approval_id, streamed.escalation_chain], [chained.approval_id, [
            "finance",
            "cfo"
          ]])
          const plain = yield* governed(org, session.id, "plain", "plain")

          const listed = (yield* org.client.approvals.list({ query: { status: "pending" } })).approvals
          assert.deepStrictEqual(listed.map((a) => [a.approval_id, a.escalation_chain]), [
            [chained.approval_id, ["finance", "cfo"]],
            [plain.approval_id, undefined]
          ])
          assert.deepStrictEqual(listed[0], streamed, "the stream's item is the list's")
          const context = yield* org.client.approvals.context({ params: { approval_id: chained.approval_id! } })
          assert.deepStrictEqual(context.approval.escalation_chain, ["finance", "cfo"])

          yield* org.client.approvals.decide({
            params: { approval_id: chained.approval_id! },
            payload: { decision: "reject" }
          })
          const history = (yield* org.client.approvals.history({ query: {} })).approvals
          assert.deepStrictEqual(history.map((a) => [a.approval_id, a.escalation_chain, a.escalation_level]), [
            [chained.approval_id, ["finance", "cfo"], 0]
          ])
        } finally {
          sse.close()
        }
      }))
  })

  describe("the names of the keys that decided", () => {
    it.effect("a named key's id is named in key_names, for the decider and every voter; an unnamed key is not", () =>
      Effect.gen(function*() {
        const svc = yield* SvcTest
        const org = yield* SvcTest.org()
        yield* org.client.approvalPolicies.put({
          params: { action_class: "two" },
          payload: {
            mode: "require_approval",
            review_seconds: 600,
            expiring_notice_seconds: 0,
            timeout_action: "reject",
            quorum: 2
          }
        })
        yield* org.client.approvalPolicies.put({
          params: { action_class: "one" },
          payload: {
            mode: "require_approval",
            review_seconds: 600,
            expiring_notice_seconds: 0,
            timeout_action: "reject"
          }
        })
        // Keys made by different keys are different people (a key is its maker's): each votes once.
        const makers = yield* Effect.all(
          [0, 1].map(() => org.newKey(["keys.manage", "approvals.decide", "agents.read"]))
        )
        const bob = yield* keyNamed(makers[0]!.client, "bob")
        const carol = yield* keyNamed(makers[1]!.client, "carol")
        const unnamed = yield* keyNamed(org.client, undefined)
        const session = yield* org.client.agentSessions.create({ payload: {} })
        const single = yield* governed(org, session.id, "single", "one")
        const quorum = yield* governed(org, session.id, "quorum", "two")
        const untouched = yield* governed(org, session.id, "untouched", "one")
        const anonymous = yield* governed(org, session.id, "anonymous", "one")

        const sse = yield* Effect.promise(() =>
          openSse(`${svc.baseUrl}/v1/agent-approvals/events/stream`, { key: org.key })
        )
        try {
          yield* bob.client.approvals.decide({
            params: { approval_id: single.approval_id! },
            payload: { decision: "approve" }
          })
          yield* carol.client.approvals.decide({
            params: { approval_id: quorum.approval_id! },
            payload: { decision: "approve" }
          })
          const voted = (yield* org.client.approvals.list({ query: { status: "pending" } })).approvals.find((a) =>
            a.approval_id === quorum.approval_id
          )!
          assert.deepStrictEqual(voted.key_names, { [carol.id]: "carol" })
          yield* bob.client.approvals.decide({
            params: { approval_id: quorum.approval_id! },
            payload: { decision: "approve" }
          })
          yield* unnamed.client.approvals.decide({
            params: { approval_id: anonymous.approval_id! },
            payload: { decision: "reject" }
          })

          const history = new Map(
            (yield* org.client.approvals.history({ query: {} })).approvals.map((a) => [a.approval_id, a])
          )
          assert.deepStrictEqual(history.get(single.approval_id!)!.key_names, { [bob.id]: "bob" })
          assert.deepStrictEqual(history.get(quorum.approval_id!)!.key_names, { [bob.id]: "bob", [carol.id]: "carol" })
          assert.strictEqual(history.get(anonymous.approval_id!)!.key_names, undefined)
          const pending = (yield* org.client.approvals.list({ query: { status: "pending" } })).approvals
          assert.deepStrictEqual(pending.map((a) => [a.approval_id, a.key_names]), [[untouched.approval_id, undefined]])

          // The stream's closing events carry the names too (after the four requests it replays).
          const events = yield* Effect.promise(() => sse.events(7))
          const closed = events.map((e) => JSON.parse(e.data)).filter((data) => data.status !== "pending")
          assert.deepStrictEqual(closed.map((data) => [data.approval_id, data.key_names]), [
            [single.approval_id, { [bob.id]: "bob" }],
            [quorum.approval_id, { [bob.id]: "bob", [carol.id]: "carol" }],
            [anonymous.approval_id, undefined]
          ])
        } finally {
          sse.close()
        }
      }))
  })
})
