/**
 * An endpoint's `ordering`: `concurrent` by default; `strict` (on create or
 * PATCH) sends its events one at a time in the order they were recorded, a
 * failing one holding the ones behind it until it is delivered.
 */
import { assert, layer } from "@effect/vitest"
import { Effect } from "effect"
import { SvcTest } from "../../../src/testing.ts"
import { raw } from "../../support/http.ts"
import { HttpsReceiver, Reply } from "../../support/HttpsReceiver.ts"
import { eventBody, insertEvents, webhookService } from "./support.ts"

layer(webhookService(), { excludeTestServices: true })("endpoint ordering", (it) => {
  it.effect("concurrent by default; strict on create or by a PATCH naming only the ordering; anything else is a 400 naming the field", () =>
    Effect.gen(function*() {
      const svc = yield* SvcTest
      const org = yield* SvcTest.org()
      const url = "https://127.0.0.1:9/hooks"
      const plain = (yield* org.client.notifications.create({ payload: { url } })).endpoint
      assert.strictEqual(plain.ordering, "concurrent")
      const strict = (yield* org.client.notifications.create({ payload: { url, ordering: "strict" } })).endpoint
      assert.strictEqual(strict.ordering, "strict")

      const patched = yield* org.client.notifications.update({
        params: { id: plain.id },
        payload: { ordering: "strict" }
      })
      assert.deepStrictEqual(
        [patched.ordering, patched.events],
        ["strict", plain.events],
        "the events stay as they were"
      )
      const back = yield* org.client.notifications.update({
        params: { id: strict.id },
        payload: { events: ["approval.approved"] }
      })
      assert.deepStrictEqual(
        [back.ordering, back.events],
        ["strict", ["approval.approved"]],
        "the ordering stays as it was"
      )
      const listed = (yield* org.client.notifications.list()).endpoints
      assert.deepStrictEqual(listed.map((e) => e.ordering), ["strict", "strict"])

      for (const [method, path] of [["POST", ""], ["PATCH", `/${plain.id}`]] as const) {
        const bad = yield* raw(`${svc.baseUrl}/v1/notification-endpoints${path}`, {
          method,
          headers: { authorization: `Bearer ${org.key}`, "content-type": "application/json" },
          body: JSON.stringify({ url, ordering: "sideways" })
        })
        assert.strictEqual(bad.status, 400, method)
        assert.include(JSON.stringify(bad.json), "ordering", `${method}: the problem names the field`)
      }
      // The queue reads the same ordering.
      const targets = yield* svc.sql<{ id: string; strict: boolean }>`
        SELECT id, strict FROM delivery_targets WHERE id IN (${plain.id}, ${strict.id}) ORDER BY id
      `
      assert.deepStrictEqual(targets.map((t) => t.strict), [true, true])
    }))

  it.effect("a strict endpoint gets its events one at a time in recorded order; a failing one holds the rest until it is delivered", () =>
    Effect.gen(function*() {
      // Every answer takes 150 ms: sends that overlapped would arrive closer together.
      const receiver = yield* HttpsReceiver.make({ respond: () => ({ ...Reply.ok(), delayMs: 150 }) })
      // The first event fails twice, then everything is taken.
      receiver.enqueue({ status: 500, delayMs: 150 }, { status: 503, delayMs: 150 })
      const org = yield* SvcTest.org()
      yield* org.client.notifications.create({ payload: { url: receiver.url("/strict"), ordering: "strict" } })
      const events = ["approval.requested", "approval.approved", "approval.requested", "approval.rejected"] as const
      const bodies = events.map((type) => eventBody(org.orgId, type))
      yield* insertEvents(bodies)
      const requests = yield* receiver.waitForRequests(events.length + 2, "30 seconds")
      const ids = requests.map((r) => r.headers["x-svc-event-id"])
      const [first, ...rest] = bodies.map((b) => b.id)
      assert.deepStrictEqual(
        ids,
        [first, first, first, ...rest],
        "in order; the failing one retried before anything behind it"
      )
      // One at a time: no request began before the previous one was answered.
      for (let i = 1; i < requests.length; i++) {
        assert.isAtLeast(
          requests[i]!.receivedAt - requests[i - 1]!.receivedAt,
          140,
          `request ${i} overlapped the one before`
        )
      }
    }))
})
