/**
 * The session event stream (Server-Sent Events), read with
 * a real HTTP client, resumed by `Last-Event-ID` and by `after`.
 */
import { assert, describe, layer } from "@effect/vitest"
import { Effect, Stream } from "effect"
import { SvcTest, type TestOrg } from "../../../src/testing.ts"
import { raw } from "../../support/http.ts"
import { openSse, type SseEvent } from "../../support/sse.ts"

const KEEP_ALIVE_MS = 300

const step = (step_id: string, action_class: string) => ({
  step_id,
  tool: "shell.exec",
  action_class,
  arguments: { command: `echo ${step_id}` }
})

/** A session with an allow and a reject-on-timeout policy. */
const setup = (org: TestOrg) =>
  Effect.gen(function*() {
    for (const [cls, mode] of [["read", "allow"], ["write", "require_approval"]] as const) {
      yield* org.client.approvalPolicies.put({
        params: { action_class: cls },
        payload: { mode, review_seconds: 600, expiring_notice_seconds: 0, timeout_action: "reject" }
      })
    }
    return yield* org.client.agentSessions.create({ payload: {} })
  })

const streamUrl = (baseUrl: string, sessionId: string, after?: string) =>
  `${baseUrl}/v1/agent-sessions/${sessionId}/events/stream${after === undefined ? "" : `?after=${after}`}`

const summary = (events: ReadonlyArray<SseEvent>) =>
  events.map((e) => `${e.id} ${e.event} ${JSON.parse(e.data).step_id}`)

