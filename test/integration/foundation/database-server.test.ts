/**
 * On a PostgreSQL server: sessions carry
 * timeouts and TCP keepalive so a stuck statement, transaction or peer
 * fails a request instead of hanging it; while the database is
 * unreachable the API answers 503 with Retry-After and `/ready` says why.
 */
import { PgClient } from "@effect/sql-pg"
import { assert, describe, it } from "@effect/vitest"
import { Cause, Context, Duration, Effect, Exit, Fiber, Layer, Option, Redacted } from "effect"
import { SqlClient, SqlError } from "effect/sql"
import { randomBytes } from "node:crypto"
import * as fs from "node:fs"
import { Database } from "../../../src/database/Database.ts"
import { Migrations } from "../../../src/database/Migrations.ts"
import { type Topic, Topics, Wakeups } from "../../../src/database/Wakeups.ts"
import { SvcConfig } from "../../../src/platform/Config.ts"
import { eventually, raw } from "../../support/http.ts"
import { postgresBin, privatePostgres } from "../../support/privatePostgres.ts"
import { cli, type RunningServer, scratchDatabaseUrl, startServer } from "../../support/process.ts"

const serverUrl = process.env.TEST_DATABASE_URL

/** Established TCP connections of this process to `port`, with whether their keepalive timer runs (Linux). */
const connectionsTo = (port: number) => {
  const inodes = new Set<string>()
  for (const fd of fs.readdirSync("/proc/self/fd")) {
    try {
      const match = /^socket:\[(\d+)\]$/.exec(fs.readlinkSync(`/proc/self/fd/${fd}`))
      if (match) inodes.add(match[1]!)
    } catch {
      // closed meanwhile
    }
  }
  const found: Array<{ keepalive: boolean }> = []
  for (const table of ["/proc/net/tcp", "/proc/net/tcp6"]) {
    for (const line of fs.readFileSync(table, "utf8").split("\n").slice(1)) {
      const columns = line.trim().split(/\s+/)
      // rem_address is column 2, st (01 = ESTABLISHED) column 3, tr:when column 5 (02: keepalive timer), inode column 9.
      if (columns[3] !== "01" || !inodes.has(columns[9] ?? "")) continue
      if (parseInt(columns[2]!.split(":")[1]!, 16) !== port) continue
      found.push({ keepalive: columns[5]!.startsWith("02") })
    }
  }
  return found
}

/** The service's database layer from configuration, on the database at `url`, with short timeouts. */
const configuredAt = (url: string, idleInTransaction = Duration.seconds(1)) =>
  Database.layer.pipe(
    Layer.provideMerge(SvcConfig.layerWith({
      databaseUrl: Option.some(Redacted.make(url)),
      dbStatementTimeout: Duration.seconds(1),
      dbIdleInTransactionTimeout: idleInTransaction,
      dbKeepAlive: Duration.seconds(30)
    }))
  )

/** The same on a fresh database of the server. */
const configured = Layer.unwrap(Effect.map(scratchDatabaseUrl("svc_sessions"), configuredAt))

