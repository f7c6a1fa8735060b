/**
 * A keyed write whose svc process is killed (`kill -9`) after the write
 * committed and before its answer was recorded and sent: a retry with the
 * same key, on a new process, does not act again. It answers `409
 * IDEMPOTENCY_KEY_IN_USE` while the dead request's lease lasts, then `409
 * IDEMPOTENCY_ANSWER_UNAVAILABLE`, and the change exists exactly once.
 *
 * The kill lands in that window by a trigger the test adds: it holds the
 * statement that records the answer (`pg_sleep`), so the process is still
 * waiting on it when it is killed.
 */
import { PgClient } from "@effect/sql-pg"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Redacted } from "effect"
import { SqlClient } from "effect/sql"
import { Database } from "../../../src/database/Database.ts"
import { onServerRun } from "../../support/databases.ts"
import { eventually } from "../../support/http.ts"
import { cli, type RunningServer, scratchDatabaseUrl, seededDataDir, startServer } from "../../support/process.ts"

const json = (stdout: string) => JSON.parse(stdout.trim().split("\n").at(-1)!)

const HOLD_RECORD = [
  `CREATE FUNCTION hold_idempotency_record() RETURNS trigger LANGUAGE plpgsql AS $$
   BEGIN IF NEW.state = 'done' THEN PERFORM pg_sleep(25); END IF; RETURN NEW; END $$`,
  `CREATE TRIGGER hold_idempotency_record BEFORE UPDATE ON idempotency_keys
   FOR EACH ROW EXECUTE FUNCTION hold_idempotency_record()`
]
const RELEASE_RECORD = [
  "DROP TRIGGER hold_idempotency_record ON idempotency_keys",
  "DROP FUNCTION hold_idempotency_record()"
]

const run = (statements: ReadonlyArray<string>) =>
  SqlClient.SqlClient.use((sql) => Effect.forEach(statements, (statement) => sql.unsafe(statement), { discard: true }))
    .pipe(Effect.orDie)

const keyRow = (orgId: string) =>
  SqlClient.SqlClient.use((sql) =>
    sql<{ state: string; n: number }>`
      SELECT (SELECT state FROM idempotency_keys WHERE org_id = ${orgId} AND key = 'crash-1') AS state,
             (SELECT count(*)::int FROM notification_endpoints WHERE org_id = ${orgId}) AS n
    `
  ).pipe(Effect.map((rows) => rows[0]!), Effect.orDie)

const createEndpoint = (server: RunningServer, key: string) =>
  fetch(`${server.baseUrl}/v1/notification-endpoints`, {
    method: "POST",
    headers: { authorization: `Bearer ${key}`, "content-type": "application/json", "idempotency-key": "crash-1" },
    body: JSON.stringify({ url: "https://127.0.0.1:9/crash" })
  })

const kill = (server: RunningServer) =>
  Effect.promise(async () => {
    server.child.kill("SIGKILL")
    await server.exited.catch(() => undefined)
  })

/** Retries the same request on `server` until it answers a problem other than IDEMPOTENCY_KEY_IN_USE. */
const retryUntilSettled = (server: RunningServer, key: string) =>
  eventually(
    Effect.promise(async () => {
      const response = await createEndpoint(server, key)
      const body = await response.json() as { code?: string }
      return body.code === "IDEMPOTENCY_KEY_IN_USE" ? undefined : { status: response.status, code: body.code }
    }),
    { timeoutMs: 40_000, intervalMs: 500, what: "the dead request's lease to lapse" }
  )

const provision = (env: Record<string, string>) =>
  Effect.promise(async () => {
    const org = json((await cli(["orgs", "create", "--name", "crash", "--json"], env)).stdout)
    const key = json(
      (await cli(["keys", "create", "--org", org.id, "--scopes", "org_config.read,org_config.write", "--json"], env))
        .stdout
    ).key
    return { orgId: org.id as string, key: key as string }
  })

const env = { SVC_ALLOWED_TARGET_CIDRS: "127.0.0.0/8" }

