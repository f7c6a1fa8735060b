/**
 * The database: a PostgreSQL server when `DATABASE_URL` is set, otherwise
 * embedded PGlite behind a loopback socket (DESIGN.md, "Stack"). Both are
 * reached through the same `@effect/sql-pg` client, so the SQL and the
 * migrations are the same.
 */
import { PgClient } from "@effect/sql-pg"
import { Context, Data, Effect, Layer, Option, Redacted } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import { Worker } from "node:worker_threads"
import { randomBytes } from "node:crypto"
import { Reactivity } from "effect/reactivity"
import { SvcConfig } from "./Config.ts"

export class DatabaseUnavailable extends Data.TaggedError("DatabaseUnavailable")<{
  readonly message: string
}> {}

/** Where the database is and what kind it is; handy for logs, the CLI and tests. */
export class DatabaseInfo extends Context.Service<DatabaseInfo, {
  readonly kind: "embedded" | "memory" | "server"
  /** `host:port` of the PostgreSQL protocol endpoint. */
  readonly address: string
  /** Whether LISTEN/NOTIFY reaches other sessions (not through pglite-socket). */
  readonly supportsNotify: boolean
}>()("svc/platform/DatabaseInfo") {}

/** The lock file an embedded server keeps in its data dir, so the CLI can find its socket. */
export interface EmbeddedLock {
  readonly pid: number
  readonly address: string
  readonly started_at: string
}

export const lockPath = (dataDir: string) => path.join(dataDir, "svc.lock")

const isAlive = (pid: number) => {
  try {
    process.kill(pid, 0)
    return true
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "EPERM"
  }
}

/** The running embedded server that holds `dataDir`, if any. */
export const readLiveLock = (dataDir: string): Option.Option<EmbeddedLock> => {
  try {
    const lock = JSON.parse(fs.readFileSync(lockPath(dataDir), "utf8")) as EmbeddedLock
    return isAlive(lock.pid) && lock.pid !== process.pid ? Option.some(lock) : Option.none()
  } catch {
    return Option.none()
  }
}

/** Starts PGlite in a worker thread; resolves to its `host:port`. */
const startWorker = (dataDir: string | undefined) =>
  Effect.acquireRelease(
    Effect.callback<{ worker: Worker; address: string }, DatabaseUnavailable>((resume) => {
      const worker = new Worker(new URL("./embedded-worker.ts", import.meta.url), {
        workerData: { dataDir, host: "127.0.0.1", maxConnections: 8 }
      })
      const onError = (error: Error) =>
        resume(Effect.fail(new DatabaseUnavailable({ message: `embedded database failed: ${error.message}` })))
      worker.once("error", onError)
      worker.once("message", (message: { type: string; address?: string; message?: string }) => {
        worker.off("error", onError)
        if (message.type === "ready") resume(Effect.succeed({ worker, address: message.address! }))
        else {
          void worker.terminate()
          resume(Effect.fail(new DatabaseUnavailable({ message: `embedded database failed: ${message.message}` })))
        }
      })
    }),
    ({ worker }) =>
      Effect.callback<void>((resume) => {
        const timer = setTimeout(() => void worker.terminate().then(() => resume(Effect.void)), 10_000)
        worker.once("message", () => {
          clearTimeout(timer)
          void worker.terminate().then(() => resume(Effect.void))
        })
        worker.postMessage("stop")
      })
  )

const splitAddress = (address: string) => {
  const at = address.lastIndexOf(":")
  return { host: address.slice(0, at), port: Number(address.slice(at + 1)) }
}

/**
 * One connection to PGlite: it is a single database session, so a pool
 * would only queue behind it. `prepare: false` for clients that share the
 * session with another process's named statements (the CLI).
 */
const pgliteClient = (address: string, prepare = true) =>
  PgClient.makeClient({ ...splitAddress(address), username: "postgres", database: "postgres", prepare })

const memoryLayer = Layer.unwrap(Effect.gen(function*() {
  const { address } = yield* startWorker(undefined)
  return Layer.merge(
    PgClient.layerFrom(pgliteClient(address)),
    Layer.succeed(DatabaseInfo, { kind: "memory", address, supportsNotify: false })
  )
}))

const embeddedLayer = (dataDir: string) =>
  Layer.unwrap(Effect.gen(function*() {
    const absolute = path.resolve(dataDir)
    const holder = readLiveLock(absolute)
    if (Option.isSome(holder)) {
      return yield* new DatabaseUnavailable({
        message:
          `the embedded database in ${absolute} is held by process ${holder.value.pid} (${holder.value.address}); stop it or set DATABASE_URL`
      })
    }
    fs.mkdirSync(absolute, { recursive: true })
    const { address } = yield* startWorker(path.join(absolute, "pgdata"))
    yield* Effect.acquireRelease(
      Effect.sync(() => {
        const lock: EmbeddedLock = { pid: process.pid, address, started_at: new Date().toISOString() }
        fs.writeFileSync(lockPath(absolute), JSON.stringify(lock), { mode: 0o600 })
      }),
      () => Effect.sync(() => fs.rmSync(lockPath(absolute), { force: true }))
    )
    return Layer.merge(
      PgClient.layerFrom(pgliteClient(address)),
      Layer.succeed(DatabaseInfo, { kind: "embedded", address, supportsNotify: false })
    )
  }))

const serverLayer = (url: Redacted.Redacted<string>, maxConnections = 10) => {
  const parsed = new URL(Redacted.value(url))
  const address = `${parsed.hostname}:${parsed.port || "5432"}`
  return Layer.merge(
    PgClient.layer({ url, maxConnections, applicationName: "svc" }),
    Layer.succeed(DatabaseInfo, { kind: "server", address, supportsNotify: true })
  )
}

/** A client for an embedded server already running in another process (the CLI's path). */
const attachedLayer = (lock: EmbeddedLock) =>
  Layer.merge(
    PgClient.layerFrom(pgliteClient(lock.address, false)),
    Layer.succeed(DatabaseInfo, { kind: "embedded", address: lock.address, supportsNotify: false })
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
  /** Attach to the embedded database of a running server. */
  attached: attachedLayer,
  /** From configuration: `DATABASE_URL`, else the embedded database in `SVC_DATA_DIR`. */
  layer: Layer.unwrap(Effect.map(SvcConfig, (config) =>
    Option.match(config.databaseUrl, {
      onNone: () => embeddedLayer(config.dataDir),
      onSome: (url) => serverLayer(url)
    })))
}
