/**
 * How `svc` starts and stops on its embedded
 * data directory, as real processes. One process holds a data directory,
 * the lock dies with its holder however it dies and outlives the database,
 * the database is reachable only through a socket in a private directory,
 * and the HTTP port opens only once the application is ready.
 */
import { PgClient } from "@effect/sql-pg"
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import { Effect, Exit, Fiber, Layer, Redacted, Scope } from "effect"
import { SqlClient } from "effect/sql"
import * as fs from "node:fs"
import * as http from "node:http"
import * as os from "node:os"
import * as path from "node:path"
import { VERSION } from "../../../src/api/Version.ts"
import { adminSocketPath } from "../../../src/cli/Admin.ts"
import { Database, DatabaseInfo } from "../../../src/database/Database.ts"
import { isHeld } from "../../../src/platform/DataDir.ts"
import { memoryDatabase, onServerRun } from "../../support/databases.ts"
import { freePort } from "../../support/privatePostgres.ts"
import {
  cli,
  type RunningServer,
  runNode,
  scratchDatabaseUrl,
  seededDataDir,
  startServer,
  svcScripts
} from "../../support/process.ts"

const newDataDir = () => path.join(fs.mkdtempSync(path.join(os.tmpdir(), "svc-start-")), "data")
/** A data directory whose database is already migrated, for tests of what follows a first start. */
const migratedDataDir = () => seededDataDir("svc-start-")

const envFor = (dataDir: string) => ({ SVC_DATA_DIR: dataDir, DATABASE_URL: "" })

const json = (stdout: string) => JSON.parse(stdout.trim().split("\n").at(-1)!)

const stop = async (server: RunningServer) => {
  server.child.kill("SIGTERM")
  return server.exited
}

const mode = (file: string) => fs.statSync(file).mode & 0o777

const linux = process.platform === "linux"

// Tests of a first start use an empty data directory (PGlite's initdb and
// every migration): on a loaded machine that takes a while.
const START_MS = 150_000
const TEST_MS = 300_000

/** Ports on which process `pid` listens for TCP (Linux: its socket inodes in /proc/net/tcp*). */
const tcpListeners = (pid: number): Array<number> => {
  const inodes = new Set<string>()
  for (const fd of fs.readdirSync(`/proc/${pid}/fd`)) {
    try {
      const match = /^socket:\[(\d+)\]$/.exec(fs.readlinkSync(`/proc/${pid}/fd/${fd}`))
      if (match) inodes.add(match[1]!)
    } catch {
      // closed meanwhile
    }
  }
  const ports: Array<number> = []
  for (const table of ["/proc/net/tcp", "/proc/net/tcp6"]) {
    for (const line of fs.readFileSync(table, "utf8").split("\n").slice(1)) {
      const columns = line.trim().split(/\s+/)
      // local_address is column 1, st (0A = LISTEN) column 3, inode column 9.
      if (columns[3] === "0A" && inodes.has(columns[9]!)) ports.push(parseInt(columns[1]!.split(":")[1]!, 16))
    }
  }
  return ports
}

/** Files this process has open under `dir` (Linux). */
const openFilesUnder = (dir: string) =>
  fs.readdirSync("/proc/self/fd").filter((fd) => {
    try {
      return fs.readlinkSync(`/proc/self/fd/${fd}`).startsWith(dir + path.sep)
    } catch {
      return false
    }
  }).length

/** One GET: `refused` when the connection is refused, else the whole answer; anything else (a hang, a reset) rejects. */
const probe = (port: number, route: string, timeoutMs: number) =>
  new Promise<"refused" | { status: number; body: string }>((resolve, reject) => {
    const request = http.get({ host: "127.0.0.1", port, path: route, agent: false }, (response) => {
      let body = ""
      response.setEncoding("utf8")
      response.on("data", (chunk) => (body += chunk))
      response.on("end", () => resolve({ status: response.statusCode ?? 0, body }))
      response.on("error", reject)
    })
    request.setTimeout(timeoutMs, () => request.destroy(new Error(`no answer within ${timeoutMs} ms`)))
    request.on(
      "error",
      (error: NodeJS.ErrnoException) => error.code === "ECONNREFUSED" ? resolve("refused") : reject(error)
    )
  })

