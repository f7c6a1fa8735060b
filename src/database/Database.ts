/**
 * The database: a PostgreSQL server when `DATABASE_URL` is set, otherwise
 * embedded PGlite in the private data directory (docs/operations.md, "The
 * embedded database"). Both
 * are reached as an `@effect/sql-pg` `PgClient`, so the SQL and the
 * migrations are the same: on a server through the PostgreSQL protocol, on
 * PGlite through its own API in a worker thread (`EmbeddedSession.ts`),
 * which nothing outside this process can reach.
 *
 * The CLI reaches a running server's embedded data through that server's
 * admin channel (`src/cli/Admin.ts`), never through the database itself.
 */
import { PgClient } from "@effect/sql-pg"
import { Context, Data, Duration, Effect, Layer, Option, Redacted, type Scope } from "effect"
import { Reactivity } from "effect/reactivity"
import { SqlClient, type SqlError } from "effect/sql"
import { randomBytes } from "node:crypto"
import * as fs from "node:fs"
import * as path from "node:path"
import { SvcConfig, type SvcConfigShape } from "../platform/Config.ts"
import { ensurePrivateDir, holdDataDir } from "../platform/DataDir.ts"
import { compiledPglite } from "./embedded/CompiledOnce.ts"
import { keepCheckpoints } from "./embedded/EmbeddedCheckpoints.ts"
import { makeEmbeddedClient } from "./embedded/EmbeddedClient.ts"
import { type EmbeddedSession, type EmbeddedSessionOptions, startSession } from "./embedded/EmbeddedSession.ts"
import { keepStatistics } from "./embedded/EmbeddedStatistics.ts"
import { keepVacuumed } from "./embedded/EmbeddedVacuum.ts"
import { serverClientLayer } from "./ServerClient.ts"

export class DatabaseUnavailable extends Data.TaggedError("DatabaseUnavailable")<{
  readonly message: string
  /** Another process holds the data directory. */
  readonly held?: boolean
  /** The setting at fault (the data directory cannot be used). */
  readonly setting?: string
}> {}

/** Where the database is and what kind it is; handy for logs, the CLI and tests. */
export class DatabaseInfo extends Context.Service<DatabaseInfo, {
  readonly kind: "embedded" | "memory" | "server"
  /** The data directory (embedded), `memory`, or `host:port` (server). */
  readonly address: string
  /** Whether LISTEN/NOTIFY reaches other sessions (only on a server: PGlite is one session). */
  readonly supportsNotify: boolean
  /**
   * Completes, with why, when the database session is gone for good (the
   * embedded worker died or overran its watchdog); never on a server, whose
   * client reconnects.
   */
  readonly lost: Effect.Effect<string>
  /** The embedded session behind the client (embedded and memory databases): for `db dump` and tests. */
  readonly embedded: EmbeddedSession | undefined
}>()("svc/platform/DatabaseInfo") {}

/** The watchdog bounds of the embedded session: `SVC_DB_STATEMENT_TIMEOUT`, `SVC_DB_IDLE_IN_TRANSACTION_TIMEOUT`. */
export type EmbeddedSettings = Pick<EmbeddedSessionOptions, "statementTimeout" | "transactionTimeout">

/** What every database layer provides. */
export type DatabaseLayer = Layer.Layer<
  DatabaseInfo | PgClient.PgClient | SqlClient.SqlClient,
  DatabaseUnavailable | SqlError.SqlError
>

const embeddedClient = (
  dataDir: string | undefined,
  kind: "embedded" | "memory",
  settings: EmbeddedSettings,
  before: Effect.Effect<void, DatabaseUnavailable, Scope.Scope> = Effect.void,
  options: {
    readonly statisticsEvery?: Duration.Input | undefined
    readonly vacuumEvery?: Duration.Input | undefined
    readonly from?: string | undefined
    readonly smallBufferPool?: boolean | undefined
  } = {}
): DatabaseLayer =>
  Layer.effectContext(Effect.gen(function*() {
    yield* before
    // Databases in memory (tests open dozens per process) share one compiled PGlite.
    const wasmModule = kind === "memory"
      ? yield* Effect.tryPromise({
        try: compiledPglite,
        catch: (cause) => new DatabaseUnavailable({ message: `cannot compile the embedded database: ${String(cause)}` })
      })
      : undefined
    const session = yield* startSession({
      dataDir,
      from: options.from,
      wasmModule,
      smallBufferPool: options.smallBufferPool,
      ...settings
    }).pipe(
      Effect.mapError((error) => new DatabaseUnavailable({ message: error.message }))
    )
    const client = yield* makeEmbeddedClient(session)
    // No autovacuum and no checkpointer run on PGlite: the statistics the
    // planner needs, the vacuum that makes dead rows' space reusable and
    // freezes old rows, and the checkpoints that bound the WAL are kept
    // here, for a data folder (a database in memory lives as long as a test).
    if (kind === "embedded") {
      yield* keepStatistics(client, options.statisticsEvery)
      yield* keepVacuumed(client, options.vacuumEvery)
      yield* keepCheckpoints(client)
    }
    return Context.make(PgClient.PgClient, client).pipe(
      Context.add(SqlClient.SqlClient, client),
      Context.add(DatabaseInfo, {
        kind,
        address: dataDir ?? "memory",
        supportsNotify: false,
        lost: session.lost,
        embedded: session
      })
    )
  })).pipe(Layer.provide(Reactivity.layer))

const defaultEmbeddedSettings: EmbeddedSettings = {
  statementTimeout: Duration.seconds(30),
  transactionTimeout: Duration.seconds(60)
}

