/**
 * The embedded database's one owner: PGlite (a single PostgreSQL session)
 * in a worker thread (`embedded-worker.ts`), reached through PGlite's own
 * `query`/`exec` API over the thread's message port, and offered to the
 * services as an `@effect/sql-pg` `PgClient` compiled with the same
 * PostgreSQL dialect (`PgClient.makeCompiler`). The services, the
 * migrations and `@effect/sql-pg` on a server are unchanged.
 *
 * - No other client: nothing listens on a socket or a port, so nothing
 *   outside this process can reach, stall or change the session.
 * - One holder at a time: a semaphore lends the session to one statement,
 *   or to one transaction for its whole length; everything else waits.
 * - A watchdog: a statement that has not answered within
 *   `SVC_DB_STATEMENT_TIMEOUT` (PGlite ignores `statement_timeout`), plus
 *   the `StatementAllowance` of maintenance such as `VACUUM`, ends the
 *   worker. A transaction that holds the session longer than
 *   `SVC_DB_IDLE_IN_TRANSACTION_TIMEOUT` plus the statement timeout is
 *   interrupted, which rolls it back and frees the session.
 * - A lost session is said: when the worker exits or fails (out of memory,
 *   ended by the watchdog), every waiting and later statement fails with a
 *   `ConnectionError` (requests answer 503) and `lost` completes, on which
 *   the process stops (`main.ts`) so that its supervisor restarts it.
 *
 * Why a worker and not the main thread: PGlite runs a statement
 * synchronously in WebAssembly, so on the main thread a slow statement
 * stalls every request, `/health` included, and no timer can stop it; in a
 * worker it costs one message each way per statement (figures in
 * `bench/notes/embedded.md`).
 */
import { PgClient, PgTypes } from "@effect/sql-pg"
import { Context, Deferred, Duration, Effect, Fiber, Scope, Semaphore, Stream } from "effect"
import { Reactivity } from "effect/reactivity"
import { SqlClient } from "effect/sql"
import type { Connection } from "effect/sql/SqlConnection"
import * as Statement from "effect/sql/Statement"
import {
  ConnectionError,
  ConstraintError,
  DeadlockError,
  SerializationError,
  SqlError,
  SqlSyntaxError,
  StatementTimeoutError,
  UniqueViolation,
  UnknownError
} from "effect/sql/SqlError"
import type { ResourceLimits, Worker } from "node:worker_threads"
import type { Answer, Op, OpenOptions, Request } from "./embedded-worker.ts"
import { siblingModule, startWorker } from "../../platform/ModuleUrl.ts"
import { takeEarlyWorker } from "./EarlyWorker.ts"
import { countStatement, type TransactionState } from "../WorkCounts.ts"

export interface EmbeddedSessionOptions extends OpenOptions {
  /** The watchdog: how long one statement may run. */
  readonly statementTimeout: Duration.Duration
  /** How long a transaction may hold the session beyond one statement's time. */
  readonly transactionTimeout: Duration.Duration
  /** The worker thread's memory bounds. */
  readonly resourceLimits?: ResourceLimits | undefined
  /** The name the watchdog gives its bound when it ends the worker (default `SVC_DB_STATEMENT_TIMEOUT`). */
  readonly limitName?: string | undefined
}

/**
 * Time the watchdog adds to `SVC_DB_STATEMENT_TIMEOUT` for the statements
 * of the fiber that provides it: for maintenance that cannot be split and
 * whose time grows with a table (`VACUUM`, `EmbeddedVacuum.ts`), which the
 * bound made for requests' statements would otherwise turn into a lost
 * session. Zero unless provided.
 */
export const StatementAllowance = Context.Reference<Duration.Duration>("svc/platform/EmbeddedSession/StatementAllowance", {
  defaultValue: () => Duration.zero
})

/** The worker and what it owes: requests in flight, each with its watchdog. */
export interface EmbeddedSession {
  /** Runs `op`; the watchdog waits `SVC_DB_STATEMENT_TIMEOUT` plus `allowance` for its answer. */
  readonly request: (op: Op, allowance?: Duration.Duration) => Effect.Effect<Answer, SqlError>
  /** Completes, with why, when the session is gone (the worker exited, failed, or overran the watchdog). */
  readonly lost: Effect.Effect<string>
  /** Whether the session is gone. */
  readonly isLost: () => boolean
  /** Ends the worker as a crash would (tests). */
  readonly crash: () => void
  readonly statementTimeout: Duration.Duration
  readonly transactionTimeout: Duration.Duration
}

const lostError = (why: string, operation: string) =>
  new SqlError({ reason: new ConnectionError({ cause: new Error(why), message: `embedded database: ${why}`, operation }) })

const unknownError = (message: string, operation: string, cause = message) =>
  new SqlError({ reason: new UnknownError({ cause: new Error(cause), message, operation }) })