// A first start (PGlite's initdb and every migration) costs several
// CPU-seconds: one, raced by a second server, serves both the lock and the
// privacy checks.
describe.skipIf(onServerRun)("a first start on an empty data directory, raced by a second server", () => {
  const dataDir = newDataDir()
  const env = envFor(dataDir)
  let started: Array<RunningServer> = []
  let refused: Array<unknown> = []
  beforeAll(async () => {
    const outcomes = await Promise.allSettled([startServer(env, START_MS), startServer(env, START_MS)])
    started = outcomes.filter((r): r is PromiseFulfilledResult<RunningServer> => r.status === "fulfilled").map((r) =>
      r.value
    )
    refused = outcomes.filter((r): r is PromiseRejectedResult => r.status === "rejected").map((r) => r.reason)
  }, TEST_MS)
  afterAll(async () => {
    for (const server of started) assert.strictEqual(await stop(server), 0)
  })
  /** The one server that serves; fails the test unless there is exactly one. */
  const winner = () => {
    assert.strictEqual(started.length, 1, refused.map(String).join("\n"))
    return started[0]!
  }

  it("exactly one serves, the other says which process holds the data directory", async () => {
    const server = winner()
    assert.strictEqual(refused.length, 1)
    assert.include(String(refused[0]), `held by process ${server.child.pid}`)
    assert.strictEqual((await fetch(`${server.baseUrl}/ready`)).status, 200)
  }, TEST_MS)

  it.runIf(linux)(
    "the data directory is created 0700, pgdata is not world-readable, the database listens on no socket and no TCP port; only the admin channel's socket (0600) is there",
    async () => {
      const server = winner()
      assert.strictEqual(mode(dataDir), 0o700)
      assert.strictEqual(mode(path.join(dataDir, "pgdata")), 0o700)
      assert.strictEqual(mode(path.join(dataDir, "master.key")), 0o600)
      // The one socket in the data directory is the admin channel's, the owner's alone.
      const sockets = fs.readdirSync(dataDir).filter((name) => fs.statSync(path.join(dataDir, name)).isSocket())
      assert.deepStrictEqual(sockets, [path.basename(adminSocketPath(dataDir))])
      assert.strictEqual(mode(adminSocketPath(dataDir)), 0o600)
      // The only TCP port the server listens on is its HTTP port.
      const httpPort = Number(new URL(server.baseUrl).port)
      assert.deepStrictEqual(tcpListeners(server.child.pid!), [httpPort])
      // The CLI reaches the running server through that socket.
      const created = await cli(["orgs", "create", "--name", "private", "--json"], env)
      assert.strictEqual(created.code, 0, created.stderr)
    },
    TEST_MS
  )
})

