/**
 * What receivers and their administrators get beside the approval events:
 * filters by action class, test deliveries, bulk replay of a failed window
 * and delivery statistics, against real HTTPS receivers on loopback.
 */
import { assert, describe, layer } from "@effect/vitest"
import { Effect } from "effect"
import { SqlClient } from "effect/sql"
import { Webhook as StandardWebhook } from "standardwebhooks"
import { constructEventFromHeaders } from "../../../packages/receiver/src/index.ts"
import { SvcTest, type TestOrg } from "../../../src/testing.ts"
import { eventually, raw } from "../../support/http.ts"
import { HttpsReceiver, type ReceivedRequest, Reply } from "../../support/HttpsReceiver.ts"
import { deliveryRows, eventBody, insertEvents, waitForDeliveries, webhookService } from "./support.ts"

const text = (bytes: Uint8Array) => new TextDecoder().decode(bytes)
const bodyOf = (request: ReceivedRequest) => JSON.parse(text(request.body))

const requireApproval = (org: TestOrg, actionClass: string) =>
  org.client.approvalPolicies.put({
    params: { action_class: actionClass },
    payload: { mode: "require_approval", review_seconds: 600, expiring_notice_seconds: 0, timeout_action: "reject" }
  })

const post = (path: string, key: string, body: unknown) =>
  Effect.gen(function*() {
    const svc = yield* SvcTest
    return yield* raw(`${svc.baseUrl}${path}`, {
      method: "POST",
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
      body: JSON.stringify(body)
    })
  })

const targetHealth = (endpointId: string) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const [row] = yield* sql<{ consecutive_failures: number; cooldown_until: Date | null }>`
      SELECT consecutive_failures, cooldown_until FROM delivery_targets WHERE id = ${endpointId}
    `
    return row ?? { consecutive_failures: 0, cooldown_until: null }
  }).pipe(Effect.orDie)