/**
 * A fresh database in memory (tests), with the watchdog's bounds: empty, or
 * with `from` a copy of that snapshot file (one the embedded session's
 * `snapshot` request wrote: a copy of a migrated database opens in a
 * fraction of the time `initdb` and the migrations take).
 */
const memoryLayer = (settings = defaultEmbeddedSettings, from?: string): DatabaseLayer =>
  embeddedClient(undefined, "memory", settings, Effect.void, { from })

/**
 * Prepares and holds the data directory, then starts the database in it:
 * private directory, lock, then database; stopped in the reverse order, so
 * the lock is free only once the database has closed.
 */
const holdEmbedded = (absolute: string, options: { readonly waitMs?: number }) =>
  Effect.gen(function*() {
    yield* ensurePrivateDir(absolute)
    yield* holdDataDir(absolute, options)
    yield* ensurePrivateDir(path.join(absolute, "pgdata"))
    // What an earlier version served in the data directory (a PostgreSQL socket).
    fs.rmSync(path.join(absolute, ".s.PGSQL.5432"), { force: true })
  }).pipe(
    Effect.catchTags({
      DataDirError: (error) =>
        Effect.fail(new DatabaseUnavailable({ message: error.message, setting: "SVC_DATA_DIR" })),
      DataDirHeld: (error) => Effect.fail(new DatabaseUnavailable({ message: error.message, held: true }))
    })
  )

/** How long a starting server waits for the lock of a holder that was just killed. */
const HOLDER_EXIT_WAIT_MS = 2_000

const embeddedLayer = (dataDir: string, settings = defaultEmbeddedSettings, options: {
  readonly waitMs?: number
  /** How often the planner statistics are looked at (`EmbeddedStatistics.ts`; tests shorten it). */
  readonly statisticsEvery?: Duration.Input
  /** How often the tables are looked at for `VACUUM` (`EmbeddedVacuum.ts`; tests shorten it). */
  readonly vacuumEvery?: Duration.Input
  /** A process that holds the data folder for a moment (the CLI): a small buffer pool (`BufferPool.ts`). */
  readonly smallBufferPool?: boolean
} = { waitMs: HOLDER_EXIT_WAIT_MS }): DatabaseLayer => {
  const absolute = path.resolve(dataDir)
  return embeddedClient(path.join(absolute, "pgdata"), "embedded", settings, holdEmbedded(absolute, options), options)
}

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
): DatabaseLayer => {
  const parsed = new URL(Redacted.value(url))
  const address = `${parsed.hostname}:${parsed.port || "5432"}`
  return Layer.merge(
    serverClientLayer({
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
    Layer.succeed(DatabaseInfo, {
      kind: "server",
      address,
      supportsNotify: true,
      lost: Effect.never,
      embedded: undefined
    })
  )
}

/**
 * A fresh, empty database on the server at `adminUrl`, dropped when the
 * layer is released: isolated test runs on one PostgreSQL server. With
 * `template` (a database nobody is connected to, e.g. one already
 * migrated), a copy of it: the server copies its files, a fraction of the
 * time the migrations take.
 */
const scratchServerLayer = (
  adminUrl: Redacted.Redacted<string>,
  options: { readonly settings?: ServerSessionSettings | undefined; readonly template?: string | undefined } = {}
): DatabaseLayer =>
  Layer.unwrap(Effect.gen(function*() {
    const { settings = defaultServerSessionSettings, template } = options
    const name = `svc_test_${randomBytes(6).toString("hex")}`
    const admin = yield* PgClient.makeClient({ url: adminUrl }).pipe(Effect.provide(Reactivity.layer))
    yield* Effect.acquireRelease(
      admin.unsafe(
        template === undefined || template === ""
          ? `CREATE DATABASE ${name}`
          : `CREATE DATABASE ${name} TEMPLATE "${template.replace(/"/g, "\"\"")}"`
      ),
      () =>
        admin.unsafe(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`).pipe(
          Effect.catch((error) => Effect.logWarning(`could not drop scratch database ${name}`, error))
        )
    )
    const url = new URL(Redacted.value(adminUrl))
    url.pathname = `/${name}`
    return serverLayer(Redacted.make(url.toString()), 10, settings)
  }))

/** The embedded watchdog bounds `SvcConfig` asks for. */
export const embeddedSettings = (config: SvcConfigShape): EmbeddedSettings => ({
  statementTimeout: config.dbStatementTimeout,
  transactionTimeout: config.dbIdleInTransactionTimeout
})

export const Database = {
  /** A fresh database (or a copy of `template`) on the PostgreSQL server at the URL, dropped afterwards (tests). */
  scratch: scratchServerLayer,
  /** PostgreSQL server at `url`. */
  server: serverLayer,
  /** Embedded PGlite persisted in `dataDir`, holding the data dir's lock. */
  embedded: embeddedLayer,
  /** Embedded PGlite in memory: a fresh, empty database (tests). */
  memory: memoryLayer(),
  /** Embedded PGlite in memory, with the watchdog's bounds given (tests). */
  memoryWith: (settings: EmbeddedSettings) => memoryLayer(settings),
  /** Embedded PGlite in memory, starting as a copy of a snapshot file (tests). */
  memoryFrom: (snapshot: string, settings?: EmbeddedSettings) => memoryLayer(settings, snapshot),
  /** From configuration: `DATABASE_URL`, else the embedded database in `SVC_DATA_DIR`. */
  layer: Layer.unwrap(Effect.map(SvcConfig, (config): DatabaseLayer =>
    Option.match(config.databaseUrl, {
      onNone: () => embeddedLayer(config.dataDir, embeddedSettings(config)),
      onSome: (url) => serverLayer(url, 10, serverSessionSettings(config))
    })))
}
