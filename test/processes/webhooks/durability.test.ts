/**
 * Durability with real `svc` processes: `kill -9` during
 * delivery and a restart lose nothing; several processes on one PostgreSQL
 * server share the work with no duplicate outside a crash. Also the CLI's
 * reviewer-email command.
 */
import { PgClient } from "@effect/sql-pg"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Redacted } from "effect"
import { SqlClient } from "effect/sql"
import { randomBytes } from "node:crypto"
import { Database } from "../../../src/database/Database.ts"
import { UNSETTLED_PER_TARGET } from "../../../src/deliveries/worker/Admission.ts"
import { PER_ENDPOINT } from "../../../src/notifications/send/Sender.ts"
import { type EventBody, eventBody } from "../../integration/webhooks/support.ts"
import { onServerRun } from "../../support/databases.ts"
import { eventually } from "../../support/http.ts"
import { HttpsReceiver, Reply } from "../../support/HttpsReceiver.ts"
import { postgresBin, privatePostgres } from "../../support/privatePostgres.ts"
import {
  cli,
  type RunningServer,
  scratchDatabaseUrl,
  seededDataDir,
  startServer,
  startServers
} from "../../support/process.ts"
import { TestTls } from "../../support/tls.ts"

const json = (stdout: string) => JSON.parse(stdout.trim().split("\n").at(-1)!)

const api = (server: RunningServer, key: string, route: string, init: { method?: string; body?: unknown } = {}) =>
  Effect.promise(async () => {
    const response = await fetch(`${server.baseUrl}${route}`, {
      method: init.method ?? "GET",
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
      ...(init.body === undefined ? {} : { body: JSON.stringify(init.body) })
    })
    return { status: response.status, json: await response.json().catch(() => undefined) as any }
  })

/** Writes events in chunks, as the approvals capability would, through `sql`. */
const writeEvents = (events: ReadonlyArray<EventBody>) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    for (let i = 0; i < events.length; i += 500) {
      const rows = events.slice(i, i + 500).map((event): Record<string, unknown> => ({
        id: event.id,
        org_id: event.org_id,
        type: event.type,
        occurred_at: event.occurred_at,
        body: JSON.stringify(event)
      }))
      yield* sql`INSERT INTO events ${sql.insert(rows as [Record<string, unknown>, ...Array<Record<string, unknown>>])}`
    }
  }).pipe(Effect.orDie)

const deliveryStatus = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const [row] = yield* sql<{ total: number; delivered: number; events: number; undispatched: number }>`
    SELECT (SELECT count(*)::int FROM deliveries WHERE kind = 'webhook') AS total,
           (SELECT count(*)::int FROM delivery_records WHERE kind = 'webhook' AND status = 'delivered') AS delivered,
           (SELECT count(DISTINCT event_id)::int FROM deliveries WHERE kind = 'webhook') AS events,
           (SELECT count(*)::int FROM undispatched_events) AS undispatched
  `
  return row!
}).pipe(Effect.orDie)

const DELIVERY_STATUS = `
    SELECT (SELECT count(*)::int FROM deliveries WHERE kind = 'webhook') AS total,
           (SELECT count(*)::int FROM delivery_records WHERE kind = 'webhook' AND status = 'delivered') AS delivered,
           (SELECT count(DISTINCT event_id)::int FROM deliveries WHERE kind = 'webhook') AS events,
           (SELECT count(*)::int FROM undispatched_events) AS undispatched`

const deliveryStatusThroughCli = (env: Record<string, string>) =>
  Effect.promise(async () => {
    const answer = await cli(["db", "query", DELIVERY_STATUS, "--json"], env)
    assert.strictEqual(answer.code, 0, answer.stderr)
    return json(answer.stdout).rows[0] as { total: number; delivered: number; events: number; undispatched: number }
  })

const countIds = (requests: ReadonlyArray<{ headers: Readonly<Record<string, string>> }>) => {
  const counts = new Map<string, number>()
  for (const request of requests) {
    const id = request.headers["x-svc-event-id"]!
    counts.set(id, (counts.get(id) ?? 0) + 1)
  }
  return counts
}

const stop = (server: RunningServer) =>
  Effect.promise(async () => {
    server.child.kill("SIGTERM")
    await server.exited.catch(() => undefined)
  })

const fastEnv = (caFile: string) => ({
  SVC_ALLOWED_TARGET_CIDRS: "127.0.0.0/8",
  SVC_EXTRA_CA_FILE: caFile,
  // Longer than a send may take (5 s) plus its bookkeeping, as the lease
  // must be: a shorter one expires under a busy machine while the send is
  // still in flight, and the same process sends the delivery again. And
  // long enough (over twice the send time plus the margin) that the worker
  // claims ahead of its free slots, as it does with the default lease: a
  // crash then also leaves claimed deliveries that never started.
  SVC_WEBHOOK_LEASE: "15s",
  SVC_WEBHOOK_RETRY_SCHEDULE: "200ms,200ms,200ms,200ms,200ms"
})