/** The same classification `@effect/sql-pg` gives a server's SQLSTATE. */
const classify = (error: Record<string, unknown>, operation: string): SqlError => {
  const cause = Object.assign(new Error(String(error.message)), error)
  const props = { cause, message: String(error.message), operation }
  const code = typeof error.code === "string" ? error.code : undefined
  const reason = code === undefined
    ? new UnknownError(props)
    : code.startsWith("08")
    ? new ConnectionError(props)
    : code.startsWith("42")
    ? new SqlSyntaxError(props)
    : code === "23505"
    ? new UniqueViolation({ ...props, constraint: typeof error.constraint === "string" && error.constraint.trim() !== "" ? error.constraint : "unknown" })
    : code.startsWith("23")
    ? new ConstraintError(props)
    : code === "40P01"
    ? new DeadlockError(props)
    : code === "40001"
    ? new SerializationError(props)
    : code === "57014"
    ? new StatementTimeoutError(props)
    : new UnknownError(props)
  return new SqlError({ reason })
}

const PgJson = Statement.custom<Statement.Custom<"PgJson", unknown>>("PgJson")

const millis = (duration: Duration.Duration) => `${Math.round(Duration.toMillis(duration))} ms`

/**
 * Starts the worker and waits for PGlite to open; stops it (closing PGlite
 * cleanly, or ending the thread after 10 s) when the scope closes.
 */
export const startSession = (options: EmbeddedSessionOptions): Effect.Effect<EmbeddedSession, SqlError, Scope.Scope> =>
  Effect.gen(function*() {
    const worker = yield* Effect.callback<Worker, SqlError>((resume) => {
      const workerData = {
        dataDir: options.dataDir,
        snapshot: options.snapshot,
        from: options.from,
        wasmModule: options.wasmModule,
        smallBufferPool: options.smallBufferPool
      }
      const transferList = options.snapshot === undefined ? [] : [options.snapshot]
      // A worker the entry point started early (`EarlyWorker.ts`) has no memory bounds.
      const early = options.resourceLimits === undefined ? takeEarlyWorker() : undefined
      early?.postMessage(workerData, transferList)
      const worker = early ?? startWorker(siblingModule("./embedded-worker.ts", import.meta.url), {
        workerData,
        transferList,
        ...(options.resourceLimits === undefined ? {} : { resourceLimits: options.resourceLimits })
      })
      const failed = (message: string) => {
        void worker.terminate()
        resume(Effect.fail(lostError(`failed to start: ${message}`, "connect")))
      }
      const onError = (error: Error) => failed(error.message)
      const onExit = (code: number) => failed(`the worker exited (${code})`)
      worker.once("error", onError)
      worker.once("exit", onExit)
      worker.once("message", (message: { type: string; message?: string }) => {
        worker.off("error", onError)
        worker.off("exit", onExit)
        if (message.type === "ready") resume(Effect.succeed(worker))
        else failed(message.message ?? "unknown")
      })
    })

    const lost = yield* Deferred.make<string>()
    let lostBecause: string | undefined
    let stopping = false
    let nextId = 1
    const pending = new Map<number, { readonly resume: (answer: Answer | SqlError) => void; readonly timer: NodeJS.Timeout }>()

    const lose = (why: string) => {
      if (lostBecause !== undefined) return
      lostBecause = why
      for (const [, entry] of pending) {
        clearTimeout(entry.timer)
        entry.resume(lostError(why, "execute"))
      }
      pending.clear()
      Deferred.doneUnsafe(lost, Effect.succeed(why))
      void worker.terminate()
    }

    worker.on("message", (answer: Answer) => {
      const entry = pending.get(answer.id)
      if (entry === undefined) return
      pending.delete(answer.id)
      clearTimeout(entry.timer)
      entry.resume(answer)
    })
    worker.on("error", (error: Error & { code?: string }) => lose(`the database worker failed: ${error.code ?? ""} ${error.message}`.trim()))
    worker.on("exit", (code) => {
      if (!stopping) lose(`the database worker exited (${code})`)
    })

    const timeoutMs = Duration.toMillis(options.statementTimeout)
    const limitName = options.limitName ?? "SVC_DB_STATEMENT_TIMEOUT"
    const request = (op: Op, allowance: Duration.Duration = Duration.zero): Effect.Effect<Answer, SqlError> =>
      Effect.callback<Answer, SqlError>((resume) => {
        if (lostBecause !== undefined) return resume(Effect.fail(lostError(lostBecause, op.op)))
        const id = nextId++
        // The watchdog: PGlite cannot cancel a statement, so one that runs
        // past the bound costs the session. It keeps running when the
        // fiber that asked is interrupted: the worker is still busy with it.
        // Per statement: no Duration built unless an allowance was given.
        const boundMs = Duration.isZero(allowance) ? timeoutMs : timeoutMs + Duration.toMillis(allowance)
        // Decided once the loop has taken in the answers that came meanwhile:
        // a main thread kept busy past the bound is not a statement past it.
        const timer = setTimeout(() =>
          setImmediate(() =>
            pending.has(id) && lose(
              Duration.isZero(allowance)
                ? `a statement ran longer than ${limitName} (${millis(options.statementTimeout)})`
                : `a statement ran longer than ${limitName} plus its allowance (${Math.round(boundMs)} ms)`
            )
          ), boundMs)
        pending.set(id, {
          timer,
          resume: (answer) =>
            resume(
              answer instanceof SqlError
                ? Effect.fail(answer)
                : answer.error !== undefined
                ? Effect.fail(classify(answer.error, op.op))
                : Effect.succeed(answer)
            )
        })
        worker.postMessage({ id, ...op } as Request)
      })

    yield* Effect.addFinalizer(() =>
      Effect.callback<void>((resume) => {
        if (lostBecause !== undefined) return resume(Effect.void)
        stopping = true
        const id = nextId++
        const done = () => {
          clearTimeout(timer)
          pending.delete(id)
          void worker.terminate().then(() => resume(Effect.void))
        }
        const timer = setTimeout(done, 10_000)
        pending.set(id, { timer, resume: done })
        worker.postMessage({ id, op: "stop" } satisfies Request)
      })
    )

    return {
      request,
      lost: Deferred.await(lost),
      isLost: () => lostBecause !== undefined,
      crash: () => void worker.terminate(),
      statementTimeout: options.statementTimeout,
      transactionTimeout: options.transactionTimeout
    }
  })