describe.skipIf(onServerRun)(
  "a keyed write killed between its commit and its answer, on an embedded data directory",
  () => {
    it.live("the retry on the restarted process does not create a second endpoint", () =>
      Effect.gen(function*() {
        const dataDir = seededDataDir("svc-idempotency-")
        const processEnv = { ...env, SVC_DATA_DIR: dataDir, DATABASE_URL: "" }
        const { orgId, key } = yield* provision(processEnv)
        const offline = <A, E>(effect: Effect.Effect<A, E, SqlClient.SqlClient>) =>
          effect.pipe(Effect.provide(Database.embedded(dataDir)), Effect.scoped)
        yield* offline(run(HOLD_RECORD))
        let server = yield* Effect.promise(() => startServer(processEnv))
        // The embedded database is the process's own: nothing outside sees the
        // request's progress, so the kill comes once the answer is overdue (the
        // trigger holds the record 25 s; a create takes well under a second).
        const pending = createEndpoint(server, key).catch(() => undefined)
        yield* Effect.sleep("4 seconds")
        yield* kill(server)
        assert.isUndefined(yield* Effect.promise(() => pending), "no answer reached the client")
        yield* offline(run(RELEASE_RECORD))
        assert.deepStrictEqual(
          yield* offline(keyRow(orgId)),
          { state: "running", n: 1 },
          "killed after the commit, before the record"
        )

        server = yield* Effect.promise(() => startServer(processEnv))
        try {
          assert.deepStrictEqual(yield* retryUntilSettled(server, key), {
            status: 409,
            code: "IDEMPOTENCY_ANSWER_UNAVAILABLE"
          })
        } finally {
          yield* kill(server)
        }
        assert.strictEqual((yield* offline(keyRow(orgId))).n, 1, "one endpoint: the retry did not act")
      }), 180_000)
  }
)

describe.runIf(onServerRun)("a keyed write killed between its commit and its answer, on a PostgreSQL server", () => {
  it.live("the retry on another process does not create a second endpoint", () =>
    Effect.gen(function*() {
      const url = yield* scratchDatabaseUrl("svc_idempotency")
      const processEnv = { ...env, DATABASE_URL: url, SVC_MASTER_KEY: Buffer.alloc(32, 9).toString("base64") }
      const { orgId, key } = yield* provision(processEnv)
      const admin = <A, E>(effect: Effect.Effect<A, E, SqlClient.SqlClient>) =>
        effect.pipe(Effect.provide(PgClient.layer({ url: Redacted.make(url), maxConnections: 1 })), Effect.scoped)
      const first = yield* Effect.promise(() => startServer(processEnv))
      yield* admin(run(HOLD_RECORD))
      const pending = createEndpoint(first, key).catch(() => undefined)
      // The endpoint is committed and the record of the answer is held.
      yield* eventually(
        Effect.map(admin(keyRow(orgId)), (row) => row.n === 1 && row.state === "running" ? row : undefined),
        { timeoutMs: 20_000, what: "the endpoint committed, its answer not recorded" }
      )
      yield* kill(first)
      assert.isUndefined(yield* Effect.promise(() => pending), "no answer reached the client")
      // The server notices a client gone only when it next talks to it: the
      // held statement would finish once the trigger's sleep ends. The dead
      // process's sessions end now, as they would had it died between
      // statements, where the trigger cannot hold it.
      yield* admin(run([
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()"
      ]))
      yield* admin(run(RELEASE_RECORD))
      assert.deepStrictEqual(yield* admin(keyRow(orgId)), { state: "running", n: 1 })

      const second = yield* Effect.promise(() => startServer(processEnv))
      try {
        assert.deepStrictEqual(yield* retryUntilSettled(second, key), {
          status: 409,
          code: "IDEMPOTENCY_ANSWER_UNAVAILABLE"
        })
      } finally {
        yield* kill(second)
      }
      assert.strictEqual((yield* admin(keyRow(orgId))).n, 1, "one endpoint: the retry did not act")
    }).pipe(Effect.scoped), 180_000)
})
