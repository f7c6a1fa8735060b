/**
 * Delivering outbox events to real HTTPS receivers on loopback: signed POSTs
 * verified by our receiver kit (Stripe's and Svix's verifiers check the same
 * signatures in test/interop/standard-webhooks.test.ts), subscriptions,
 * retries, Retry-After, 410, redirects, timeouts, cooldown with replay,
 * queue capacity, deletion and secret rotation.
 */
import { assert, describe, layer } from "@effect/vitest"
import { Duration, Effect } from "effect"
import { SqlClient } from "effect/sql"
import { constructEvent, verifySignature } from "../../../packages/receiver/src/index.ts"
import { VERSION } from "../../../src/api/Version.ts"
import { SvcTest, type TestOrg } from "../../../src/testing.ts"
import { eventually } from "../../support/http.ts"
import { HttpsReceiver, type ReceivedRequest, Reply } from "../../support/HttpsReceiver.ts"
import { deliveryRows, eventBody, type EventType, insertEvents, waitForDeliveries, webhookService } from "./support.ts"

const text = (bytes: Uint8Array) => new TextDecoder().decode(bytes)

const endpointFor = (org: TestOrg, url: string, events?: ReadonlyArray<EventType>) =>
  org.client.notifications.create({ payload: events === undefined ? { url } : { url, events } })

const attempts = (deliveryId: string) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    return yield* sql<
      { attempt: number; status_code: number | null; error: string | null; response_snippet: string | null }
    >`
      SELECT attempt, status_code, error, response_snippet FROM delivery_attempt_records WHERE delivery_id = ${deliveryId} ORDER BY attempt
    `
  }).pipe(Effect.orDie)

const byPath = (receiver: HttpsReceiver["Service"], path: string) => receiver.requests().filter((r) => r.path === path)