describe.skipIf(onServerRun)("the service as processes on an embedded data directory", () => {
  it.live(
    "the CLI sets the reviewer address; kill -9 during delivery and a restart lose no event",
    () =>
      Effect.gen(function*() {
        const tls = yield* TestTls.shared
        const dataDir = seededDataDir("svc-webhooks-")
        const env = { SVC_DATA_DIR: dataDir, DATABASE_URL: "", ...fastEnv(tls.caFile) }
        const org = json(
          (yield* Effect.promise(() => cli(["orgs", "create", "--name", "durable", "--json"], env))).stdout
        )
        const key = json(
          (yield* Effect.promise(() =>
            cli(["keys", "create", "--org", org.id, "--scopes", "org_config.read,org_config.write", "--json"], env)
          )).stdout
        ).key

        const set = yield* Effect.promise(() =>
          cli(["notifications", "reviewer-email", "--org", org.id, "--email", "reviewers@example.com", "--json"], env)
        )
        assert.strictEqual(set.code, 0, set.stderr)
        assert.deepStrictEqual(json(set.stdout), { org_id: org.id, reviewer_email: "reviewers@example.com" })
        const bad = yield* Effect.promise(() =>
          cli(["notifications", "reviewer-email", "--org", org.id, "--email", "nope", "--json"], env)
        )
        assert.notStrictEqual(bad.code, 0)

        // Slow-ish answers keep deliveries in flight when the process dies.
        const receiver = yield* HttpsReceiver.make({ respond: () => Reply.delayed(40) })
        let server = yield* Effect.promise(() => startServer(env))
        try {
          const settings = yield* api(server, key, "/v1/notification-settings")
          // The operator's address needs no confirmation mail.
          assert.deepStrictEqual(settings.json, {
            reviewer_email: "reviewers@example.com",
            reviewer_email_status: "confirmed",
            email_notifier: false
          })
          const created = yield* api(server, key, "/v1/notification-endpoints", {
            method: "POST",
            body: { url: receiver.url("/durable") }
          })
          assert.strictEqual(created.status, 201)

          // Nothing outside the server reaches its database: the events go into
          // the data directory while no server runs, and the next one delivers them.
          yield* stop(server)
          const events = Array.from({ length: 300 }, () => eventBody(org.id, "approval.requested"))
          yield* writeEvents(events).pipe(Effect.provide(Database.embedded(dataDir)), Effect.scoped)
          server = yield* Effect.promise(() => startServer(env))
          yield* receiver.waitForRequests(60, "30 seconds")
          server.child.kill("SIGKILL")
          yield* Effect.promise(() => server.exited.catch(() => undefined))
          const beforeRestart = receiver.requests().length
          assert.isBelow(beforeRestart, 300, "the kill came during delivery")

          server = yield* Effect.promise(() => startServer(env))
          // Every event reached the receiver (watched here: a CLI run costs a
          // Node start), then the records are read through the running
          // server's admin channel (`db query`).
          yield* eventually(
            Effect.sync(() => countIds(receiver.requests()).size === 300 ? true : undefined),
            { timeoutMs: 90_000, intervalMs: 250, what: "all 300 events received after the restart" }
          )
          const status = yield* eventually(
            Effect.map(deliveryStatusThroughCli(env), (s) => s.delivered === 300 ? s : undefined),
            { timeoutMs: 30_000, intervalMs: 500, what: "all 300 deliveries recorded as delivered" }
          )
          // Each event fanned out exactly once, none left behind.
          assert.deepStrictEqual(status, { total: 300, delivered: 300, events: 300, undispatched: 0 })
          const counts = countIds(receiver.requests())
          assert.sameMembers([...counts.keys()], events.map((e) => e.id))
          // At least once: only deliveries sent and not yet recorded at the kill
          // may arrive twice, at most UNSETTLED_PER_TARGET times the endpoint's
          // in-flight limit (those in flight, and those finished whose outcome
          // was still being written).
          const twice = [...counts.values()].filter((n) => n > 1).length
          assert.isAtMost(twice, UNSETTLED_PER_TARGET * PER_ENDPOINT)
        } finally {
          yield* stop(server)
        }
      }).pipe(Effect.scoped),
    180_000
  )
})

const serverUrl = process.env.TEST_DATABASE_URL

