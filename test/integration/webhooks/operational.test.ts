/**
 * Operational events: `endpoint.failing` (an endpoint entered a cooldown
 * after having been healthy; once per failing streak) and
 * `endpoint.disabled` (a 410 deactivated it), signed like every delivery,
 * sent to the organization's other endpoints that subscribed to them and
 * never to the endpoint they are about nor by default.
 */
import * as NodeServices from "@effect/platform-node/NodeServices"
import { PgMigrator } from "@effect/sql-pg"
import { assert, describe, it, layer } from "@effect/vitest"
import { Duration, Effect, Layer } from "effect"
import { Migrator, SqlClient } from "effect/sql"
import { Webhook as StandardWebhook } from "standardwebhooks"
import { constructEvent, type EndpointEvent } from "../../../packages/receiver/src/index.ts"
import { Migrations } from "../../../src/database/Migrations.ts"
import { migrationRecord } from "../../../src/database/migrations/index.ts"
import { SvcTest } from "../../../src/testing.ts"
import { databases } from "../../support/databases.ts"
import { eventually } from "../../support/http.ts"
import { HttpsReceiver, type ReceivedRequest, Reply } from "../../support/HttpsReceiver.ts"
import { eventBody, insertEvents, waitForDeliveries, webhookService } from "./support.ts"

const text = (bytes: Uint8Array) => new TextDecoder().decode(bytes)
const OPERATIONAL = ["endpoint.failing", "endpoint.disabled"] as const

const operationalEvents = (endpointId: string) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    return yield* sql<{ type: string }>`SELECT type FROM events WHERE about_endpoint = ${endpointId} ORDER BY seq`
  }).pipe(Effect.orDie)

const typesAt = (receiver: HttpsReceiver["Service"], path: string) =>
  receiver.requests().filter((r) => r.path === path).map((r) => r.headers["x-svc-event-type"])

const verifyStandard = (request: ReceivedRequest, secret: string) =>
  new StandardWebhook(secret).verify(text(request.body), {
    "webhook-id": request.headers["webhook-id"]!,
    "webhook-timestamp": request.headers["webhook-timestamp"]!,
    "webhook-signature": request.headers["webhook-signature"]!
  })