describe.skipIf(onServerRun)("one process holds a data directory", () => {
  it("a restart right after kill -9 succeeds and loses nothing that was accepted", async () => {
    const dataDir = migratedDataDir()
    const env = envFor(dataDir)
    const first = await startServer(env, START_MS)
    let second: RunningServer | undefined
    try {
      const org = json((await cli(["orgs", "create", "--name", "crash", "--json"], env)).stdout)
      const key = json(
        (await cli(["keys", "create", "--org", org.id, "--scopes", "tasks.write,tasks.read", "--json"], env)).stdout
      ).key
      const names = Array.from({ length: 20 }, (_, i) => `accepted-${i}`)
      for (const name of names) {
        const created = await fetch(`${first.baseUrl}/v1/tasks`, {
          method: "POST",
          headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
          body: JSON.stringify({ name, answer_schema: { type: "object" } })
        })
        assert.strictEqual(created.status, 201)
      }
      // No wait for the exit: the new server starts while the old one dies.
      first.child.kill("SIGKILL")
      second = await startServer(env, START_MS)
      const listed = await fetch(`${second.baseUrl}/v1/tasks?limit=100`, {
        headers: { authorization: `Bearer ${key}` }
      })
      assert.strictEqual(listed.status, 200)
      const stored = ((await listed.json()) as { tasks: Array<{ name: string }> }).tasks.map((task) => task.name)
      assert.sameMembers(stored, names)
    } finally {
      first.child.kill("SIGKILL")
      if (second !== undefined) assert.strictEqual(await stop(second), 0)
    }
  }, TEST_MS)

  it.live.skipIf(!linux)("the lock is free only once the database has closed its files", () =>
    Effect.gen(function*() {
      const dataDir = migratedDataDir()
      const pgdata = path.join(dataDir, "pgdata")
      const scope = yield* Scope.make()
      const context = yield* Layer.buildWithScope(Database.embedded(dataDir), scope)
      yield* SqlClient.SqlClient.use((sql) => sql`CREATE TABLE kept (n int)`).pipe(Effect.provideContext(context))
      assert.isTrue(isHeld(dataDir))
      assert.isAbove(openFilesUnder(pgdata), 0, "the running database has files open")

      const stopping = yield* Effect.forkChild(Scope.close(scope, Exit.void))
      // Watch as closely as the event loop allows: the first moment the
      // lock is free, nothing of the database may be open any more.
      let openWhenFree: number | undefined
      while (openWhenFree === undefined && stopping.pollUnsafe() === undefined) {
        if (isHeld(dataDir)) yield* Effect.sleep("1 millis")
        else openWhenFree = openFilesUnder(pgdata)
      }
      yield* Fiber.join(stopping)
      assert.strictEqual(openWhenFree ?? openFilesUnder(pgdata), 0)
      assert.isFalse(isHeld(dataDir))
    }), TEST_MS)
})

describe.skipIf(onServerRun)("the embedded database is private", () => {
  it("an existing data directory that others can enter is made private, and says so", async () => {
    const dataDir = migratedDataDir()
    fs.chmodSync(dataDir, 0o755)
    fs.chmodSync(path.join(dataDir, "pgdata"), 0o755)
    const server = await startServer(envFor(dataDir), START_MS)
    try {
      assert.strictEqual(mode(dataDir), 0o700)
      assert.strictEqual(mode(path.join(dataDir, "pgdata")), 0o700)
      assert.include(server.output(), `made ${dataDir} private: its mode was 0755, it is now 0700`)
    } finally {
      assert.strictEqual(await stop(server), 0)
    }
  }, TEST_MS)

  it.live.skipIf(!linux)(
    "the in-memory database (svc/testing) is reached in-process: no socket, no TCP port, a small buffer pool",
    () =>
      Effect.gen(function*() {
        const before = tcpListeners(process.pid)
        const info = yield* DatabaseInfo.use((info) =>
          Effect.gen(function*() {
            const rows = yield* SqlClient.SqlClient.use((sql) => sql<{ one: number }>`SELECT 1 AS one`)
            assert.strictEqual(rows[0]!.one, 1)
            assert.sameMembers(tcpListeners(process.pid), before)
            // Its pages live in memory already: the small buffer pool (`BufferPool.ts`).
            const pool = yield* SqlClient.SqlClient.use((sql) => sql<{ shared_buffers: string }>`SHOW shared_buffers`)
            assert.strictEqual(pool[0]!.shared_buffers, "16MB")
            return info
          })
        ).pipe(Effect.provide(memoryDatabase()), Effect.orDie)
        assert.strictEqual(info.kind, "memory")
        assert.strictEqual(info.address, "memory")
      }),
    TEST_MS
  )
})