describe.skipIf(!serverUrl)("several processes on one PostgreSQL server", () => {
  it.live("three processes deliver 5 000 events with no loss and no duplicate", () =>
    Effect.gen(function*() {
      const tls = yield* TestTls.shared
      const url = yield* scratchDatabaseUrl("svc_webhooks")
      const env = { DATABASE_URL: url, SVC_MASTER_KEY: Buffer.alloc(32, 9).toString("base64"), ...fastEnv(tls.caFile) }
      const org = json((yield* Effect.promise(() => cli(["orgs", "create", "--name", "pg", "--json"], env))).stdout)
      const key = json(
        (yield* Effect.promise(() =>
          cli(["keys", "create", "--org", org.id, "--scopes", "org_config.read,org_config.write", "--json"], env)
        )).stdout
      ).key
      const receiver = yield* HttpsReceiver.make()
      // One, then two more started together beside it.
      const servers = [...(yield* startServers(env, 1)), ...(yield* startServers(env, 2))]
      const created = yield* api(servers[0]!, key, "/v1/notification-endpoints", {
        method: "POST",
        body: { url: receiver.url("/pg") }
      })
      assert.strictEqual(created.status, 201)
      const db = PgClient.layer({ url: Redacted.make(url), maxConnections: 2 })
      const events = Array.from({ length: 5_000 }, () => eventBody(org.id, "approval.requested"))
      yield* writeEvents(events).pipe(Effect.provide(db))
      const status = yield* eventually(
        Effect.map(deliveryStatus, (s) => s.delivered === 5_000 ? s : undefined).pipe(Effect.provide(db)),
        { timeoutMs: 150_000, intervalMs: 500, what: "5 000 deliveries" }
      )
      assert.deepStrictEqual(status, { total: 5_000, delivered: 5_000, events: 5_000, undispatched: 0 })
      const counts = countIds(receiver.requests())
      assert.strictEqual(counts.size, 5_000)
      assert.strictEqual(receiver.requests().length, 5_000, "no duplicate without a crash")
      // The work was shared.
      const attempts = yield* Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        return yield* sql<{ n: number }>`SELECT count(*)::int AS n FROM delivery_attempt_records`
      }).pipe(Effect.provide(db), Effect.orDie)
      assert.strictEqual(attempts[0]!.n, 5_000)
    }).pipe(Effect.scoped), 240_000)
})

// A server of the test's own, so crashing it never disturbs the shared one.
describe.skipIf(!serverUrl || postgresBin === undefined)("a crash and restart of PostgreSQL", () => {
  it.live(
    "during delivery loses no event and sends none twice: outcomes the crash kept from the database are recorded when it is back",
    () =>
      Effect.gen(function*() {
        const tls = yield* TestTls.shared
        const pg = yield* privatePostgres
        const env = { DATABASE_URL: pg.url, SVC_MASTER_KEY: randomBytes(32).toString("base64"), ...fastEnv(tls.caFile) }
        const receiver = yield* HttpsReceiver.make({ respond: () => Reply.delayed(40) })
        const database = Database.server(Redacted.make(pg.url), 2)
        const server = yield* Effect.promise(() => startServer(env))
        try {
          const org = json(
            (yield* Effect.promise(() => cli(["orgs", "create", "--name", "pg-restart", "--json"], env))).stdout
          )
          const key = json(
            (yield* Effect.promise(() =>
              cli(["keys", "create", "--org", org.id, "--scopes", "org_config.write", "--json"], env)
            )).stdout
          ).key
          const created = yield* api(server, key, "/v1/notification-endpoints", {
            method: "POST",
            body: { url: receiver.url("/pg-restart") }
          })
          assert.strictEqual(created.status, 201)

          const events = Array.from({ length: 300 }, () => eventBody(org.id, "approval.requested"))
          yield* writeEvents(events).pipe(Effect.provide(database))
          yield* receiver.waitForRequests(60, "30 seconds")
          // Down for a few seconds: the sends in flight finish meanwhile, and
          // their outcomes cannot be recorded until it is back.
          yield* pg.crash
          const atCrash = receiver.requests().length
          yield* Effect.sleep("3 seconds")
          yield* pg.start
          assert.isBelow(atCrash, 300, "the crash came during delivery")

          const status = yield* eventually(
            Effect.map(deliveryStatus, (s) => s.delivered === 300 ? s : undefined).pipe(Effect.provide(database)),
            { timeoutMs: 90_000, intervalMs: 500, what: "all 300 deliveries delivered after PostgreSQL came back" }
          )
          assert.deepStrictEqual(status, { total: 300, delivered: 300, events: 300, undispatched: 0 })
          const counts = countIds(receiver.requests())
          assert.sameMembers([...counts.keys()], events.map((e) => e.id))
          // The process lived through the outage and kept what it had sent:
          // no delivery waited for its lease to run out and went out again.
          assert.deepStrictEqual([...counts.values()].filter((n) => n > 1), [], "no delivery arrived twice")
          assert.strictEqual(receiver.requests().length, 300)
        } finally {
          yield* stop(server)
        }
      }).pipe(Effect.scoped),
    180_000
  )
})
