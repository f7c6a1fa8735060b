/**
 * Runs PGlite in a worker thread, so database work (which PGlite does
 * synchronously in WebAssembly) never blocks the thread that serves HTTP,
 * and a statement that runs away can be stopped by ending the thread.
 *
 * The worker speaks only to its parent (`EmbeddedSession.ts`), through the
 * thread's message port: one request at a time, in the order they arrive,
 * each answered with its rows or its error. Nothing else can reach it: there
 * is no socket and no wire protocol.
 *
 * The same worker, given a `snapshot` (a copy of the data folder another
 * worker made), opens it in memory: `db query` runs there, never on the
 * session the services share (`readOnlyQuery`, `src/cli/DbCommands.ts`).
 *
 * Values come back as `@effect/sql-pg` decodes them on a PostgreSQL server
 * (see `parsers`), so the services see the same types on either database.
 */
import { PGlite, types } from "@electric-sql/pglite"
import { readFile, writeFile } from "node:fs/promises"
import { parentPort, workerData } from "node:worker_threads"
import { smallPoolStartParams } from "./BufferPool.ts"
import { compiledPglite } from "./CompiledOnce.ts"
import { trimForCopies } from "./CopySnapshot.ts"
import { dumpData } from "./EmbeddedDump.ts"
import { PreparedStatements } from "./EmbeddedPrepared.ts"
import { runStatement } from "./EmbeddedProtocol.ts"

/** Which database the worker opens, and how. */
export interface OpenOptions {
  /** The data folder of the database, or `undefined` for a fresh one in memory. */
  readonly dataDir: string | undefined
  /** A copy of another database's data folder (`snapshot`) to open in memory instead. */
  readonly snapshot?: ArrayBuffer | undefined
  /** A database in memory starts as a copy of this snapshot (`snapshot` below) instead of empty. */
  readonly from?: string | undefined
  /** PGlite compiled already (`CompiledOnce.ts`), instead of compiling it in the worker. */
  readonly wasmModule?: WebAssembly.Module | undefined
  /** A data folder opened for a short while (a CLI command): the small buffer pool (`BufferPool.ts`) a database in memory has. */
  readonly smallBufferPool?: boolean | undefined
}

/** What the session asks of the worker. */
export type Op =
  | {
    readonly op: "query"
    readonly sql: string
    readonly params: ReadonlyArray<unknown>
    readonly types: ReadonlyArray<number>
    readonly values: boolean
    /** Run it as a named prepared statement (`EmbeddedPrepared.ts`). */
    readonly prepare: boolean
  }
  | { readonly op: "exec"; readonly sql: string }
  | { readonly op: "dump" }
  /**
   * A consistent copy of the data folder, as PGlite's `dumpDataDir` makes it
   * (an uncompressed tar): answered, or with `path` written there (tests start
   * fresh databases from it; `forCopies`: trimmed for them, `CopySnapshot.ts`).
   */
  | { readonly op: "snapshot"; readonly path?: string | undefined; readonly forCopies?: boolean | undefined }
  | { readonly op: "stop" }

export type Request = Op & { readonly id: number }

export interface Answer {
  readonly id: number
  readonly result?: {
    readonly rows: ReadonlyArray<unknown>
    readonly command: string | undefined
    readonly affectedRows: number | undefined
  }
  readonly dump?: string
  readonly snapshot?: ArrayBuffer
  readonly error?: Record<string, unknown>
}

/** Text-format parsers giving the values `@effect/sql-pg`'s binary codecs give. */
const parsers = {
  // int8: bigint, always (PGlite's default gives a number when it fits).
  [types.INT8]: (value: string) => BigInt(value),
  // date: the calendar date as PostgreSQL prints it, not a Date at local midnight.
  [types.DATE]: (value: string) => value,
  // timestamp without time zone: that wall-clock time read as UTC.
  [types.TIMESTAMP]: (value: string) =>
    value === "infinity" || value === "-infinity" ? new Date(Number.NaN) : new Date(`${value.replace(" ", "T")}Z`),
  [types.TIMESTAMPTZ]: (value: string) =>
    value === "infinity" || value === "-infinity" ? new Date(Number.NaN) : new Date(value)
}