// The default queue capacity: the unfiltered endpoint takes five events, more than the
// small capacity the replay tests below set, and a slow drain must not refuse one.
layer(webhookService(), { excludeTestServices: true })("receivers", (it) => {
  describe("filters by action class", () => {
    it.effect("action_classes on create, PATCH and reads: exact classes or prefixes ending in .*; null or absent means all", () =>
      Effect.gen(function*() {
        const org = yield* SvcTest.org()
        const url = "https://127.0.0.1:9/filters"
        const plain = yield* org.client.notifications.create({ payload: { url } })
        assert.isNull(plain.endpoint.action_classes)
        const { endpoint } = yield* org.client.notifications.create({
          payload: { url, action_classes: ["payments.*", "email.send"] }
        })
        assert.deepStrictEqual(endpoint.action_classes, ["payments.*", "email.send"])
        const listed = (yield* org.client.notifications.list()).endpoints.find((e) => e.id === endpoint.id)!
        assert.deepStrictEqual(listed.action_classes, ["payments.*", "email.send"])
        // PATCH of the events alone leaves the filter; null clears it.
        const events = yield* org.client.notifications.update({
          params: { id: endpoint.id },
          payload: { events: ["approval.requested"] }
        })
        assert.deepStrictEqual(events.action_classes, ["payments.*", "email.send"])
        const narrowed = yield* org.client.notifications.update({
          params: { id: endpoint.id },
          payload: { action_classes: ["files.delete"] }
        })
        assert.deepStrictEqual([narrowed.events, narrowed.action_classes], [["approval.requested"], ["files.delete"]])
        const cleared = yield* org.client.notifications.update({
          params: { id: endpoint.id },
          payload: { action_classes: null }
        })
        assert.isNull(cleared.action_classes)
      }))

    it.effect("an invalid entry or more than 50 entries is a 400 naming the field", () =>
      Effect.gen(function*() {
        const org = yield* SvcTest.org()
        const url = "https://127.0.0.1:9/filters"
        for (
          const [filter, field] of [
            [["payments.*", "pay*"], "action_classes[1]"],
            [[".starts-with-dot"], "action_classes[0]"],
            [["payments.*.refund"], "action_classes[0]"],
            [Array.from({ length: 51 }, (_, i) => `class${i}`), "action_classes"]
          ] as const
        ) {
          const response = yield* post("/v1/notification-endpoints", org.key, { url, action_classes: filter })
          assert.strictEqual(response.status, 400, JSON.stringify(filter))
          assert.strictEqual(response.json.code, "INVALID_REQUEST")
          assert.strictEqual(response.json.field, field, JSON.stringify(response.json))
        }
        const fifty = yield* post("/v1/notification-endpoints", org.key, {
          url,
          action_classes: Array.from({ length: 50 }, (_, i) => `class${i}`)
        })
        assert.strictEqual(fifty.status, 201)
      }))

    it.effect("approval events of other classes are not delivered to a filtered endpoint; an unfiltered one gets them all", () =>
      Effect.gen(function*() {
        const receiver = yield* HttpsReceiver.make()
        const org = yield* SvcTest.org()
        const payments = yield* org.client.notifications.create({
          payload: { url: receiver.url("/payments"), action_classes: ["payments.*"] }
        })
        const email = yield* org.client.notifications.create({
          payload: { url: receiver.url("/email"), action_classes: ["email.send"] }
        })
        yield* org.client.notifications.create({ payload: { url: receiver.url("/all") } })
        const classes = ["payments.refund", "email.send", "email.sendall", "files.delete", "payments"]
        for (const actionClass of classes) yield* requireApproval(org, actionClass)
        const session = yield* org.client.agentSessions.create({ payload: {} })
        const approvals = new Map<string, string>()
        for (const [index, actionClass] of classes.entries()) {
          const answer = yield* org.client.agentSessions.governStep({
            params: { session_id: session.id },
            payload: { step_id: `step-${index}`, tool: "tool", action_class: actionClass, arguments: {} }
          })
          approvals.set(answer.approval_id!, actionClass)
        }
        // Each event is fanned out to every endpoint in one statement: once /all has them all, every delivery exists.
        yield* eventually(
          Effect.sync(() =>
            receiver.requests().filter((r) => r.path === "/all").length >= classes.length ? true : undefined
          ),
          { what: "every event at /all", timeoutMs: 20_000, intervalMs: 50 }
        )
        yield* waitForDeliveries(
          payments.endpoint.id,
          (rows) => rows.every((r) => r.status === "delivered"),
          "/payments delivered"
        )
        yield* waitForDeliveries(
          email.endpoint.id,
          (rows) => rows.every((r) => r.status === "delivered"),
          "/email delivered"
        )
        const classesAt = (path: string) =>
          receiver.requests().filter((r) => r.path === path).map((r) => approvals.get(bodyOf(r).approval.approval_id))
            .sort()
        assert.deepStrictEqual(classesAt("/all"), [...classes].sort())
        assert.deepStrictEqual(classesAt("/payments"), ["payments.refund"])
        assert.deepStrictEqual(classesAt("/email"), ["email.send"])
        // The dispatcher made no delivery for them at all (not sent-and-hidden).
        assert.strictEqual((yield* deliveryRows(payments.endpoint.id)).length, 1)
        assert.strictEqual((yield* deliveryRows(email.endpoint.id)).length, 1)
      }).pipe(Effect.scoped))
  })
})