layer(webhookService({ webhookQueueCapacity: 5 }), { excludeTestServices: true })("webhook delivery", (it) => {
  describe("signed POSTs", () => {
    it.effect("each subscribed endpoint gets the exact event bytes, event headers and a signature our kit accepts", () =>
      Effect.gen(function*() {
        const receiver = yield* HttpsReceiver.make()
        const org = yield* SvcTest.org()
        const { endpoint, secret } = yield* endpointFor(org, receiver.url("/signed"))
        const event = eventBody(org.orgId, "approval.requested")
        const [body] = yield* insertEvents([event])
        const [request] = yield* receiver.waitForRequests(1)
        assert.strictEqual(request!.method, "POST")
        assert.strictEqual(text(request!.body), body)
        assert.strictEqual(request!.headers["content-type"], "application/json")
        assert.strictEqual(request!.headers["x-svc-event-id"], event.id)
        assert.strictEqual(request!.headers["x-svc-event-type"], "approval.requested")
        assert.strictEqual(request!.headers["user-agent"], `svc/${VERSION}`)
        const signature = request!.headers["x-svc-signature"]!
        assert.match(signature, /^t=\d+,v1=[0-9a-f]{64}$/)
        const t = Number(/^t=(\d+)/.exec(signature)![1])
        assert.isAtMost(Math.abs(t - Date.now() / 1000), 60)

        const verified = yield* Effect.promise(() =>
          constructEvent(request!.body, signature, secret, { expectedOrgId: org.orgId })
        )
        assert.deepStrictEqual(verified, JSON.parse(body!))
        // A wrong secret is refused.
        const wrong = yield* Effect.promise(() =>
          verifySignature(request!.body, signature, `${secret}x`).then(() => "accepted", (e) => e.reason)
        )
        assert.strictEqual(wrong, "bad_signature")

        const { deliveries } = yield* eventually(
          Effect.map(
            org.client.notifications.deliveries({ params: { id: endpoint.id }, query: {} }),
            (list) => list.deliveries[0]?.status === "delivered" ? list : undefined
          )
        )
        assert.strictEqual(deliveries.length, 1)
        const delivery = deliveries[0]!
        assert.strictEqual(delivery.event_id, event.id)
        assert.strictEqual(delivery.label, `approval.requested ${event.approval.approval_id}`)
        assert.strictEqual(delivery.attempts, 1)
        assert.strictEqual(delivery.replays, 0)
        assert.isString(delivery.finished_at)
        // A delivered log row's status code is its outcome row's (the receiver's 200).
        assert.strictEqual(delivery.status_code, 200)
        assert.deepStrictEqual(
          Object.keys(delivery).sort(),
          [
            "attempts",
            "created_at",
            "endpoint_id",
            "event_id",
            "finished_at",
            "id",
            "label",
            "last_error",
            "replays",
            "status",
            "status_code"
          ]
        )
        // The record keeps the status and duration of a success (a failed
        // attempt also a snippet of the answer), never the payload.
        const [row] = yield* deliveryRows(endpoint.id)
        assert.isNull(row!.payload)
        const [attempt] = yield* attempts(delivery.id)
        assert.strictEqual(attempt!.status_code, 200)
        assert.isNull(attempt!.response_snippet)
      }).pipe(Effect.scoped))

    it.effect("only subscribed, active endpoints of the event's organization get it; deliveries are created in event order", () =>
      Effect.gen(function*() {
        const receiver = yield* HttpsReceiver.make()
        const org = yield* SvcTest.org()
        const other = yield* SvcTest.org()
        const all = yield* endpointFor(org, receiver.url("/all"))
        const decisions = yield* endpointFor(org, receiver.url("/decisions"), [
          "approval.approved",
          "approval.rejected"
        ])
        yield* endpointFor(other, receiver.url("/other-org"))
        const types: ReadonlyArray<EventType> = [
          "approval.requested",
          "approval.expiring",
          "approval.escalated",
          "approval.approved",
          "approval.rejected",
          "approval.expired"
        ]
        const approval = "0193a0a0-0000-7000-8000-0000000000aa"
        const events = types.map((type) => eventBody(org.orgId, type, approval))
        // Two batches: the test service's queue capacity is 5 per endpoint.
        yield* insertEvents(events.slice(0, 3))
        yield* waitForDeliveries(
          all.endpoint.id,
          (rows) => rows.length === 3 && rows.every((r) => r.status === "delivered")
        )
        yield* insertEvents(events.slice(3))
        yield* receiver.waitForRequests(8)
        yield* waitForDeliveries(
          all.endpoint.id,
          (rows) => rows.length === 6 && rows.every((r) => r.status === "delivered")
        )
        assert.deepStrictEqual((yield* deliveryRows(all.endpoint.id)).map((r) => r.event_id), events.map((e) => e.id))
        assert.sameMembers(byPath(receiver, "/all").map((r) => r.headers["x-svc-event-type"]!), [...types])
        assert.sameMembers(byPath(receiver, "/decisions").map((r) => r.headers["x-svc-event-type"]!), [
          "approval.approved",
          "approval.rejected"
        ])
        assert.strictEqual(byPath(receiver, "/other-org").length, 0)
        assert.strictEqual((yield* deliveryRows(decisions.endpoint.id)).length, 2)
      }).pipe(Effect.scoped))
  })

  describe("retries", () => {
    it.effect("a failed attempt is retried with the same event id and body and a fresh signature until a 2xx", () =>
      Effect.gen(function*() {
        const receiver = yield* HttpsReceiver.make()
        receiver.enqueue(Reply.status(500, { body: "boom ".repeat(400) }), Reply.status(400, { body: "nope" }))
        const org = yield* SvcTest.org()
        const { endpoint, secret } = yield* endpointFor(org, receiver.url("/retry"))
        const event = eventBody(org.orgId, "approval.expiring")
        const [body] = yield* insertEvents([event])
        const requests = yield* receiver.waitForRequests(3)
        for (const request of requests) {
          assert.strictEqual(text(request.body), body)
          assert.strictEqual(request.headers["x-svc-event-id"], event.id)
          yield* Effect.promise(() => verifySignature(request.body, request.headers["x-svc-signature"], secret))
        }
        const [row] = yield* waitForDeliveries(endpoint.id, (rows) => rows[0]?.status === "delivered")
        assert.strictEqual(row!.attempts, 3)
        const recorded = yield* attempts(row!.id)
        assert.deepStrictEqual(recorded.map((a) => a.status_code), [500, 400, 200])
        // The snippet is truncated, not the whole answer.
        assert.isAtMost(recorded[0]!.response_snippet!.length, 520)
        assert.strictEqual(recorded[1]!.response_snippet, "nope")
        assert.strictEqual(recorded[0]!.error, "HTTP 500")
      }).pipe(Effect.scoped))

    it.effect("after the last retry the delivery is failed; replay requeues it with the same event id and counts replays", () =>
      Effect.gen(function*() {
        const receiver = yield* HttpsReceiver.make({ respond: () => Reply.status(502) })
        const org = yield* SvcTest.org()
        const { endpoint } = yield* endpointFor(org, receiver.url("/exhaust"))
        const event = eventBody(org.orgId, "approval.requested")
        yield* insertEvents([event])
        const [failed] = yield* waitForDeliveries(endpoint.id, (rows) => rows[0]?.status === "failed")
        assert.strictEqual(failed!.attempts, 4)
        assert.include(failed!.last_error!, "HTTP 502")
        // Another organization cannot see or replay it, even through its own endpoint.
        const other = yield* SvcTest.org()
        const theirs = yield* endpointFor(other, receiver.url("/other"))
        const foreign = yield* Effect.flip(
          other.client.notifications.replay({ params: { id: theirs.endpoint.id, delivery: failed!.id } })
        )
        assert.strictEqual(foreign._tag, "NotFound")
        // Replay of a non-failed delivery: 409 NOT_REPLAYABLE.
        receiver.respond(() => Reply.ok())
        const replayed = yield* org.client.notifications.replay({ params: { id: endpoint.id, delivery: failed!.id } })
        assert.deepStrictEqual(replayed, { queued: true, id: failed!.id })
        const [done] = yield* waitForDeliveries(endpoint.id, (rows) => rows[0]?.status === "delivered")
        assert.strictEqual(done!.replays, 1)
        assert.strictEqual(done!.event_id, event.id)
        assert.strictEqual(receiver.requests().at(-1)!.headers["x-svc-event-id"], event.id)
        const again = yield* Effect.flip(
          org.client.notifications.replay({ params: { id: endpoint.id, delivery: failed!.id } })
        )
        assert.strictEqual(again._tag, "NotReplayable")
        assert.strictEqual((again as { code: string }).code, "NOT_REPLAYABLE")
        const missing = yield* Effect.flip(
          org.client.notifications.replay({
            params: { id: endpoint.id, delivery: "0193a0a0-0000-7000-8000-000000000001" }
          })
        )
        assert.strictEqual(missing._tag, "NotFound")
      }).pipe(Effect.scoped))

    it.effect("429 and 503 Retry-After are honoured: the next attempt waits that long instead of the schedule's delay", () =>
      Effect.gen(function*() {
        const receiver = yield* HttpsReceiver.make()
        receiver.enqueue(
          Reply.status(429, { headers: { "retry-after": "2" } }),
          Reply.status(503, { headers: { "retry-after": "1" } })
        )
        const org = yield* SvcTest.org()
        const { endpoint } = yield* endpointFor(org, receiver.url("/retry-after"))
        yield* insertEvents([eventBody(org.orgId, "approval.requested")])
        const requests = yield* receiver.waitForRequests(3)
        // The schedule alone would retry after ~100 ms.
        assert.isAtLeast(requests[1]!.receivedAt - requests[0]!.completedAt, 1_900)
        assert.isAtLeast(requests[2]!.receivedAt - requests[1]!.completedAt, 900)
        yield* waitForDeliveries(endpoint.id, (rows) => rows[0]?.status === "delivered")
      }).pipe(Effect.scoped))

    it.effect("a redirect (even to a metadata address) is a failed attempt and is never followed", () =>
      Effect.gen(function*() {
        const receiver = yield* HttpsReceiver.make()
        receiver.enqueue(
          Reply.redirect("http://169.254.169.254/latest/meta-data/"),
          Reply.redirect(receiver.url("/elsewhere"), 307)
        )
        const org = yield* SvcTest.org()
        const { endpoint } = yield* endpointFor(org, receiver.url("/redirect"))
        yield* insertEvents([eventBody(org.orgId, "approval.requested")])
        const [row] = yield* waitForDeliveries(endpoint.id, (rows) => rows[0]?.status === "delivered")
        const recorded = yield* attempts(row!.id)
        assert.deepStrictEqual(recorded.map((a) => a.status_code), [302, 307, 200])
        assert.include(recorded[0]!.error!, "redirects are not followed")
        assert.deepStrictEqual(receiver.requests().map((r) => r.path), ["/redirect", "/redirect", "/redirect"])
      }).pipe(Effect.scoped))
  })

  describe("the five second limit", () => {
    it.effect(
      "a 2xx after 4.5 s succeeds; 6 s slow headers and a body still arriving at 6 s fail",
      () =>
        Effect.gen(function*() {
          const receiver = yield* HttpsReceiver.make({
            respond: (request: ReceivedRequest) =>
              request.path === "/in-time" && request.index < 3
                ? Reply.delayed(4_500)
                : request.path === "/slow-headers" && byPathCount(request) === 0
                ? Reply.delayed(6_000)
                : request.path === "/slow-body" && byPathCount(request) === 0
                ? Reply.trickle("x".repeat(600), 6, 1_000)
                : Reply.ok()
          })
          const seen = new Map<string, number>()
          const byPathCount = (request: ReceivedRequest) => {
            const n = seen.get(request.path) ?? 0
            seen.set(request.path, n + 1)
            return n
          }
          const org = yield* SvcTest.org()
          const inTime = yield* endpointFor(org, receiver.url("/in-time"))
          const slowHeaders = yield* endpointFor(org, receiver.url("/slow-headers"))
          const slowBody = yield* endpointFor(org, receiver.url("/slow-body"))
          yield* insertEvents([eventBody(org.orgId, "approval.requested")])
          const [ok] = yield* waitForDeliveries(inTime.endpoint.id, (rows) => rows[0]?.status === "delivered")
          assert.strictEqual(ok!.attempts, 1)
          for (const endpoint of [slowHeaders.endpoint, slowBody.endpoint]) {
            const [row] = yield* waitForDeliveries(endpoint.id, (rows) => rows[0]?.status === "delivered")
            assert.strictEqual(row!.attempts, 2)
            const [first] = yield* attempts(row!.id)
            // Whichever of undici's own timeouts and the deadline's timer fires first, the record names the deadline.
            assert.include(first!.error!, "no complete answer within 5000 ms")
          }
        }).pipe(Effect.scoped),
      30_000
    )
  })

  describe("410 Gone", () => {
    it.effect("deactivates the endpoint with the reason and fails its pending deliveries; PATCH reactivates it", () =>
      Effect.gen(function*() {
        const receiver = yield* HttpsReceiver.make({ respond: () => Reply.status(410, { body: "gone" }) })
        const org = yield* SvcTest.org()
        const { endpoint } = yield* endpointFor(org, receiver.url("/gone"))
        yield* insertEvents([eventBody(org.orgId, "approval.requested"), eventBody(org.orgId, "approval.expiring")])
        const rows = yield* waitForDeliveries(
          endpoint.id,
          (rows) => rows.length === 2 && rows.every((r) => r.status === "failed")
        )
        assert.isTrue(rows.some((r) => r.last_error!.includes("410")))
        // Deactivated once the 410's attempt is recorded (the endpoint's health follows the settle).
        const listed = yield* eventually(
          Effect.map(org.client.notifications.list(), ({ endpoints: [e] }) => e?.active === false ? e : undefined)
        )
        assert.include(listed.deactivated_reason!, "410 Gone")
        // Inactive: new events make no deliveries.
        const sent = receiver.requests().length
        yield* insertEvents([eventBody(org.orgId, "approval.approved")])
        const sql = yield* SqlClient.SqlClient
        yield* eventually(Effect.map(
          sql<{ n: number }>`SELECT count(*)::int AS n FROM undispatched_events WHERE org_id = ${org.orgId}`,
          (r) => r[0]!.n === 0 ? true : undefined
        ))
        assert.strictEqual((yield* deliveryRows(endpoint.id)).length, 2)
        // Replay waits for reactivation: 409 NOT_REPLAYABLE saying so.
        const early = yield* Effect.flip(
          org.client.notifications.replay({ params: { id: endpoint.id, delivery: rows[0]!.id } })
        )
        assert.strictEqual(early._tag, "NotReplayable")
        // ...but an absent delivery is still 404, not 409.
        const absent = yield* Effect.flip(
          org.client.notifications.replay({
            params: { id: endpoint.id, delivery: "0193a0a0-0000-7000-8000-000000000002" }
          })
        )
        assert.strictEqual(absent._tag, "NotFound")
        // PATCH reactivates; new events flow again, and the failed ones can be replayed.
        receiver.respond(() => Reply.ok())
        const patched = yield* org.client.notifications.update({
          params: { id: endpoint.id },
          payload: { events: ["approval.rejected"] }
        })
        assert.strictEqual(patched.active, true)
        assert.isUndefined(patched.deactivated_reason)
        yield* insertEvents([eventBody(org.orgId, "approval.rejected")])
        yield* waitForDeliveries(endpoint.id, (rows) => rows.length === 3 && rows[2]!.status === "delivered")
        yield* org.client.notifications.replay({ params: { id: endpoint.id, delivery: rows[0]!.id } })
        yield* waitForDeliveries(endpoint.id, (rows) => rows[0]!.status === "delivered")
        assert.isAtLeast(receiver.requests().length, sent + 1)
      }).pipe(Effect.scoped))
  })

  describe("queue capacity", () => {
    it.effect(
      "an event that finds the endpoint's queue full is a failed delivery saying so; its replay is 409 QUEUE_FULL until the queue drains",
      () =>
        Effect.gen(function*() {
          const receiver = yield* HttpsReceiver.make({ respond: () => Reply.hang() })
          const org = yield* SvcTest.org()
          const { endpoint } = yield* endpointFor(org, receiver.url("/full"))
          yield* insertEvents(Array.from({ length: 6 }, () => eventBody(org.orgId, "approval.requested")))
          const rows = yield* waitForDeliveries(endpoint.id, (rows) => rows.length === 6)
          const full = rows.filter((r) => r.status === "failed")
          assert.strictEqual(full.length, 1)
          assert.include(full[0]!.last_error!, "queue full")
          const error = yield* Effect.flip(
            org.client.notifications.replay({ params: { id: endpoint.id, delivery: full[0]!.id } })
          )
          assert.strictEqual(error._tag, "QueueFull")
          assert.strictEqual((error as { code: string }).code, "QUEUE_FULL")
          // The hanging answers time out (5 s); the retries succeed and the queue drains.
          receiver.respond(() => Reply.ok())
          yield* waitForDeliveries(endpoint.id, (rows) => rows.filter((r) => r.status === "delivered").length === 5)
          const replayed = yield* org.client.notifications.replay({
            params: { id: endpoint.id, delivery: full[0]!.id }
          })
          assert.isTrue(replayed.queued)
          const done = yield* waitForDeliveries(endpoint.id, (rows) => rows.every((r) => r.status === "delivered"))
          assert.strictEqual(done.find((r) => r.id === full[0]!.id)!.replays, 1)
        }).pipe(Effect.scoped),
      30_000
    )
  })

  describe("deletion", () => {
    it.effect("deleting an endpoint fails its pending deliveries with the reason and nothing more is sent", () =>
      Effect.gen(function*() {
        const receiver = yield* HttpsReceiver.make({
          respond: () => Reply.status(503, { headers: { "retry-after": "3600" } })
        })
        const org = yield* SvcTest.org()
        const { endpoint } = yield* endpointFor(org, receiver.url("/deleted"))
        yield* insertEvents([eventBody(org.orgId, "approval.requested"), eventBody(org.orgId, "approval.expiring")])
        yield* waitForDeliveries(endpoint.id, (rows) => rows.length === 2 && rows.every((r) => r.status === "retrying"))
        yield* org.client.notifications.remove({ params: { id: endpoint.id } })
        const rows = yield* deliveryRows(endpoint.id)
        assert.deepStrictEqual(rows.map((r) => [r.status, r.last_error]), [["failed", "endpoint deleted"], [
          "failed",
          "endpoint deleted"
        ]])
        const missing = yield* Effect.flip(
          org.client.notifications.deliveries({ params: { id: endpoint.id }, query: {} })
        )
        assert.strictEqual(missing._tag, "NotFound")
      }).pipe(Effect.scoped))
  })

  describe("secret rotation", () => {
    it.effect("during the overlap each delivery carries a v1= per secret; either secret verifies with our kit", () =>
      Effect.gen(function*() {
        const receiver = yield* HttpsReceiver.make()
        const org = yield* SvcTest.org()
        const { endpoint, secret: oldSecret } = yield* endpointFor(org, receiver.url("/rotate"))
        const { secret: newSecret } = yield* org.client.notifications.rotateSecret({
          params: { id: endpoint.id },
          payload: { overlap_seconds: 600 }
        })
        yield* insertEvents([eventBody(org.orgId, "approval.requested")])
        const [request] = yield* receiver.waitForRequests(1)
        const header = request!.headers["x-svc-signature"]!
        assert.match(header, /^t=\d+,v1=[0-9a-f]{64},v1=[0-9a-f]{64}$/)
        for (const secret of [oldSecret, newSecret]) {
          yield* Effect.promise(() => constructEvent(request!.body, header, secret))
        }
        // Overlap 0: the secret signing until now stops at once; the first
        // one keeps the rest of its announced overlap.
        const { secret: newest } = yield* org.client.notifications.rotateSecret({
          params: { id: endpoint.id },
          payload: { overlap_seconds: 0 }
        })
        yield* insertEvents([eventBody(org.orgId, "approval.expiring")])
        const [, second] = yield* receiver.waitForRequests(2)
        const header2 = second!.headers["x-svc-signature"]!
        assert.match(header2, /^t=\d+,v1=[0-9a-f]{64},v1=[0-9a-f]{64}$/)
        yield* Effect.promise(() => verifySignature(second!.body, header2, newest))
        yield* Effect.promise(() => verifySignature(second!.body, header2, oldSecret))
        const refused = yield* Effect.flip(Effect.tryPromise(() => verifySignature(second!.body, header2, newSecret)))
        assert.isDefined(refused)
      }).pipe(Effect.scoped))
  })
})

