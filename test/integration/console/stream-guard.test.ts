/**
 * An open event stream ends soon after its API key or
 * console session is revoked, and open streams are capped per key (or
 * session), per organization and per process, with a 429 naming the limit.
 * Both the per-session agent streams and the organization's approval stream.
 */
import { assert, describe, layer } from "@effect/vitest"
import { Effect } from "effect"
import { SvcTest } from "../../../src/testing.ts"
import { consoleSession, consoleTestLayer } from "../../support/console.ts"
import { raw } from "../../support/http.ts"
import { openSse, type SseConnection } from "../../support/sse.ts"

const RECHECK_MS = 200

/** Reads frames until the stream ends; fails if it is still open after `withinMs`. */
const endsWithin = (sse: SseConnection, withinMs: number) =>
  Effect.promise(async () => {
    const deadline = Date.now() + withinMs
    for (;;) {
      const remaining = deadline - Date.now()
      if (remaining <= 0) return false
      try {
        await sse.next(remaining)
      } catch (error) {
        return (error as Error).message === "SSE stream ended"
      }
    }
  })

const approvalStream = (baseUrl: string) => `${baseUrl}/v1/agent-approvals/events/stream`

layer(
  consoleTestLayer({
    config: {
      sseKeepAliveMs: 100,
      ssePollMs: 5_000,
      streamAuthRecheckMs: RECHECK_MS,
      maxStreamsPerKey: 2,
      maxStreamsPerOrg: 3,
      maxStreams: 5
    }
  }),
  { excludeTestServices: true }
)("stream guard", (it) => {
  describe("revocation ends open streams", () => {
    it.effect("revoking an API key ends its session stream and its approval stream within the re-check period", () =>
      Effect.gen(function*() {
        const svc = yield* SvcTest
        const org = yield* SvcTest.org()
        const reader = yield* org.newKey(["agents.read"])
        const session = yield* org.client.agentSessions.create({ payload: {} })
        const sessionSse = yield* Effect.promise(() =>
          openSse(`${svc.baseUrl}/v1/agent-sessions/${session.id}/events/stream`, { key: reader.key })
        )
        const orgSse = yield* Effect.promise(() => openSse(approvalStream(svc.baseUrl), { key: reader.key }))
        try {
          assert.strictEqual(sessionSse.status, 200)
          assert.strictEqual(orgSse.status, 200)
          // Still open well past a re-check while the key is valid.
          assert.isFalse(yield* endsWithin(orgSse, RECHECK_MS * 3))
          const revoked = yield* raw(`${svc.baseUrl}/v1/api-keys/${reader.keyId}`, {
            method: "DELETE",
            headers: { authorization: `Bearer ${org.key}` }
          })
          assert.strictEqual(revoked.status, 200)
          assert.isString(revoked.json.revoked_at)
          assert.isTrue(yield* endsWithin(sessionSse, 5_000), "the session stream ended")
          assert.isTrue(yield* endsWithin(orgSse, 5_000), "the approval stream ended")
        } finally {
          sessionSse.close()
          orgSse.close()
        }
      }))

    it.effect("revoking a console session ends its stream", () =>
      Effect.gen(function*() {
        const svc = yield* SvcTest
        const org = yield* SvcTest.org()
        const { cookie, session } = yield* consoleSession(svc.baseUrl, org.orgId, "approver")
        const sse = yield* Effect.promise(() => openSse(approvalStream(svc.baseUrl), { cookie }))
        try {
          assert.strictEqual(sse.status, 200)
          assert.isFalse(yield* endsWithin(sse, RECHECK_MS * 3))
          yield* org.client.console.revokeSession({ params: { session_id: session.session_id } })
          assert.isTrue(yield* endsWithin(sse, 5_000))
        } finally {
          sse.close()
        }
      }))
  })

  describe("caps", () => {
    it.effect("per key, per organization and per process: 429 TOO_MANY_STREAMS naming the setting; closing one frees a place", () =>
      Effect.gen(function*() {
        const svc = yield* SvcTest
        const org = yield* SvcTest.org()
        const open: Array<SseConnection> = []
        const connect = (key: string) =>
          Effect.promise(async () => {
            const sse = await openSse(approvalStream(svc.baseUrl), { key })
            open.push(sse)
            return sse
          })
        const body = (sse: SseConnection) =>
          Effect.promise(() => sse.next().then(() => undefined).catch(() => undefined))
        try {
          const a = yield* org.newKey(["agents.read"])
          const b = yield* org.newKey(["agents.read"])
          assert.strictEqual((yield* connect(a.key)).status, 200)
          assert.strictEqual((yield* connect(a.key)).status, 200)
          const third = yield* raw(approvalStream(svc.baseUrl), { headers: { authorization: `Bearer ${a.key}` } })
          assert.strictEqual(third.status, 429)
          assert.include(third.json, { code: "TOO_MANY_STREAMS", limit: "SVC_MAX_STREAMS_PER_KEY", limit_value: 2 })

          assert.strictEqual((yield* connect(b.key)).status, 200)
          const fourth = yield* raw(approvalStream(svc.baseUrl), { headers: { authorization: `Bearer ${b.key}` } })
          assert.strictEqual(fourth.status, 429)
          assert.include(fourth.json, { limit: "SVC_MAX_STREAMS_PER_ORG", limit_value: 3 })

          // Another organization is not held back by this one, up to the process's cap.
          const other = yield* SvcTest.org()
          const c = yield* other.newKey(["agents.read"])
          const d = yield* other.newKey(["agents.read"])
          assert.strictEqual((yield* connect(c.key)).status, 200)
          assert.strictEqual((yield* connect(d.key)).status, 200)
          const sixth = yield* raw(approvalStream(svc.baseUrl), { headers: { authorization: `Bearer ${c.key}` } })
          assert.strictEqual(sixth.status, 429)
          assert.include(sixth.json, { limit: "SVC_MAX_STREAMS", limit_value: 5 })

          // Closing a stream frees its place.
          const first = open.shift()!
          yield* body(first)
          first.close()
          let reopened = 429
          const deadline = Date.now() + 5_000
          while (reopened === 429 && Date.now() < deadline) {
            const sse = yield* connect(a.key)
            reopened = sse.status
            if (reopened === 429) {
              open.pop()
              sse.close()
              yield* Effect.sleep(50)
            }
          }
          assert.strictEqual(reopened, 200)
        } finally {
          for (const sse of open) sse.close()
        }
      }))
  })
})