layer(SvcTest.layer({ config: { sseKeepAliveMs: KEEP_ALIVE_MS, ssePollMs: 5_000 } }), { excludeTestServices: true })(
  "session event stream",
  (it) => {
    describe("Server-Sent Events with ids, names and JSON data", () => {
      it.effect("stored events replay in order, then live events follow", () =>
        Effect.gen(function*() {
          const svc = yield* SvcTest
          const org = yield* SvcTest.org()
          const session = yield* setup(org)
          const params = { session_id: session.id }
          yield* org.client.agentSessions.governStep({ params, payload: step("ls", "read") })
          const pending = yield* org.client.agentSessions.governStep({ params, payload: step("rm", "write") })
          yield* org.client.agentSessions.reportOutcome({
            params: { ...params, step_id: "ls" },
            payload: { status: "succeeded", result: "a b" }
          })

          const sse = yield* Effect.promise(() => openSse(streamUrl(svc.baseUrl, session.id), { key: org.key }))
          try {
            assert.strictEqual(sse.status, 200)
            assert.match(sse.headers.get("content-type") ?? "", /^text\/event-stream/)
            const stored = yield* Effect.promise(() => sse.events(3))
            assert.deepStrictEqual(summary(stored), ["1 step:governed ls", "2 step:governed rm", "3 tool:succeeded ls"])
            assert.deepStrictEqual(JSON.parse(stored[0]!.data), {
              step_id: "ls",
              tool: "shell.exec",
              action_class: "read",
              arguments: { command: "echo ls" },
              decision: "allow"
            })
            assert.strictEqual(JSON.parse(stored[1]!.data).approval_id, pending.approval_id)

            const reviewer = yield* org.newKey(["approvals.decide"])
            yield* reviewer.client.approvals.decide({
              params: { approval_id: pending.approval_id! },
              payload: { decision: "approve" }
            })
            yield* org.client.agentSessions.reportOutcome({
              params: { ...params, step_id: "rm" },
              payload: { status: "failed", error: "denied" }
            })
            const live = yield* Effect.promise(() => sse.events(2))
            assert.deepStrictEqual(summary(live), ["4 approval:decided rm", "5 tool:failed rm"])
            const decided = JSON.parse(live[0]!.data)
            assert.deepStrictEqual(
              [decided.approval_id, decided.decision, decided.resolution, decided.decided_by],
              [pending.approval_id, "approved", "allow", reviewer.keyId]
            )
            assert.strictEqual(JSON.parse(live[1]!.data).error, "denied")
          } finally {
            sse.close()
          }
        }))

      it.effect("a client that reconnects with Last-Event-ID or after misses nothing and sees nothing twice", () =>
        Effect.gen(function*() {
          const svc = yield* SvcTest
          const org = yield* SvcTest.org()
          const session = yield* setup(org)
          const params = { session_id: session.id }
          const seen: Array<SseEvent> = []
          let sent = 0
          const send = (n: number) =>
            Effect.gen(function*() {
              for (let i = 0; i < n; i++) {
                yield* org.client.agentSessions.governStep({ params, payload: step(`s${++sent}`, "read") })
              }
            })

          yield* send(3)
          // First connection: read two events, leave while more arrive.
          let sse = yield* Effect.promise(() => openSse(streamUrl(svc.baseUrl, session.id), { key: org.key }))
          seen.push(...(yield* Effect.promise(() => sse.events(2))))
          sse.close()
          yield* send(2)
          // Resume by header.
          sse = yield* Effect.promise(() =>
            openSse(streamUrl(svc.baseUrl, session.id), { key: org.key, lastEventId: seen.at(-1)!.id! })
          )
          seen.push(...(yield* Effect.promise(() => sse.events(3))))
          yield* send(2)
          seen.push(...(yield* Effect.promise(() => sse.events(1))))
          sse.close()
          // Resume by query parameter.
          sse = yield* Effect.promise(() =>
            openSse(streamUrl(svc.baseUrl, session.id, seen.at(-1)!.id!), { key: org.key })
          )
          seen.push(...(yield* Effect.promise(() => sse.events(1))))
          yield* send(1)
          seen.push(...(yield* Effect.promise(() => sse.events(1))))
          sse.close()

          assert.deepStrictEqual(seen.map((e) => e.id), ["1", "2", "3", "4", "5", "6", "7", "8"])
          assert.deepStrictEqual(seen.map((e) => JSON.parse(e.data).step_id), [
            "s1",
            "s2",
            "s3",
            "s4",
            "s5",
            "s6",
            "s7",
            "s8"
          ])

          // Header over query: a browser EventSource reconnects to its first URL with the header.
          const both = yield* Effect.promise(() =>
            openSse(streamUrl(svc.baseUrl, session.id, "1"), { key: org.key, lastEventId: "7" })
          )
          const [after7] = yield* Effect.promise(() => both.events(1))
          both.close()
          assert.strictEqual(after7!.id, "8")
          // Resuming at the end: nothing is replayed, the next new event comes.
          const atEnd = yield* Effect.promise(() =>
            openSse(streamUrl(svc.baseUrl, session.id), { key: org.key, lastEventId: "8" })
          )
          yield* send(1)
          const [ninth] = yield* Effect.promise(() => atEnd.events(1))
          atEnd.close()
          assert.strictEqual(ninth!.id, "9")
        }))

      it.effect("the typed client reads the stream as decoded events with ids, resuming with after", () =>
        Effect.gen(function*() {
          const org = yield* SvcTest.org()
          const session = yield* setup(org)
          const params = { session_id: session.id }
          for (const id of ["a", "b", "c"]) {
            yield* org.client.agentSessions.governStep({ params, payload: step(id, "read") })
          }
          const stream = yield* org.client.agentSessions.stream({ params, query: { after: "1" } })
          const events = yield* Stream.runCollect(Stream.take(stream, 2))
          assert.deepStrictEqual(events.map((e) => [e.id, e.event, (e.data as { step_id: string }).step_id]), [
            ["2", "step:governed", "b"],
            ["3", "step:governed", "c"]
          ])
        }))

      it.effect("the expiry outcome is a stream event: approval:expired with the timeout action", () =>
        Effect.gen(function*() {
          const svc = yield* SvcTest
          const org = yield* SvcTest.org()
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
          const sse = yield* Effect.promise(() => openSse(streamUrl(svc.baseUrl, session.id), { key: org.key }))
          try {
            const answer = yield* org.client.agentSessions.governStep({
              params: { session_id: session.id },
              payload: step("x", "fast")
            })
            const events = yield* Effect.promise(() => sse.events(2, 15_000))
            assert.deepStrictEqual(events.map((e) => e.event), ["step:governed", "approval:expired"])
            const expired = JSON.parse(events[1]!.data)
            assert.deepStrictEqual(
              [expired.approval_id, expired.step_id, expired.timeout_action, expired.resolution],
              [answer.approval_id, "x", "reject", "reject"]
            )
          } finally {
            sse.close()
          }
        }))

      it.effect("an idle stream sends keep-alive comments", () =>
        Effect.gen(function*() {
          const svc = yield* SvcTest
          const org = yield* SvcTest.org()
          const session = yield* org.client.agentSessions.create({ payload: {} })
          const sse = yield* Effect.promise(() => openSse(streamUrl(svc.baseUrl, session.id), { key: org.key }))
          try {
            const comments: Array<string> = []
            while (comments.length < 3) {
              const frame = yield* Effect.promise(() => sse.next(10_000))
              assert.strictEqual(frame._tag, "comment")
              if (frame._tag === "comment") comments.push(frame.text)
            }
            assert.deepStrictEqual(comments, ["connected", "keep-alive", "keep-alive"])
          } finally {
            sse.close()
          }
        }))

      it.effect("errors: unknown or foreign session 404, bad Last-Event-ID or after 400, missing scope 403", () =>
        Effect.gen(function*() {
          const svc = yield* SvcTest
          const org = yield* SvcTest.org()
          const stranger = yield* SvcTest.org()
          const writer = yield* org.newKey(["agents.write"])
          const session = yield* org.client.agentSessions.create({ payload: {} })
          const get = (url: string, key: string, headers: Record<string, string> = {}) =>
            raw(url, { headers: { authorization: `Bearer ${key}`, ...headers } })
          const foreign = yield* get(streamUrl(svc.baseUrl, session.id), stranger.key)
          assert.strictEqual(foreign.status, 404)
          assert.strictEqual(foreign.json.code, "NOT_FOUND")
          const badHeader = yield* get(streamUrl(svc.baseUrl, session.id), org.key, { "last-event-id": "abc" })
          assert.strictEqual(badHeader.status, 400)
          assert.strictEqual(badHeader.json.field, "Last-Event-ID")
          const badQuery = yield* get(streamUrl(svc.baseUrl, session.id, "-1"), org.key)
          assert.strictEqual(badQuery.status, 400)
          const scope = yield* get(streamUrl(svc.baseUrl, session.id), writer.key)
          assert.strictEqual(scope.status, 403)
          assert.strictEqual(scope.json.required_scope, "agents.read")
        }))
    })
  }
)