layer(
  webhookService({
    webhookRetrySchedule: [Duration.millis(100), Duration.millis(100)],
    webhookCooldownAfter: 2,
    webhookCooldownBase: Duration.seconds(2),
    // The third failure cools for 4 s: the test reads and replays within that on a busy machine.
    webhookCooldownMax: Duration.seconds(4)
  }),
  { excludeTestServices: true }
)("cooldown", (it) => {
  it.effect(
    "consecutive failures cool the endpoint down; nothing is sent to it until the cooldown ends, replays included",
    () =>
      Effect.gen(function*() {
        const receiver = yield* HttpsReceiver.make({ respond: () => Reply.status(500) })
        const org = yield* SvcTest.org()
        const { endpoint } = yield* endpointFor(org, receiver.url("/cool"))
        yield* insertEvents([eventBody(org.orgId, "approval.requested")])
        const sql = yield* SqlClient.SqlClient
        const [failed] = yield* waitForDeliveries(endpoint.id, (rows) => rows[0]?.status === "failed")
        assert.strictEqual(failed!.attempts, 3)
        const requests = receiver.requests()
        // Attempt 2 is the second consecutive failure: attempt 3 waited out a 2 s cooldown, not the 100 ms retry delay.
        assert.isAtLeast(requests[2]!.receivedAt - requests[1]!.completedAt, 1_900)
        const [target] = yield* sql<{ cooldown_until: Date; consecutive_failures: number }>`
        SELECT cooldown_until, consecutive_failures FROM delivery_targets WHERE id = ${endpoint.id}
      `
        assert.strictEqual(target!.consecutive_failures, 3)
        const cooldownEnd = target!.cooldown_until.getTime()
        assert.isAbove(cooldownEnd, Date.now())
        // The list says when the cooldown ends.
        const listed = (yield* org.client.notifications.list()).endpoints.find((e) => e.id === endpoint.id)!
        assert.strictEqual(listed.cooldown_until, target!.cooldown_until.toISOString())

        receiver.respond(() => Reply.ok())
        const replayed = yield* org.client.notifications.replay({ params: { id: endpoint.id, delivery: failed!.id } })
        assert.isTrue(replayed.queued)
        const [queued] = yield* deliveryRows(endpoint.id)
        assert.isAtLeast(queued!.next_attempt_at.getTime(), cooldownEnd - 5)
        const [done] = yield* waitForDeliveries(endpoint.id, (rows) => rows[0]?.status === "delivered")
        assert.strictEqual(done!.replays, 1)
        assert.isAtLeast(receiver.requests().at(-1)!.receivedAt, cooldownEnd - 50)
        // Success resets the endpoint's health.
        const [healthy] = yield* sql<
          { consecutive_failures: number }
        >`SELECT consecutive_failures FROM delivery_targets WHERE id = ${endpoint.id}`
        assert.strictEqual(healthy!.consecutive_failures, 0)
      }).pipe(Effect.scoped),
    30_000
  )
})

