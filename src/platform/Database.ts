/**
 * The database: a PostgreSQL server when `DATABASE_URL` is set, otherwise
 * embedded PGlite served on a Unix socket inside the private data
 * directory (DESIGN.md, "Stack"). Both are reached through the same
 * `@effect/sql-pg` client, so the SQL and the migrations are the same.
 *
 * The embedded database never listens on TCP: its socket lives in the data
 * directory, which only the user running svc can enter (`DataDir.ts`), so
 * other local users and containers sharing the network cannot reach it.
 * The CLI finds a running server through that socket.
 */
import { PgClient } from "@effect/sql-pg"
import { Context, Data, Duration, Effect, Layer, Option, Redacted } from "effect"
import * as fs from "node:fs"
import * as net from "node:net"
import * as os from "node:os"
import * as path from "node:path"
import { Worker } from "node:worker_threads"
import { randomBytes } from "node:crypto"
import { Reactivity } from "effect/reactivity"
import { SvcConfig, type SvcConfigShape } from "./Config.ts"
import { ensurePrivateDir, holdDataDir } from "./DataDir.ts"

export class DatabaseUnavailable extends Data.TaggedError("DatabaseUnavailable")<{
  readonly message: string
}> {}

/** Where the database is and what kind it is; handy for logs, the CLI and tests. */
export class DatabaseInfo extends Context.Service<DatabaseInfo, {
  readonly kind: "embedded" | "memory" | "server"
  /** The PostgreSQL protocol endpoint: a Unix socket path (embedded, memory) or `host:port` (server). */
  readonly address: string
  /** Whether LISTEN/NOTIFY reaches other sessions (not through the embedded socket: PGlite is one session). */
  readonly supportsNotify: boolean
}>()("svc/platform/DatabaseInfo") {}

/**
 * The embedded database's socket in `dataDir`. Named as PostgreSQL names
 * its own, so `psql -h <data dir> -U postgres postgres` reaches it too.
 */
export const socketPath = (dataDir: string) => path.join(dataDir, ".s.PGSQL.5432")

// sun_path holds 108 bytes on Linux, 104 on macOS and the BSDs, the NUL included.
const MAX_SOCKET_PATH = process.platform === "linux" ? 107 : 103

/** Starts PGlite in a worker thread, serving it on the Unix socket `socket`. */
const startWorker = (dataDir: string | undefined, socket: string) =>
  Effect.acquireRelease(
    Effect.callback<Worker, DatabaseUnavailable>((resume) => {
      const worker = new Worker(new URL("./embedded-worker.ts", import.meta.url), {
        workerData: { dataDir, path: socket, maxConnections: 8 }
      })
      const onError = (error: Error) =>
        resume(Effect.fail(new DatabaseUnavailable({ message: `embedded database failed: ${error.message}` })))
      worker.once("error", onError)
      worker.once("message", (message: { type: string; message?: string }) => {
        worker.off("error", onError)
        if (message.type === "ready") resume(Effect.succeed(worker))
        else {
          void worker.terminate()
          resume(Effect.fail(new DatabaseUnavailable({ message: `embedded database failed: ${message.message}` })))
        }
      })
    }),
    (worker) =>
      Effect.callback<void>((resume) => {
        const timer = setTimeout(() => void worker.terminate().then(() => resume(Effect.void)), 10_000)
        worker.once("message", () => {
          clearTimeout(timer)
          void worker.terminate().then(() => resume(Effect.void))
        })
        worker.postMessage("stop")
      })
  )

/**
 * One connection to PGlite on `socket`: it is a single database session,
 * so a pool would only queue behind it. `prepare: false` for clients that
 * share the session with another process's named statements (the CLI).
 */
const pgliteClient = (socket: string, kind: "embedded" | "memory", prepare = true) =>
  Layer.merge(
    PgClient.layerFrom(PgClient.makeClient({ path: socket, username: "postgres", database: "postgres", prepare })),
    Layer.succeed(DatabaseInfo, { kind, address: socket, supportsNotify: false })
  )