layer(
  webhookService({ webhookTestsPerMinute: 3, webhookQueueCapacity: 4, webhookReplayMax: 5 }),
  { excludeTestServices: true }
)("receivers", (it) => {
  describe("test deliveries", () => {
    it.effect("sends one signed event at once with test: true and an example approval; listed as test …, verified by the official library", () =>
      Effect.gen(function*() {
        const receiver = yield* HttpsReceiver.make()
        receiver.respond(() => Reply.status(204))
        const org = yield* SvcTest.org()
        const { endpoint, secret } = yield* org.client.notifications.create({
          payload: { url: receiver.url("/test"), events: ["approval.approved", "approval.requested"] }
        })
        const answer = yield* org.client.notifications.test({ params: { id: endpoint.id }, payload: {} })
        assert.strictEqual(answer.delivered, true)
        assert.strictEqual(answer.status, 204)
        assert.isAtLeast(answer.duration_ms, 0)
        const [request] = receiver.requests()
        const body = bodyOf(request!)
        // Default: the endpoint's first event type.
        assert.strictEqual(body.type, "approval.approved")
        assert.strictEqual(body.test, true)
        assert.strictEqual(body.org_id, org.orgId)
        assert.strictEqual(body.approval.approval_id, "00000000-0000-0000-0000-000000000000")
        assert.strictEqual(request!.headers["webhook-id"], body.id)
        new StandardWebhook(secret).verify(text(request!.body), {
          "webhook-id": request!.headers["webhook-id"]!,
          "webhook-timestamp": request!.headers["webhook-timestamp"]!,
          "webhook-signature": request!.headers["webhook-signature"]!
        })
        const event = yield* Effect.promise(() => constructEventFromHeaders(request!.body, request!.headers, secret))
        assert.strictEqual(event.test, true)
        const chosen = yield* org.client.notifications.test({
          params: { id: endpoint.id },
          payload: { event_type: "approval.requested" }
        })
        assert.strictEqual(chosen.status, 204)
        assert.strictEqual(bodyOf(receiver.requests()[1]!).type, "approval.requested")
        const { deliveries } = yield* org.client.notifications.deliveries({ params: { id: endpoint.id }, query: {} })
        assert.deepStrictEqual(
          deliveries.map((d) => [d.label, d.status, d.attempts]),
          [["test approval.requested", "delivered", 1], ["test approval.approved", "delivered", 1]]
        )
        assert.strictEqual(deliveries[1]!.event_id, body.id)
      }).pipe(Effect.scoped))

    it.effect("a receiver that refuses answers 502 DELIVERY_FAILED naming the status, never its body; never retried nor counted towards the cooldown", () =>
      Effect.gen(function*() {
        const receiver = yield* HttpsReceiver.make()
        receiver.respond(() => ({ status: 500, body: "internal secret stack trace" }))
        const org = yield* SvcTest.org()
        const { endpoint } = yield* org.client.notifications.create({ payload: { url: receiver.url("/refuses") } })
        const response = yield* post(`/v1/notification-endpoints/${endpoint.id}/test`, org.key, {})
        assert.strictEqual(response.status, 502)
        assert.strictEqual(response.json.code, "DELIVERY_FAILED")
        assert.strictEqual(response.json.receiver_status, 500)
        assert.notInclude(response.text, "internal secret stack trace")
        const again = yield* post(`/v1/notification-endpoints/${endpoint.id}/test`, org.key, {})
        assert.strictEqual(again.status, 502)
        const rows = yield* deliveryRows(endpoint.id)
        assert.deepStrictEqual(rows.map((r) => [r.status, r.attempts]), [["failed", 1], ["failed", 1]])
        assert.deepStrictEqual(yield* targetHealth(endpoint.id), { consecutive_failures: 0, cooldown_until: null })
        // Not replayable, alone or in bulk.
        const replay = yield* Effect.flip(
          org.client.notifications.replay({ params: { id: endpoint.id, delivery: rows[0]!.id } })
        )
        assert.strictEqual(replay._tag, "NotReplayable")
        const bulk = yield* org.client.notifications.replayFailed({
          params: { id: endpoint.id },
          payload: { since: new Date(Date.now() - 60_000).toISOString() }
        })
        assert.deepStrictEqual(bulk, { matched: 0, queued: 0, not_queued: 0 })
        // A window RFC 3339 allows from before year 1 (PostgreSQL reads year 0000 only as 1 BC).
        const ancient = yield* org.client.notifications.replayFailed({
          params: { id: endpoint.id },
          payload: { since: "0000-01-01T00:00:00+01:00", until: "0000-03-01T00:00:00Z", dry_run: true }
        })
        assert.deepStrictEqual(ancient, { matched: 0, queued: 0, not_queued: 0 })
        assert.strictEqual(receiver.requests().length, 2)
      }).pipe(Effect.scoped))

    it.effect("an unreachable receiver answers 502 naming the network error; an event type the endpoint lacks is a 400 naming event_type", () =>
      Effect.gen(function*() {
        const org = yield* SvcTest.org()
        const { endpoint } = yield* org.client.notifications.create({
          payload: { url: "https://127.0.0.1:9/closed", events: ["approval.requested"] }
        })
        const response = yield* post(`/v1/notification-endpoints/${endpoint.id}/test`, org.key, {})
        assert.strictEqual(response.status, 502)
        assert.strictEqual(response.json.code, "DELIVERY_FAILED")
        assert.isUndefined(response.json.receiver_status)
        assert.match(response.json.error, /ECONNREFUSED|connect|refused/i)
        const wrong = yield* post(`/v1/notification-endpoints/${endpoint.id}/test`, org.key, {
          event_type: "approval.expired"
        })
        assert.strictEqual(wrong.status, 400)
        assert.strictEqual(wrong.json.code, "INVALID_WEBHOOK_EVENTS")
        assert.strictEqual(wrong.json.field, "event_type")
      }))

    it.effect("at most SVC_WEBHOOK_TESTS_PER_MINUTE tests per endpoint, counted in the database, even when they arrive together; then 429 naming the setting", () =>
      Effect.gen(function*() {
        const receiver = yield* HttpsReceiver.make()
        receiver.respond(() => Reply.status(200))
        const org = yield* SvcTest.org()
        const { endpoint } = yield* org.client.notifications.create({ payload: { url: receiver.url("/rate") } })
        const other = yield* org.client.notifications.create({ payload: { url: receiver.url("/rate-other") } })
        const answers = yield* Effect.forEach(
          Array.from({ length: 5 }),
          () => post(`/v1/notification-endpoints/${endpoint.id}/test`, org.key, {}),
          { concurrency: "unbounded" }
        )
        assert.deepStrictEqual(answers.map((a) => a.status).sort(), [200, 200, 200, 429, 429])
        const refused = answers.find((a) => a.status === 429)!
        assert.strictEqual(refused.json.code, "RATE_LIMITED")
        assert.strictEqual(refused.json.limit, "SVC_WEBHOOK_TESTS_PER_MINUTE")
        assert.strictEqual(refused.json.limit_value, 3)
        assert.isAtLeast(refused.json.retry_after_seconds, 1)
        assert.isAtMost(refused.json.retry_after_seconds, 60)
        // Another endpoint has its own bound.
        const fine = yield* post(`/v1/notification-endpoints/${other.endpoint.id}/test`, org.key, {})
        assert.strictEqual(fine.status, 200)
      }).pipe(Effect.scoped))
  })

  describe("bulk replay", () => {
    it.effect("queues the failed deliveries created in [since, until) again with their event ids, one replay each; a dry run only counts", () =>
      Effect.gen(function*() {
        const receiver = yield* HttpsReceiver.make()
        receiver.respond(() => Reply.status(500))
        const org = yield* SvcTest.org()
        const { endpoint } = yield* org.client.notifications.create({ payload: { url: receiver.url("/outage") } })
        const events = [
          eventBody(org.orgId, "approval.requested"),
          eventBody(org.orgId, "approval.expiring"),
          eventBody(org.orgId, "approval.expired")
        ]
        yield* insertEvents(events)
        const failed = yield* waitForDeliveries(
          endpoint.id,
          (rows) => rows.length === 3 && rows.every((r) => r.status === "failed"),
          "three failed deliveries"
        )
        const since = new Date(Date.now() - 60_000).toISOString()
        const dry = yield* org.client.notifications.replayFailed({
          params: { id: endpoint.id },
          payload: { since, dry_run: true }
        })
        assert.deepStrictEqual(dry, { matched: 3, queued: 3, not_queued: 0 })
        assert.deepStrictEqual(
          (yield* deliveryRows(endpoint.id)).map((r) => [r.status, r.replays]),
          failed.map(() => ["failed", 0])
        )
        // A window that ends before them matches none.
        const before = yield* org.client.notifications.replayFailed({
          params: { id: endpoint.id },
          payload: { since, until: since }
        })
        assert.deepStrictEqual(before, { matched: 0, queued: 0, not_queued: 0 })
        const sent = receiver.requests().length
        receiver.respond(() => Reply.status(204))
        const done = yield* org.client.notifications.replayFailed({ params: { id: endpoint.id }, payload: { since } })
        assert.deepStrictEqual(done, { matched: 3, queued: 3, not_queued: 0 })
        const rows = yield* waitForDeliveries(
          endpoint.id,
          (rows) => rows.every((r) => r.status === "delivered"),
          "replayed deliveries delivered"
        )
        assert.deepStrictEqual(rows.map((r) => r.replays), [1, 1, 1])
        assert.deepStrictEqual(rows.map((r) => r.event_id), failed.map((r) => r.event_id))
        const replayed = receiver.requests().slice(sent)
        assert.deepStrictEqual(replayed.map((r) => r.headers["webhook-id"]).sort(), events.map((e) => e.id).sort())
      }).pipe(Effect.scoped))

    it.effect("respects the queue's capacity and the most one call takes: the rest is not_queued, still failed, and next_since says where it begins", () =>
      Effect.gen(function*() {
        const receiver = yield* HttpsReceiver.make()
        receiver.respond(() => Reply.status(500))
        const org = yield* SvcTest.org()
        const { endpoint } = yield* org.client.notifications.create({ payload: { url: receiver.url("/full") } })
        // Capacity 4: of seven events at once, three are recorded failed at once (queue full), four fail after retries.
        yield* insertEvents(Array.from({ length: 7 }, () => eventBody(org.orgId, "approval.requested")))
        yield* waitForDeliveries(
          endpoint.id,
          (rows) => rows.length === 7 && rows.every((r) => r.status === "failed"),
          "seven failed deliveries"
        )
        // Hold the receiver so replayed deliveries stay undelivered while we look.
        receiver.respond(() => Reply.hang())
        const since = new Date(Date.now() - 60_000).toISOString()
        const result = yield* org.client.notifications.replayFailed({ params: { id: endpoint.id }, payload: { since } })
        // At most 5 taken (SVC_WEBHOOK_REPLAY_MAX), of which 4 fit the queue.
        assert.strictEqual(result.matched, 7)
        assert.strictEqual(result.queued, 4)
        assert.strictEqual(result.not_queued, 3)
        assert.isString(result.next_since)
        const rows = yield* deliveryRows(endpoint.id)
        assert.strictEqual(rows.filter((r) => r.replays === 1).length, 4)
        assert.strictEqual(rows.filter((r) => r.status === "failed").length, 3)
        // The queue is full now: a second call queues nothing and says so.
        const again = yield* org.client.notifications.replayFailed({ params: { id: endpoint.id }, payload: { since } })
        assert.deepStrictEqual([again.matched, again.queued, again.not_queued], [3, 0, 3])
      }).pipe(Effect.scoped))

    it.effect("an inactive endpoint's failed deliveries are not replayed (409); since is checked (400 naming it)", () =>
      Effect.gen(function*() {
        const receiver = yield* HttpsReceiver.make()
        receiver.respond(() => Reply.status(410))
        const org = yield* SvcTest.org()
        const { endpoint } = yield* org.client.notifications.create({ payload: { url: receiver.url("/gone") } })
        yield* insertEvents([eventBody(org.orgId, "approval.requested")])
        yield* waitForDeliveries(endpoint.id, (rows) => rows[0]?.status === "failed", "a failed delivery")
        // Deactivated once the 410's attempt is recorded.
        yield* eventually(
          Effect.map(org.client.notifications.list(), ({ endpoints: [e] }) => e?.active === false ? true : undefined)
        )
        const since = new Date(Date.now() - 60_000).toISOString()
        const refused = yield* post(`/v1/notification-endpoints/${endpoint.id}/deliveries/replay`, org.key, { since })
        assert.strictEqual(refused.status, 409)
        assert.strictEqual(refused.json.code, "NOT_REPLAYABLE")
        const bad = yield* post(`/v1/notification-endpoints/${endpoint.id}/deliveries/replay`, org.key, {
          since: "yesterday"
        })
        assert.strictEqual(bad.status, 400)
        assert.strictEqual(bad.json.field, "since")
      }).pipe(Effect.scoped))
  })

  describe("statistics", () => {
    it.effect("over the last 24 hours: delivered, failed, pending, the success rate and attempt p50/p95, test deliveries left out", () =>
      Effect.gen(function*() {
        const receiver = yield* HttpsReceiver.make()
        const org = yield* SvcTest.org()
        const { endpoint } = yield* org.client.notifications.create({ payload: { url: receiver.url("/stats") } })
        const empty = yield* org.client.notifications.stats({ params: { id: endpoint.id } })
        assert.deepStrictEqual(
          [
            empty.delivered,
            empty.failed,
            empty.pending,
            empty.success_rate,
            empty.duration_ms_p50,
            empty.duration_ms_p95
          ],
          [0, 0, 0, null, null, null]
        )
        receiver.enqueue(Reply.ok(), Reply.ok(), Reply.ok(), Reply.status(410))
        yield* insertEvents([
          eventBody(org.orgId, "approval.requested"),
          eventBody(org.orgId, "approval.expiring"),
          eventBody(org.orgId, "approval.escalated")
        ])
        yield* waitForDeliveries(
          endpoint.id,
          (rows) => rows.length === 3 && rows.every((r) => r.status === "delivered"),
          "three delivered"
        )
        yield* insertEvents([eventBody(org.orgId, "approval.expired")])
        yield* waitForDeliveries(endpoint.id, (rows) => rows.length === 4 && rows[3]!.status === "failed", "one failed")
        receiver.respond(() => Reply.status(204))
        yield* org.client.notifications.test({ params: { id: endpoint.id }, payload: {} }).pipe(Effect.ignore)
        const stats = yield* org.client.notifications.stats({ params: { id: endpoint.id } })
        assert.deepStrictEqual([stats.delivered, stats.failed, stats.pending, stats.success_rate], [3, 1, 0, 0.75])
        assert.isNumber(stats.duration_ms_p50)
        assert.isAtLeast(stats.duration_ms_p95!, stats.duration_ms_p50!)
        assert.isAtMost(Math.abs(Date.parse(stats.since) - (Date.now() - 24 * 3600_000)), 60_000)
        const other = yield* SvcTest.org()
        const hidden = yield* Effect.flip(other.client.notifications.stats({ params: { id: endpoint.id } }))
        assert.strictEqual(hidden._tag, "NotFound")
      }).pipe(Effect.scoped))
  })
})