const port = parentPort!

/**
 * Started early (`EarlyWorker.ts`): PGlite's modules load and its
 * WebAssembly compiles while the parent is still loading its own; the
 * first message says which database to open.
 */
const openEarly = async (): Promise<OpenOptions> => {
  const compiling = compiledPglite().then((module) => module, () => undefined)
  const opened = await new Promise<OpenOptions>((resolve) => port.once("message", resolve))
  return { ...opened, wasmModule: opened.wasmModule ?? await compiling }
}

const options: OpenOptions = (workerData as { readonly early?: boolean } | undefined)?.early === true
  ? await openEarly()
  : workerData as OpenOptions

const describe = (cause: unknown): Record<string, unknown> => {
  if (typeof cause !== "object" || cause === null) return { message: String(cause) }
  const error = cause as Record<string, unknown>
  const out: Record<string, unknown> = { message: error.message ?? String(cause) }
  for (
    const field of [
      "code",
      "constraint",
      "detail",
      "hint",
      "severity",
      "schema",
      "table",
      "column",
      "position",
      "routine"
    ]
  ) {
    if (typeof error[field] === "string") out[field] = error[field]
  }
  return out
}

try {
  const db = await PGlite.create({
    ...(options.dataDir === undefined ? {} : { dataDir: options.dataDir }),
    ...(options.wasmModule === undefined ? {} : { pgliteWasmModule: options.wasmModule }),
    ...(options.dataDir === undefined || options.smallBufferPool === true
      ? { startParams: [...smallPoolStartParams] }
      : {}),
    ...(options.snapshot !== undefined
      ? { loadDataDir: new Blob([options.snapshot]) }
      : options.from !== undefined
      ? { loadDataDir: new Blob([await readFile(options.from)]) }
      : {}),
    parsers
  })
  // Requests run strictly in arrival order: a transaction's statements and
  // its COMMIT must not overtake one another.
  let chain: Promise<void> = Promise.resolve()
  const prepared = new PreparedStatements()
  const handle = async (request: Request): Promise<Answer> => {
    switch (request.op) {
      case "query":
        // One call into PGlite per statement (`EmbeddedProtocol.ts`).
        return {
          id: request.id,
          result: await runStatement(
            db,
            request.sql,
            request.params,
            request.types,
            request.values,
            request.prepare ? prepared : undefined
          )
        }
      case "exec": {
        const last = (await db.exec(request.sql)).at(-1)
        return {
          id: request.id,
          result: {
            rows: last?.rows ?? [],
            command: (last as { command?: string } | undefined)?.command,
            affectedRows: last?.affectedRows
          }
        }
      }
      case "dump":
        return { id: request.id, dump: await dumpData(db) }
      case "snapshot": {
        if (request.forCopies === true) await trimForCopies(db)
        const tar = await db.dumpDataDir("none")
        if (request.path === undefined) return { id: request.id, snapshot: await tar.arrayBuffer() }
        await writeFile(request.path, new Uint8Array(await tar.arrayBuffer()))
        return { id: request.id }
      }
      case "stop":
        await db.close()
        return { id: request.id }
    }
  }
  port.on("message", (request: Request) => {
    chain = chain.then(() =>
      handle(request).then(
        (answer) => port.postMessage(answer, answer.snapshot === undefined ? [] : [answer.snapshot]),
        (cause) => port.postMessage({ id: request.id, error: describe(cause) } satisfies Answer)
      )
    )
  })
  port.postMessage({ type: "ready" })
} catch (cause) {
  port.postMessage({ type: "failed", message: cause instanceof Error ? cause.message : String(cause) })
}