// Its own service: the stuck sends get a long deadline, so "not one has
// timed out yet" keeps a wide margin on a busy machine (with the default 5 s
// the healthy deliveries had to land within 5 s of the stuck ones starting).
layer(webhookService({ webhookSendTimeout: Duration.seconds(30) }), { excludeTestServices: true })(
  "isolation",
  (it) => {
    it.effect("hanging endpoints on the same host do not hold back another endpoint's deliveries", () =>
      Effect.gen(function*() {
        const receiver = yield* HttpsReceiver.make({
          respond: (request) => request.path.startsWith("/stuck") ? Reply.hang() : Reply.ok()
        })
        const org = yield* SvcTest.org()
        // 7 endpoints × 12 events: more requests than the organization may
        // have in flight to one host (SVC_WEBHOOK_PER_HOST, 32), so they fill
        // that bound, and every stuck endpoint has at least one hanging.
        const stuck = yield* Effect.forEach(
          [1, 2, 3, 4, 5, 6, 7],
          (n) => endpointFor(org, receiver.url(`/stuck-${n}`), ["approval.requested"])
        )
        yield* insertEvents(Array.from({ length: 12 }, () => eventBody(org.orgId, "approval.requested")))
        // Every stuck request is hanging at the receiver before the healthy endpoint exists...
        const hanging = () => receiver.requests().filter((r) => r.path.startsWith("/stuck"))
        yield* eventually(
          Effect.sync(() =>
            hanging().length >= 32 &&
              [1, 2, 3, 4, 5, 6, 7].every((n) => hanging().some((r) => r.path === `/stuck-${n}`))
              ? true
              : undefined
          ),
          { what: "the host's bound filled with hanging requests, each stuck endpoint among them" }
        )
        const healthy = yield* endpointFor(org, receiver.url("/healthy"), ["approval.approved"])
        yield* insertEvents(Array.from({ length: 5 }, () => eventBody(org.orgId, "approval.approved")))
        yield* waitForDeliveries(
          healthy.endpoint.id,
          (rows) => rows.length === 5 && rows.every((r) => r.status === "delivered")
        )
        // ...and it is served while not one of them has ended.
        const sql = yield* SqlClient.SqlClient
        const [finished] = yield* sql<{ n: number }>`
        SELECT count(*)::int AS n FROM delivery_attempts a JOIN deliveries d ON d.id = a.delivery_id
        WHERE d.target_id IN ${sql.in(stuck.map((s) => s.endpoint.id))}
      `
        assert.strictEqual(finished!.n, 0)
        assert.isAtMost(hanging().length, 32 + 6, "the bound, plus one for each further endpoint")
      }).pipe(Effect.scoped))
  }
)