describe.skipIf(!serverUrl)("sessions on a PostgreSQL server", () => {
  it.live(
    "every session runs with the configured statement_timeout and idle_in_transaction_session_timeout, over a connection with TCP keepalive",
    () =>
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        const [settings] = yield* sql<{ statement: string; idle: string }>`
        SELECT current_setting('statement_timeout') AS statement,
               current_setting('idle_in_transaction_session_timeout') AS idle
      `
        assert.deepStrictEqual(settings, { statement: "1s", idle: "1s" })
        if (process.platform === "linux") {
          const connections = connectionsTo(Number(new URL(serverUrl!).port || 5432))
          assert.isAbove(connections.length, 0)
          assert.isTrue(connections.every((connection) => connection.keepalive), "keepalive timer on every connection")
        }
      }).pipe(Effect.provide(configured), Effect.orDie),
    60_000
  )

  it.live("a statement that runs past statement_timeout fails instead of hanging", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const started = Date.now()
      const error = yield* sql`SELECT pg_sleep(60)`.pipe(Effect.flip)
      assert.isTrue(SqlError.isSqlError(error))
      assert.strictEqual(error.reason._tag, "StatementTimeoutError")
      assert.isBelow(Date.now() - started, 15_000)
      // The connection serves the next statement.
      assert.strictEqual((yield* sql<{ n: number }>`SELECT 1 AS n`)[0]!.n, 1)
    }).pipe(Effect.provide(configured)), 60_000)

  it.live(
    "a transaction left idle past idle_in_transaction_session_timeout is ended by the server, and the next statement gets a working connection",
    () =>
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        const exit = yield* sql.withTransaction(Effect.gen(function*() {
          yield* sql`SELECT 1`
          yield* Effect.sleep("3 seconds")
          yield* sql`SELECT 2`
        })).pipe(Effect.exit)
        assert.isTrue(Exit.isFailure(exit))
        // The server's own words (25P03), as an error or a defect (the rollback cannot run on a closed session).
        assert.include(Exit.isFailure(exit) ? Cause.pretty(exit.cause) : "", "idle-in-transaction timeout")
        const after = yield* eventually(
          sql<{ n: number }>`SELECT 3 AS n`.pipe(
            Effect.map((rows) => rows[0]?.n),
            Effect.catch(() => Effect.succeed(undefined))
          ),
          { timeoutMs: 15_000, intervalMs: 100, what: "a working connection" }
        )
        assert.strictEqual(after, 3)
      }).pipe(Effect.provide(configured)),
    60_000
  )

  it.live(
    "migrations are not cut by statement_timeout: they wait for another process's migrations as long as it takes",
    () =>
      Effect.gen(function*() {
        const url = yield* scratchDatabaseUrl("svc_migrate")
        yield* Effect.gen(function*() {
          const sql = yield* SqlClient.SqlClient
          yield* Migrations.run
          // Another process's migrations hold the table for longer than the
          // statement timeout (this session has none).
          const holder = yield* Effect.gen(function*() {
            const other = yield* SqlClient.SqlClient
            yield* other.withTransaction(
              other`LOCK TABLE svc_migrations IN ACCESS EXCLUSIVE MODE`.pipe(Effect.andThen(other`SELECT pg_sleep(3)`))
            )
          }).pipe(Effect.provide(PgClient.layer({ url: Redacted.make(url), maxConnections: 1 })), Effect.forkChild)
          yield* eventually(
            sql<{ n: number }>`
            SELECT count(*)::int AS n FROM pg_locks l JOIN pg_class c ON c.oid = l.relation
            WHERE c.relname = 'svc_migrations' AND l.mode = 'AccessExclusiveLock' AND l.granted
          `.pipe(Effect.map((rows) => rows[0]!.n > 0 ? true : undefined)),
            { timeoutMs: 15_000, what: "the other session to hold the migrations table" }
          )
          const started = Date.now()
          assert.deepStrictEqual(yield* Migrations.run, [])
          assert.isAbove(Date.now() - started, 1_000, "it waited past the 1 s statement timeout")
          yield* Fiber.join(holder)
          // The migrations run as one transaction: on a loaded machine a pause
          // of this process between two of its statements passed a 1 s
          // idle-in-transaction timeout, which is not what this test is about.
        }).pipe(Effect.provide(configuredAt(url, Duration.seconds(30))))
      }).pipe(Effect.scoped, Effect.orDie),
    60_000
  )
})

const api = (server: RunningServer, key: string, route: string, init: { method?: string; body?: unknown } = {}) =>
  raw(`${server.baseUrl}${route}`, {
    method: init.method ?? "GET",
    headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
    ...(init.body === undefined ? {} : { body: JSON.stringify(init.body) })
  })

const json = (stdout: string) => JSON.parse(stdout.trim().split("\n").at(-1)!)