describe.skipIf(onServerRun)("the HTTP port opens when the application is ready", () => {
  /** Probes `port` while a server starts on it; `taken` when another process took the port first. */
  const watchStart = async (port: number) => {
    const starting = startServer({ ...envFor(migratedDataDir()), PORT: String(port) }, START_MS)
    let failedToStart: unknown
    starting.catch((error) => (failedToStart = error))
    let refused = 0
    const answers: Array<{ route: string; status: number }> = []
    while (answers.length < 6) {
      if (failedToStart !== undefined) {
        if (String(failedToStart).includes("EADDRINUSE")) return "taken" as const
        throw failedToStart
      }
      const route = answers.length % 2 === 0 ? "/v1/tasks" : "/ready"
      const outcome = await probe(port, route, 20_000)
      if (outcome === "refused") {
        refused++
        await new Promise((resolve) => setTimeout(resolve, 5))
      } else {
        answers.push({ route, status: outcome.status })
        assert.isAbove(outcome.body.length, 0, `${route}: a whole answer`)
      }
    }
    assert.strictEqual(await stop(await starting), 0)
    return { refused, answers }
  }

  it(
    "a client connecting in a loop while the server starts is refused or fully answered, never left hanging",
    async () => {
      // Loading the modules and opening the database take most of a second
      // before the port opens. The port is chosen free before the server binds it; on a busy
      // machine another process may take it first: then another port.
      let watched: Awaited<ReturnType<typeof watchStart>> = "taken"
      for (let attempt = 0; attempt < 3 && watched === "taken"; attempt++) watched = await watchStart(await freePort())
      assert.notStrictEqual(watched, "taken")
      if (watched === "taken") return
      assert.isAbove(watched.refused, 0, "the loop began before the server listened")
      for (const { route, status } of watched.answers) {
        // Routes were attached at the first answer (no key: 401); readiness
        // answers either way (a loaded machine may miss its 2 s deadline).
        if (route === "/v1/tasks") assert.strictEqual(status, 401)
        else assert.oneOf(status, [200, 503])
      }
    },
    TEST_MS
  )
})

describe("a database of a later svc", () => {
  /** Marks the database as migrated by a later release: a migration of svc 9.0.0 this build does not have. */
  const fromLaterRelease = Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    yield* sql`INSERT INTO svc_migrations (migration_id, name) VALUES (9990, 'later_release')`
    yield* sql`INSERT INTO svc_schema_versions (migration_id, name, svc_version) VALUES (9990, 'later_release', '9.0.0')`
  })
  const line =
    `svc ${VERSION} cannot start: the database schema belongs to svc 9.0.0 (migration 9990_later_release); upgrade svc or use a database of this version`

  const refusedBoth = async (env: Record<string, string>) => {
    const server = await runNode(svcScripts().server, [], { ...env, PORT: "0" })
    assert.strictEqual(server.code, 7, server.stdout + server.stderr)
    const errors = (server.stdout + server.stderr).split("\n").filter((text) =>
      text.includes("ERROR") || text.includes("cannot start")
    )
    assert.deepStrictEqual(errors.map((text) => JSON.parse(text).message), [line])
    assert.notInclude(server.stdout, "svc listening")
    const command = await cli(["orgs", "list", "--json"], env)
    assert.strictEqual(command.code, 7)
    assert.strictEqual(command.stdout, "")
    // The CLI's line starts with `svc: `, as every CLI error does, and says what it could not do.
    assert.strictEqual(
      command.stderr,
      `svc: ${line.replace(`svc ${VERSION} cannot start: `, `this svc (${VERSION}) cannot open the database: `)}\n`
    )
  }

  it.skipIf(onServerRun)(
    "embedded: the server and the CLI refuse to start, with one line naming both versions, and exit 7",
    async () => {
      const env = envFor(migratedDataDir())
      assert.strictEqual((await cli(["orgs", "list", "--json"], env)).code, 0)
      await Effect.runPromise(fromLaterRelease.pipe(Effect.provide(Database.embedded(env.SVC_DATA_DIR)), Effect.scoped))
      await refusedBoth(env)
    },
    TEST_MS
  )

  it.skipIf(!process.env.TEST_DATABASE_URL)(
    "on PostgreSQL: the server and the CLI refuse to start, with one line naming both versions, and exit 7",
    () =>
      Effect.gen(function*() {
        const url = yield* scratchDatabaseUrl("svc_later")
        const env = {
          DATABASE_URL: url,
          SVC_DATA_DIR: newDataDir(),
          SVC_MASTER_KEY: Buffer.alloc(32, 7).toString("base64")
        }
        assert.strictEqual((yield* Effect.promise(() => cli(["orgs", "list", "--json"], env))).code, 0)
        yield* fromLaterRelease.pipe(
          Effect.provide(PgClient.layer({ url: Redacted.make(url), maxConnections: 1 })),
          Effect.orDie
        )
        yield* Effect.promise(() => refusedBoth(env))
      }).pipe(Effect.scoped, Effect.runPromise),
    TEST_MS
  )
})