/** A fresh, empty database in memory, on a socket in a private temporary directory. */
const memoryLayer = Layer.unwrap(Effect.gen(function*() {
  // mkdtemp creates the directory 0700.
  const dir = yield* Effect.acquireRelease(
    Effect.sync(() => fs.mkdtempSync(path.join(os.tmpdir(), "svc-db-"))),
    (dir) => Effect.sync(() => fs.rmSync(dir, { recursive: true, force: true }))
  )
  const socket = socketPath(dir)
  yield* startWorker(undefined, socket)
  return pgliteClient(socket, "memory")
}))

/**
 * Prepares and holds the data directory, then starts the database in it:
 * private directory, lock, then database; stopped in the reverse order, so
 * the lock is free only once the database has closed.
 */
const openEmbedded = (dataDir: string, options: { readonly waitMs?: number } = {}) =>
  Effect.gen(function*() {
    const absolute = path.resolve(dataDir)
    const socket = socketPath(absolute)
    if (Buffer.byteLength(socket) > MAX_SOCKET_PATH) {
      return yield* new DatabaseUnavailable({
        message: `SVC_DATA_DIR ${absolute} is too long for the database socket (${socket} must be at most ${MAX_SOCKET_PATH} bytes); choose a shorter path`
      })
    }
    yield* ensurePrivateDir(absolute)
    yield* holdDataDir(absolute, options)
    const pgdata = path.join(absolute, "pgdata")
    yield* ensurePrivateDir(pgdata)
    // Only the lock holder touches the socket path: what is there now is
    // the socket of a holder that died.
    fs.rmSync(socket, { force: true })
    yield* startWorker(pgdata, socket)
    return socket
  }).pipe(
    Effect.catchTag("DataDirError", (error) => Effect.fail(new DatabaseUnavailable({ message: error.message })))
  )

/** How long a starting server waits for the lock of a holder that was just killed. */
const HOLDER_EXIT_WAIT_MS = 2_000

const embeddedLayer = (dataDir: string) =>
  Layer.unwrap(Effect.gen(function*() {
    return pgliteClient(yield* openEmbedded(dataDir, { waitMs: HOLDER_EXIT_WAIT_MS }), "embedded")
  }))

/**
 * Session settings on a PostgreSQL server, sent in every connection's
 * startup packet, so a request never waits on a statement, a stuck
 * transaction or a dead peer for longer than these.
 */
export interface ServerSessionSettings {
  /** `statement_timeout`: the server cancels a longer statement. */
  readonly statementTimeout: Duration.Duration
  /** `idle_in_transaction_session_timeout`: the server ends a session idle inside a transaction this long. */
  readonly idleInTransactionTimeout: Duration.Duration
  /** TCP keepalive: probes start after this much silence; an unanswered peer fails the connection about 10 s later. */
  readonly keepAlive: Duration.Duration
  /** Connecting and authenticating must end within this. */
  readonly connectTimeout: Duration.Duration
}

/** The documented defaults of `SVC_DB_*` (for layers built without configuration: tests, scratch databases). */
export const defaultServerSessionSettings: ServerSessionSettings = {
  statementTimeout: Duration.seconds(30),
  idleInTransactionTimeout: Duration.seconds(60),
  keepAlive: Duration.seconds(30),
  connectTimeout: Duration.seconds(5)
}

/** The session settings `SvcConfig` asks for. */
export const serverSessionSettings = (config: SvcConfigShape): ServerSessionSettings => ({
  ...defaultServerSessionSettings,
  statementTimeout: config.dbStatementTimeout,
  idleInTransactionTimeout: config.dbIdleInTransactionTimeout,
  keepAlive: config.dbKeepAlive
})

const pgMillis = (duration: Duration.Duration) => `${Math.round(Duration.toMillis(duration))}ms`

const serverLayer = (
  url: Redacted.Redacted<string>,
  maxConnections = 10,
  settings: ServerSessionSettings = defaultServerSessionSettings
) => {
  const parsed = new URL(Redacted.value(url))
  const address = `${parsed.hostname}:${parsed.port || "5432"}`
  return Layer.merge(
    PgClient.layer({
      url,
      maxConnections,
      applicationName: "svc",
      keepAlive: settings.keepAlive,
      connectTimeout: settings.connectTimeout,
      startupParameters: {
        statement_timeout: pgMillis(settings.statementTimeout),
        idle_in_transaction_session_timeout: pgMillis(settings.idleInTransactionTimeout)
      }
    }),
    Layer.succeed(DatabaseInfo, { kind: "server", address, supportsNotify: true })
  )
}