const OID = PgTypes.OID
const INT32_MIN = -2147483648
const INT32_MAX = 2147483647
/** Array types of the element types `scalarOid` gives. */
const ARRAY_OF: Record<number, number> = {
  [OID.bool]: 1000,
  [OID.int4]: 1007,
  [OID.int8]: 1016,
  [OID.float8]: 1022,
  [OID.text]: 1009,
  [OID.timestamptz]: 1185,
  [OID.bytea]: 1001
}

/**
 * The type `@effect/sql-pg` binds a JavaScript value with (its
 * `inferScalar`), so PostgreSQL resolves operators and functions the same
 * way on both databases: a string stays untyped (0), the statement decides.
 */
const scalarOid = (value: unknown): number => {
  switch (typeof value) {
    case "boolean":
      return OID.bool
    case "bigint":
      return OID.int8
    case "number":
      return Number.isInteger(value) && value >= INT32_MIN && value <= INT32_MAX
        ? OID.int4
        : Number.isSafeInteger(value)
        ? OID.int8
        : OID.float8
    case "string":
      return 0
  }
  if (value instanceof Date) return OID.timestamptz
  if (value instanceof Uint8Array) return OID.bytea
  return 0
}

const arrayOid = (values: ReadonlyArray<unknown>): number => {
  for (const element of values) {
    if (element === null || element === undefined) continue
    const oid = scalarOid(element)
    return ARRAY_OF[oid === 0 ? OID.text : oid] ?? 0
  }
  return 0
}

/** Parameters as PGlite takes them, with the types to bind them as. */
const toPglite = (params: ReadonlyArray<unknown>): { readonly params: ReadonlyArray<unknown>; readonly types: ReadonlyArray<number> } => {
  const out: Array<unknown> = new Array(params.length)
  const types: Array<number> = new Array(params.length)
  for (let i = 0; i < params.length; i++) {
    const value = params[i]
    if (value === undefined || value === null) {
      out[i] = null
      types[i] = 0
    } else if (PgTypes.isParameter(value)) {
      types[i] = value.oid
      out[i] = value.value === null
        ? null
        : value.oid === OID.json || value.oid === OID.jsonb
        ? JSON.stringify(value.value, (_, v) => typeof v === "bigint" ? v.toString() : v)
        : value.value
    } else if (Array.isArray(value)) {
      types[i] = value.length === 0 ? 0 : arrayOid(value)
      out[i] = value.length === 0 ? "{}" : value
    } else {
      types[i] = scalarOid(value)
      out[i] = value
    }
  }
  return { params: out, types }
}