layer(
  webhookService({
    webhookCooldownAfter: 2,
    webhookCooldownBase: Duration.millis(200),
    webhookCooldownMax: Duration.millis(400)
  }),
  { excludeTestServices: true }
)("operational events", (it) => {
  describe("endpoint.failing", () => {
    it.effect("sent once per failing streak to the other subscribed endpoints, signed, never to the failing one nor by default; a success ends the streak", () =>
      Effect.gen(function*() {
        const receiver = yield* HttpsReceiver.make()
        receiver.respond((request) => request.path === "/failing" ? Reply.status(500) : Reply.status(204))
        const org = yield* SvcTest.org()
        const failing = yield* org.client.notifications.create({
          payload: { url: receiver.url("/failing"), events: ["approval.requested", ...OPERATIONAL] }
        })
        const admin = yield* org.client.notifications.create({
          payload: { url: receiver.url("/admin"), events: [...OPERATIONAL] }
        })
        yield* org.client.notifications.create({ payload: { url: receiver.url("/default") } })

        yield* insertEvents([eventBody(org.orgId, "approval.requested")])
        yield* waitForDeliveries(
          failing.endpoint.id,
          (rows) => rows[0]?.status === "failed",
          "the delivery failed for good"
        )
        const notice = yield* receiver.waitFor((r) => r.path === "/admin", Duration.seconds(20))
        assert.strictEqual(notice.headers["x-svc-event-type"], "endpoint.failing")
        verifyStandard(notice, admin.secret)
        const event = (yield* Effect.promise(() =>
          constructEvent(notice.body, notice.headers["x-svc-signature"], admin.secret, { expectedOrgId: org.orgId })
        )) as EndpointEvent
        assert.strictEqual(event.type, "endpoint.failing")
        assert.strictEqual(event.endpoint.id, failing.endpoint.id)
        assert.strictEqual(event.endpoint.url_hint, failing.endpoint.url_hint)
        assert.match(event.endpoint.reason, /consecutive failed attempts; last: HTTP 500/)
        assert.strictEqual(event.endpoint.active, true)
        assert.isString(event.endpoint.failing_since)
        assert.strictEqual(notice.headers["webhook-id"], event.id)
        // Four failed attempts, one notice; the API shows the streak.
        assert.deepStrictEqual(
          (yield* operationalEvents(failing.endpoint.id)).map((e) =>
            e.type
          ),
          ["endpoint.failing"]
        )
        const listed = (yield* org.client.notifications.list()).endpoints.find((e) => e.id === failing.endpoint.id)!
        assert.isString(listed.failing_since)

        // A success ends the streak; the next streak is told again.
        receiver.respond((request) => Reply.status(request.path === "/failing" && request.index > 1000 ? 500 : 204))
        yield* insertEvents([eventBody(org.orgId, "approval.requested")])
        yield* waitForDeliveries(failing.endpoint.id, (rows) => rows[1]?.status === "delivered", "delivered again")
        yield* eventually(
          Effect.map(org.client.notifications.list().pipe(Effect.orDie), ({ endpoints }) =>
            endpoints.find((e) =>
                e.id === failing.endpoint.id
              )!.failing_since === undefined
              ? true
              : undefined),
          { what: "the failing streak ended", timeoutMs: 10_000, intervalMs: 50 }
        )
        receiver.respond((request) => request.path === "/failing" ? Reply.status(503) : Reply.status(204))
        yield* insertEvents([eventBody(org.orgId, "approval.requested")])
        yield* waitForDeliveries(failing.endpoint.id, (rows) => rows[2]?.status === "failed", "failed again")
        yield* eventually(
          Effect.sync(() => typesAt(receiver, "/admin").length === 2 ? true : undefined),
          { what: "a second notice", timeoutMs: 20_000, intervalMs: 50 }
        )
        assert.deepStrictEqual((yield* operationalEvents(failing.endpoint.id)).map((e) => e.type), [
          "endpoint.failing",
          "endpoint.failing"
        ])
        // Never to the endpoint it is about, nor to one with the default subscription.
        assert.deepStrictEqual([...new Set(typesAt(receiver, "/failing"))], ["approval.requested"])
        assert.deepStrictEqual([...new Set(typesAt(receiver, "/default"))], ["approval.requested"])
      }).pipe(Effect.scoped))
  })

  describe("endpoint.disabled", () => {
    it.effect("a 410 deactivates the endpoint and tells the other subscribed endpoints why, once", () =>
      Effect.gen(function*() {
        const receiver = yield* HttpsReceiver.make()
        receiver.respond((request) => request.path === "/gone" ? Reply.status(410) : Reply.status(204))
        const org = yield* SvcTest.org()
        const gone = yield* org.client.notifications.create({
          payload: { url: receiver.url("/gone"), events: ["approval.requested", "endpoint.disabled"] }
        })
        const admin = yield* org.client.notifications.create({
          payload: { url: receiver.url("/admin"), events: ["endpoint.disabled"] }
        })
        yield* insertEvents([eventBody(org.orgId, "approval.requested"), eventBody(org.orgId, "approval.requested")])
        const notice = yield* receiver.waitFor((r) => r.path === "/admin", Duration.seconds(20))
        const event = (yield* Effect.promise(() =>
          constructEvent(notice.body, notice.headers["x-svc-signature"], admin.secret)
        )) as EndpointEvent
        assert.strictEqual(event.type, "endpoint.disabled")
        assert.deepStrictEqual(
          [event.endpoint.id, event.endpoint.active, event.endpoint.reason],
          [gone.endpoint.id, false, "the receiver answered 410 Gone"]
        )
        assert.isString(event.endpoint.deactivated_at)
        verifyStandard(notice, admin.secret)
        yield* waitForDeliveries(gone.endpoint.id, (rows) =>
          rows.length === 2 && rows.every((r) =>
            r.status === "failed"
          ), "both failed")
        assert.deepStrictEqual(
          (yield* operationalEvents(gone.endpoint.id)).map((e) =>
            e.type
          ),
          ["endpoint.disabled"]
        )
        // Both approval events may have been in flight when the 410 came; never the notice about itself.
        assert.deepStrictEqual([...new Set(typesAt(receiver, "/gone"))], ["approval.requested"])
      }).pipe(Effect.scoped))
  })
})