/** How long a client waits for a server whose lock is held but whose socket does not answer yet (it is starting). */
const ATTACH_WAIT_MS = 30_000

const answers = (socket: string) =>
  Effect.callback<boolean>((resume) => {
    const connection = net.connect({ path: socket })
    connection.once("connect", () => {
      connection.destroy()
      resume(Effect.succeed(true))
    })
    connection.once("error", () => resume(Effect.succeed(false)))
    return Effect.sync(() => connection.destroy())
  })

/** A client of the embedded database of a server running on `dataDir` (tests). */
const attachedLayer = (dataDir: string) => pgliteClient(socketPath(path.resolve(dataDir)), "embedded", false)

/**
 * The CLI's embedded database: the running server's, through its socket
 * (`attached`), or, when none runs, the data directory itself, held for
 * the current scope. A holder that does not answer yet is starting: wait
 * for its socket.
 */
const shareOrOpen = (dataDir: string) =>
  Effect.gen(function*() {
    const absolute = path.resolve(dataDir)
    const socket = socketPath(absolute)
    const deadline = Date.now() + ATTACH_WAIT_MS
    for (;;) {
      if (yield* answers(socket)) return { attached: true, layer: attachedLayer(absolute) }
      const opened = yield* openEmbedded(absolute).pipe(
        Effect.map(Option.some),
        Effect.catchTag("DataDirHeld", (held) => Date.now() < deadline ? Effect.succeed(Option.none()) : Effect.fail(held))
      )
      if (Option.isSome(opened)) return { attached: false, layer: pgliteClient(opened.value, "embedded") }
      yield* Effect.sleep("100 millis")
    }
  }).pipe(
    Effect.catchTag("DataDirHeld", (held) =>
      Effect.fail(new DatabaseUnavailable({ message: `${held.message} (it does not answer on ${socketPath(held.dir)})` })))
  )

/**
 * A fresh, empty database on the server at `adminUrl`, dropped when the
 * layer is released: isolated test runs on one PostgreSQL server.
 */
const scratchServerLayer = (adminUrl: Redacted.Redacted<string>) =>
  Layer.unwrap(Effect.gen(function*() {
    const name = `svc_test_${randomBytes(6).toString("hex")}`
    const admin = yield* PgClient.makeClient({ url: adminUrl }).pipe(Effect.provide(Reactivity.layer))
    yield* Effect.acquireRelease(
      admin.unsafe(`CREATE DATABASE ${name}`),
      () =>
        admin.unsafe(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`).pipe(
          Effect.catch((error) => Effect.logWarning(`could not drop scratch database ${name}`, error))
        )
    )
    const url = new URL(Redacted.value(adminUrl))
    url.pathname = `/${name}`
    return serverLayer(Redacted.make(url.toString()))
  }))

export const Database = {
  /** A fresh database on the PostgreSQL server at the URL, dropped afterwards (tests). */
  scratch: scratchServerLayer,
  /** PostgreSQL server at `url`. */
  server: serverLayer,
  /** Embedded PGlite persisted in `dataDir`, holding the data dir's lock. */
  embedded: embeddedLayer,
  /** Embedded PGlite in memory: a fresh, empty database (tests). */
  memory: memoryLayer,
  /** Attach to the embedded database of a server running on `dataDir`. */
  attached: attachedLayer,
  /**
   * The running server's embedded database if there is one (`attached`),
   * else the data directory itself, held for the current scope (the CLI).
   */
  shareOrOpen,
  /** From configuration: `DATABASE_URL`, else the embedded database in `SVC_DATA_DIR`. */
  layer: Layer.unwrap(Effect.map(SvcConfig, (config) =>
    Option.match(config.databaseUrl, {
      onNone: () => embeddedLayer(config.dataDir),
      onSome: (url) => serverLayer(url, 10, serverSessionSettings(config))
    })))
}