// A server of the test's own, so stopping it never disturbs the shared one.
describe.skipIf(!serverUrl || postgresBin === undefined)("while the database is unreachable", () => {
  it.live(
    "API requests answer 503 SERVICE_UNAVAILABLE with Retry-After, /ready says why, and both recover when it is back",
    () =>
      Effect.gen(function*() {
        const pg = yield* privatePostgres
        const env = { DATABASE_URL: pg.url, SVC_MASTER_KEY: randomBytes(32).toString("base64") }
        const org = json(
          (yield* Effect.promise(() => cli(["orgs", "create", "--name", "outage", "--json"], env))).stdout
        )
        const key = json(
          (yield* Effect.promise(() =>
            cli(["keys", "create", "--org", org.id, "--scopes", "tasks.read,tasks.write", "--json"], env)
          )).stdout
        ).key
        const server = yield* Effect.acquireRelease(
          Effect.promise(() => startServer(env)),
          (server) =>
            Effect.promise(async () => {
              server.child.kill("SIGTERM")
              await server.exited
            })
        )
        assert.strictEqual((yield* api(server, key, "/v1/tasks")).status, 200)

        yield* pg.stop
        for (
          const request of [{ route: "/v1/tasks" }, {
            route: "/v1/tasks",
            method: "POST",
            body: { name: "t", answer_schema: { type: "object" } }
          }]
        ) {
          const down = yield* api(server, key, request.route, request)
          assert.strictEqual(down.status, 503, JSON.stringify(down.json))
          assert.strictEqual(down.headers.get("retry-after"), "5")
          assert.match(down.headers.get("content-type") ?? "", /^application\/problem\+json/)
          assert.strictEqual(down.json.code, "SERVICE_UNAVAILABLE")
          assert.strictEqual(down.json.type, "urn:svc:problem:service-unavailable")
          assert.include(down.json.detail, "cannot reach its database")
        }
        const notReady = yield* api(server, key, "/ready")
        assert.strictEqual(notReady.status, 503)
        assert.strictEqual(notReady.json.code, "SERVICE_UNAVAILABLE")
        assert.include(notReady.json.detail, "Not ready: the database cannot be reached")
        assert.include(server.output(), "not ready: the database cannot be reached")
        // The 503s are logged as such, with their cause, not as internal errors.
        assert.notInclude(server.output(), "\"request failed\"")

        yield* pg.start
        yield* eventually(
          Effect.map(api(server, key, "/ready"), (ready) => ready.status === 200 ? true : undefined),
          { timeoutMs: 30_000, intervalMs: 250, what: "ready again" }
        )
        const created = yield* api(server, key, "/v1/tasks", {
          method: "POST",
          body: { name: "after", answer_schema: { type: "object" } }
        })
        assert.strictEqual(created.status, 201)
      }).pipe(Effect.scoped),
    180_000
  )

  it.live(
    "once the database is back, NOTIFY from other processes wakes this one's workers again",
    () =>
      Effect.gen(function*() {
        const pg = yield* privatePostgres
        const url = Redacted.make(pg.url)
        const wakeups = yield* Layer.build(Wakeups.layer.pipe(Layer.provide(Database.server(url, 2)))).pipe(
          Effect.map((context) => Context.get(context, Wakeups))
        )
        const other = PgClient.layer({ url, maxConnections: 1 })
        /** A wait on a new topic while another session signals it: true when the signal woke it. */
        const heard = (topic: Topic) =>
          Effect.gen(function*() {
            const waiting = yield* Effect.forkChild(Effect.timed(wakeups.wait(topic, "3 seconds")))
            yield* Effect.sleep("100 millis")
            yield* SqlClient.SqlClient.use((sql) => sql`SELECT pg_notify('svc_wakeup', ${topic})`).pipe(
              Effect.provide(other)
            )
            const [elapsed] = yield* Fiber.join(waiting)
            return Duration.toMillis(elapsed) < 2_500 ? true : undefined
          }).pipe(Effect.orDie)
        assert.isTrue(yield* heard(Topics.deliveries("before")))

        yield* pg.stop
        yield* pg.start
        let round = 0
        assert.isTrue(
          yield* eventually(Effect.suspend(() => heard(Topics.deliveries(`after-${round++}`))), {
            timeoutMs: 60_000,
            intervalMs: 0,
            what: "a notification heard after the restart"
          })
        )
      }).pipe(Effect.scoped),
    120_000
  )
})
