/**
 * The two databases every scenario runs on: embedded PGlite (svc's default,
 * a data directory of its own per run) and a PostgreSQL server
 * (`BENCH_DATABASE_URL`), on which each run creates its own database and
 * drops it afterwards.
 */
import { PGlite } from "@electric-sql/pglite"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import * as path from "node:path"
import pg from "pg"
import type { Meter } from "./cpu.ts"
import { postgresWork } from "./work.ts"

export type DatabaseKind = "pglite" | "postgres"

/** What the scenarios write and read the database with, directly. */
export interface BenchClient {
  readonly query: <R = any>(sql: string, params?: ReadonlyArray<unknown>) => Promise<{ readonly rows: Array<R> }>
  readonly end: () => Promise<void>
}

/** One database for one run of a scenario. */
export interface BenchDatabase {
  readonly kind: DatabaseKind
  /** Embedded: the data directory svc (or a baseline) opens. */
  readonly dataDir?: string
  /** Server: the connection URL of this run's database. */
  readonly url?: string
  /**
   * Connects a client. Embedded: PGlite opened on `dataDir`/pgdata itself, so no
   * svc process may be running on it (`offline` says so); svc keeps its
   * session to itself, and the data folder has one owner at a time.
   */
  readonly connect: () => Promise<BenchClient>
  /** Whether `connect` needs svc stopped (embedded). */
  readonly offline: boolean
  /** Server: the CPU of the server backends serving this database. */
  readonly meter?: Meter
  readonly drop: () => Promise<void>
}

export const databaseKinds = (): ReadonlyArray<DatabaseKind> => {
  const only = process.env.BENCH_DATABASES?.split(",").map((s) => s.trim()).filter((s) => s !== "")
  const kinds: Array<DatabaseKind> = process.env.BENCH_DATABASE_URL ? ["pglite", "postgres"] : ["pglite"]
  return only === undefined || only.length === 0 ? kinds : kinds.filter((kind) => only.includes(kind))
}

const adminUrl = () => {
  const url = process.env.BENCH_DATABASE_URL
  if (url === undefined || url === "") throw new Error("BENCH_DATABASE_URL is not set")
  const parsed = new URL(url)
  if (!["127.0.0.1", "localhost", "::1", "[::1]"].includes(parsed.hostname)) {
    throw new Error("BENCH_DATABASE_URL must be on loopback")
  }
  return parsed
}

/** `f` with a client of its own on `url` (the benchmark's and the SQL studies' statements about databases), closed after. */
export const withClient = async <A>(url: string | undefined, f: (client: pg.Client) => Promise<A>) => {
  const client = new pg.Client({ connectionString: url })
  await client.connect()
  try {
    return await f(client)
  } finally {
    await client.end()
  }
}

const withAdmin = <A>(f: (client: pg.Client) => Promise<A>) => withClient(adminUrl().toString(), f)

let counter = 0

/** Embedded data directories not dropped yet: removed if the benchmark ends early. */
const dataDirs = new Set<string>()
process.once("exit", () => {
  for (const dir of dataDirs) rmSync(dir, { recursive: true, force: true })
})

/** A fresh database named after the run (`bench_<pid>_<n>_<label>`). */
export const freshDatabase = async (kind: DatabaseKind, label: string): Promise<BenchDatabase> => {
  if (kind === "pglite") {
    const dataDir = mkdtempSync(path.join(tmpdir(), "svcb-"))
    dataDirs.add(dataDir)
    return {
      kind,
      dataDir,
      offline: true,
      connect: async () => {
        const db = await PGlite.create({ dataDir: path.join(dataDir, "pgdata") })
        return {
          query: async <R>(sql: string, params?: ReadonlyArray<unknown>) => ({
            rows: (await db.query<R>(sql, params as Array<unknown>)).rows
          }),
          end: () => db.close()
        }
      },
      drop: async () => {
        rmSync(dataDir, { recursive: true, force: true })
        dataDirs.delete(dataDir)
      }
    }
  }
  const name = `bench_${process.pid}_${counter++}_${label.replace(/[^a-z0-9]/gi, "_").toLowerCase()}`.slice(0, 60)
  await withAdmin((admin) => admin.query(`CREATE DATABASE ${name}`))
  return serverDatabase(name)
}

/**
 * A server database of the given name, created when there is none: a run
 * that keeps what it loaded for the next one (`existed` says whether it was
 * there before).
 */
export const keptDatabase = async (name: string): Promise<BenchDatabase & { readonly existed: boolean }> => {
  if (!/^[a-z_][a-z0-9_]{0,62}$/.test(name)) throw new Error(`not a plain database name: ${name}`)
  const existed = await withAdmin(async (admin) =>
    (await admin.query("SELECT 1 FROM pg_database WHERE datname = $1", [name])).rows.length > 0
  )
  if (!existed) await withAdmin((admin) => admin.query(`CREATE DATABASE ${name}`))
  return { ...serverDatabase(name), existed }
}

const serverDatabase = (name: string): BenchDatabase => {
  const kind = "postgres"
  const url = adminUrl()
  url.pathname = `/${name}`
  return {
    kind,
    url: url.toString(),
    offline: false,
    connect: async () => {
      const client = new pg.Client({ connectionString: url.toString() })
      await client.connect()
      return {
        query: async <R>(sql: string, params?: ReadonlyArray<unknown>) => ({
          rows: (await client.query(sql, params as Array<unknown>)).rows as Array<R>
        }),
        end: () => client.end()
      }
    },
    meter: {
      name: "postgres",
      pids: () =>
        withAdmin(async (admin) =>
          (await admin.query<{ pid: number }>("SELECT pid FROM pg_stat_activity WHERE datname = $1", [name])).rows.map((
            row
          ) => row.pid)
        ),
      ...(postgresWork(name, withAdmin) === undefined ? {} : { work: postgresWork(name, withAdmin)! })
    },
    drop: () => withAdmin(async (admin) => void (await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`)))
  }
}