layer(
  webhookService({
    webhookRetrySchedule: Array.from({ length: 10 }, () => Duration.millis(100)),
    webhookCooldownAfter: 2,
    webhookCooldownBase: Duration.millis(200),
    webhookCooldownMax: Duration.millis(400),
    webhookDisableAfter: Duration.seconds(1)
  }),
  { excludeTestServices: true }
)("operational events: giving up", (it) => {
  it.effect("an endpoint failing for SVC_WEBHOOK_DISABLE_AFTER without a success is deactivated and endpoint.disabled says why", () =>
    Effect.gen(function*() {
      const receiver = yield* HttpsReceiver.make()
      receiver.respond((request) => request.path === "/down" ? Reply.status(502) : Reply.status(204))
      const org = yield* SvcTest.org()
      const down = yield* org.client.notifications.create({ payload: { url: receiver.url("/down") } })
      const admin = yield* org.client.notifications.create({
        payload: { url: receiver.url("/admin"), events: [...OPERATIONAL] }
      })
      yield* insertEvents([eventBody(org.orgId, "approval.requested")])
      const [row] = yield* waitForDeliveries(
        down.endpoint.id,
        (rows) => rows[0]?.status === "failed",
        "the delivery failed",
        30_000
      )
      assert.match(row!.last_error!, /endpoint deactivated: no successful delivery for .*SVC_WEBHOOK_DISABLE_AFTER/)
      // Fewer attempts than the schedule allows: svc gave up on the endpoint.
      assert.isBelow(row!.attempts, 11)
      const endpoint = (yield* org.client.notifications.list()).endpoints.find((e) => e.id === down.endpoint.id)!
      assert.strictEqual(endpoint.active, false)
      assert.match(endpoint.deactivated_reason!, /SVC_WEBHOOK_DISABLE_AFTER/)
      yield* eventually(
        Effect.sync(() => typesAt(receiver, "/admin").length === 2 ? true : undefined),
        { what: "two notices", timeoutMs: 20_000, intervalMs: 50 }
      )
      assert.deepStrictEqual(typesAt(receiver, "/admin"), ["endpoint.failing", "endpoint.disabled"])
      const notice = receiver.requests().filter((r) => r.path === "/admin")[1]!
      const event = (yield* Effect.promise(() =>
        constructEvent(notice.body, notice.headers["x-svc-signature"], admin.secret)
      )) as EndpointEvent
      assert.strictEqual(event.endpoint.active, false)
      assert.match(event.endpoint.reason, /SVC_WEBHOOK_DISABLE_AFTER/)
      // The streak is kept while it is disabled; a PATCH reactivates it and ends the streak (a new one, a new notice).
      assert.isString(endpoint.failing_since)
      const reactivated = yield* org.client.notifications.update({ params: { id: down.endpoint.id }, payload: {} })
      assert.strictEqual(reactivated.active, true)
      assert.isUndefined(reactivated.failing_since)
      const active = yield* org.client.notifications.update({ params: { id: admin.endpoint.id }, payload: {} })
      assert.isUndefined(active.failing_since)
    }).pipe(Effect.scoped))
})

describe("a failing streak stored on the endpoint before health moved to its delivery target", () => {
  const before = Object.fromEntries(Object.entries(migrationRecord).filter(([key]) => key < "0870"))
  for (const [name, database] of databases) {
    it.live(
      `moves to the target's row, made when it had none; the endpoint's column is gone (${name})`,
      () =>
        Effect.gen(function*() {
          yield* PgMigrator.run({ loader: Migrator.fromRecord(before), table: "svc_migrations" }).pipe(
            Effect.provide(NodeServices.layer)
          )
          const sql = yield* SqlClient.SqlClient
          const orgId = "00000000-0000-4000-8000-000000000870"
          const [withTarget, without, healthy] = ["871", "872", "873"].map((n) =>
            `00000000-0000-4000-8000-000000000${n}`
          )
          yield* sql`INSERT INTO orgs (id, name) VALUES (${orgId}, 'health')`
          yield* sql`
          INSERT INTO notification_endpoints (id, org_id, url, url_hint, events, created_by, failing_since)
          VALUES (${withTarget}, ${orgId}, 'u', 'h', '[]', 'k', '2026-01-01T00:00:00Z'),
                 (${without}, ${orgId}, 'u', 'h', '[]', 'k', '2026-01-02T00:00:00Z'),
                 (${healthy}, ${orgId}, 'u', 'h', '[]', 'k', NULL)
        `
          yield* sql`INSERT INTO delivery_targets (id, org_id, kind, consecutive_failures) VALUES (${withTarget}, ${orgId}, 'webhook', 4)`
          yield* Migrations.run
          const targets = yield* sql<{ id: string; failing_since: Date | string | null; consecutive_failures: number }>`
          SELECT id, failing_since, consecutive_failures FROM delivery_targets
          -- Later migrations give every endpoint a target row (0960): those with no health to move hold none.
          WHERE failing_since IS NOT NULL OR consecutive_failures > 0 ORDER BY id
        `
          assert.deepStrictEqual(
            targets.map((t) => [t.id, new Date(t.failing_since!).toISOString(), t.consecutive_failures]),
            [
              [withTarget, "2026-01-01T00:00:00.000Z", 4],
              [without, "2026-01-02T00:00:00.000Z", 0]
            ]
          )
          const old = yield* sql`
          SELECT 1 FROM information_schema.columns WHERE table_name = 'notification_endpoints' AND column_name = 'failing_since'
        `
          assert.deepStrictEqual(old, [])
        }).pipe(Effect.provide(Layer.fresh(database()))),
      60_000
    )
  }
})
