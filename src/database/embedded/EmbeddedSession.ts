/**
 * The embedded database's one owner: PGlite (a single PostgreSQL session)
 * in a worker thread (`embedded-worker.ts`), reached through PGlite's own
 * `query`/`exec` API over the thread's message port, and offered to the
 * services as an `@effect/sql-pg` `PgClient` compiled with the same
 * PostgreSQL dialect (`EmbeddedClient.ts`). The services, the migrations
 * and `@effect/sql-pg` on a server are unchanged. This file holds the
 * session: the worker, its watchdog, and what is said when it is lost.
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
import { Context, Deferred, Duration, Effect, Scope } from "effect"
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
import { siblingModule, startWorker } from "../../platform/ModuleUrl.ts"
import { takeEarlyWorker } from "./EarlyWorker.ts"
import type { Answer, Op, OpenOptions, Request } from "./embedded-worker.ts"

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
export const StatementAllowance = Context.Reference<Duration.Duration>(
  "svc/platform/EmbeddedSession/StatementAllowance",
  {
    defaultValue: () => Duration.zero
  }
)

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
  new SqlError({
    reason: new ConnectionError({ cause: new Error(why), message: `embedded database: ${why}`, operation })
  })

export const unknownError = (message: string, operation: string, cause = message) =>
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
    ? new UniqueViolation({
      ...props,
      constraint: typeof error.constraint === "string" && error.constraint.trim() !== "" ? error.constraint : "unknown"
    })
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

export const millis = (duration: Duration.Duration) => `${Math.round(Duration.toMillis(duration))} ms`

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
    const pending = new Map<
      number,
      { readonly resume: (answer: Answer | SqlError) => void; readonly timer: NodeJS.Timeout }
    >()

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
    worker.on(
      "error",
      (error: Error & { code?: string }) =>
        lose(`the database worker failed: ${error.code ?? ""} ${error.message}`.trim())
    )
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