class EmbeddedConnection implements Connection, TransactionState {
  inTransaction = false
  readonly session: EmbeddedSession
  constructor(session: EmbeddedSession) {
    this.session = session
  }
  private run(sql: string, params: ReadonlyArray<unknown>, values = false, prepare = true) {
    const bound = toPglite(params)
    return Effect.map(
      Effect.withFiber((fiber) =>
        this.session.request(
          { op: "query", sql, params: bound.params, types: bound.types, values, prepare },
          fiber.getRef(StatementAllowance)
        )
      ),
      (answer) => {
        const result = answer.result!
        countStatement(this, result.command, result.affectedRows)
        return result
      }
    )
  }
  execute(sql: string, params: ReadonlyArray<unknown>, transformRows: (<A extends object>(row: ReadonlyArray<A>) => ReadonlyArray<A>) | undefined) {
    return Effect.map(this.run(sql, params), (result) => transformRows ? transformRows(result.rows as Array<object>) : result.rows)
  }
  executeRaw(sql: string, params: ReadonlyArray<unknown>) {
    return this.run(sql, params)
  }
  executeValues(sql: string, params: ReadonlyArray<unknown>) {
    return Effect.map(this.run(sql, params, true), (result) => result.rows as ReadonlyArray<ReadonlyArray<unknown>>)
  }
  // Unprepared, as on a server: the unnamed statement, parsed each time.
  executeValuesUnprepared(sql: string, params: ReadonlyArray<unknown>) {
    return Effect.map(this.run(sql, params, true, false), (result) => result.rows as ReadonlyArray<ReadonlyArray<unknown>>)
  }
  executeUnprepared(sql: string, params: ReadonlyArray<unknown>, transformRows: (<A extends object>(row: ReadonlyArray<A>) => ReadonlyArray<A>) | undefined) {
    return Effect.map(this.run(sql, params, false, false), (result) => transformRows ? transformRows(result.rows as Array<object>) : result.rows)
  }
  executeStream(sql: string, params: ReadonlyArray<unknown>, transformRows: (<A extends object>(row: ReadonlyArray<A>) => ReadonlyArray<A>) | undefined) {
    return Stream.fromArrayEffect(this.execute(sql, params, transformRows))
  }
}

/** PostgreSQL answers `ROLLBACK` to the `COMMIT` of an aborted transaction (as `PgClient` checks). */
const commit = (conn: Connection): Effect.Effect<void, SqlError> =>
  Effect.flatMap(
    conn.executeRaw("COMMIT", []) as Effect.Effect<{ readonly command: string | undefined }, SqlError>,
    (result) =>
      result.command === "ROLLBACK"
        ? Effect.fail(unknownError("COMMIT rolled back an aborted transaction", "commit"))
        : Effect.void
  )

/**
 * The `PgClient` over `session`. LISTEN is not offered (one session has no
 * one else to hear it: `Wakeups` wakes in-process); NOTIFY is accepted and
 * goes nowhere.
 */
export const makeEmbeddedClient = (session: EmbeddedSession): Effect.Effect<PgClient.PgClient, never, Scope.Scope | Reactivity.Reactivity> =>
  Effect.gen(function*() {
    const connection = new EmbeddedConnection(session)
    const semaphore = Semaphore.makeUnsafe(1)
    const holdBound = Duration.sum(session.transactionTimeout, session.statementTimeout)
    // A transaction (or a reserved connection) holds the session until its
    // scope closes; past the bound its fiber is interrupted, which rolls it back.
    const acquirer = Effect.uninterruptibleMask((restore) =>
      Effect.gen(function*() {
        const holder = Fiber.getCurrent()!
        const scope = Context.getUnsafe(holder.context, Scope.Scope)
        yield* restore(semaphore.take(1))
        const watchdog = yield* Effect.forkDetach(
          Effect.sleep(holdBound).pipe(
            Effect.andThen(Effect.logWarning(
              `a transaction held the embedded database longer than ${millis(holdBound)}; it is interrupted and rolled back`
            )),
            Effect.andThen(Fiber.interrupt(holder))
          )
        )
        yield* Scope.addFinalizer(scope, Effect.andThen(Fiber.interrupt(watchdog), semaphore.release(1)))
        return connection as Connection
      })
    )
    const client = yield* SqlClient.make({
      acquirer,
      borrower: (f) => semaphore.withPermit(f(connection)),
      transactionAcquirer: acquirer,
      compiler: PgClient.makeCompiler(undefined, true),
      driver: "pglite",
      prepareTransactionControls: true,
      commit,
      releaseSavepoint: (name) => `RELEASE SAVEPOINT ${name}`,
      spanAttributes: [["db.system.name", "postgresql"], ["db.namespace", "postgres"]]
    })
    return Object.assign(client, {
      [PgClient.TypeId]: PgClient.TypeId,
      config: {} as PgClient.PgClientConfig,
      // The fragment `PgClient.json` makes: the compiler turns it into a jsonb parameter.
      json: (value: unknown) => Statement.fragment([PgJson(value, undefined, undefined)]),
      listen: (_channel: string) =>
        Effect.fail(unknownError(
          "the embedded database is one session: LISTEN has no one to hear",
          "listen",
          "LISTEN needs a PostgreSQL server"
        )),
      notify: (_channel: string, _payload: string) => Effect.void
    }) as unknown as PgClient.PgClient
  })
