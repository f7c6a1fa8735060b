/**
 * The HTTP service on HOST:PORT (default 127.0.0.1:8080), on PostgreSQL
 * when DATABASE_URL is set, else on the embedded database in SVC_DATA_DIR,
 * until a signal (SIGTERM and Ctrl-C drain in-flight requests and exit 0).
 * Run by `npm start` (src/main.ts) and `svc start` (src/cli/main.ts), which
 * give it the CLI's admin channel.
 */
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import { Cause, Effect, Exit, Fiber, Layer } from "effect"
import { HttpServer } from "effect/http"
import type { SqlClient } from "effect/sql"
import { createServer } from "node:http"
import { Database, DatabaseInfo } from "../database/Database.ts"
import { SvcConfig } from "../platform/Config.ts"
import { LoggingLive } from "../platform/Logging.ts"
import { startFailure } from "../platform/StartFailure.ts"
import { AppLive, PlatformLive } from "./App.ts"
import { ListenLater } from "./Listener.ts"
import { reportStartFailure } from "./Refusal.ts"

// Listens only once AppLive is built (routes, migrations, workers).
const NodeServerLive = Layer.unwrap(Effect.map(SvcConfig, (config) =>
  ListenLater.layer(() => {
    const server = createServer({ headersTimeout: 30_000, requestTimeout: 60_000 })
    // SVC_MAX_CONNECTIONS: connections beyond it are closed at once (event streams hold theirs open).
    server.maxConnections = config.maxConnections
    return server
  }, {
    port: config.port,
    host: config.host,
    gracefulShutdownTimeout: "20 seconds"
  })))

/** The address this process announced, once it listens: the stop line names it (and is logged only then). */
let announced: string | undefined

const Announce = Layer.effectDiscard(Effect.gen(function*() {
  const server = yield* HttpServer.HttpServer
  const database = yield* DatabaseInfo
  const address = server.address._tag === "UnixPathAddress"
    ? server.address.path
    : `http://${String(server.address.address)}:${server.address.port}`
  yield* Effect.logInfo("svc listening").pipe(Effect.annotateLogs({ address, database: database.kind }))
  announced = address
}))

/** The first stop signal the process received, if any. */
let signalled: NodeJS.Signals | undefined
const recordSignals = () => {
  for (const signal of ["SIGINT", "SIGTERM"] as const) process.once(signal, () => (signalled ??= signal))
}

const exitCodeOf = (exit: Exit.Exit<unknown, unknown>) =>
  Exit.isSuccess(exit) || Cause.hasInterruptsOnly(exit.cause) ? 0 : startFailure(exit.cause).exitCode

/**
 * One line when a server that listened has stopped (in-flight requests
 * answered, workers and the database closed), like the start's: why (the
 * signal, or the failure that stopped it) and the exit code.
 */
const announceStop = (exit: Exit.Exit<unknown, unknown>) => {
  if (announced === undefined) return Effect.void
  const code = exitCodeOf(exit)
  const reason = signalled ??
    (code === 0 ? "interrupted" : startFailure(Exit.isFailure(exit) ? exit.cause : Cause.empty).message)
  // Info either way: a failure that stopped it was logged as an error when it happened.
  return Effect.logInfo("svc stopped").pipe(
    Effect.annotateLogs({
      address: announced,
      reason,
      ...(signalled === undefined ? {} : { signal: signalled }),
      exit_code: code
    })
  )
}

/** What runs beside the HTTP service on what it has built: the CLI's admin channel (`src/cli/AdminChannel.ts`), given by the entry point. */
export type Beside = Layer.Layer<
  never,
  Error,
  Layer.Success<typeof AppLive> | Layer.Success<typeof Database.layer> | SvcConfig | HttpServer.HttpServer
>

const mainLive = (channel: Beside) =>
  Announce.pipe(
    Layer.provideMerge(channel),
    Layer.provideMerge(AppLive),
    Layer.provide(NodeServerLive),
    Layer.provideMerge(Database.layer),
    Layer.provide(PlatformLive),
    Layer.provide(LoggingLive)
  )

/**
 * Runs until a signal, or until the database session is lost for good (the
 * embedded worker died or overran its watchdog): then the program fails,
 * which stops the HTTP server (requests in flight get their answers) and
 * exits 1, so that a supervisor restarts it on the same data.
 */
const Serve = Layer.effectDiscard(
  Effect.gen(function*() {
    const database = yield* DatabaseInfo
    const why = yield* database.lost
    yield* Effect.logError("the database session is lost; stopping so that a supervisor restarts svc").pipe(
      Effect.annotateLogs({ reason: why })
    )
    return yield* Effect.fail(new Error(`database session lost: ${why}`))
  }).pipe(Effect.forkScoped, Effect.flatMap(Fiber.join))
)

// `channel`: the CLI's admin channel (the entry points give it: the server
// imports nothing of the CLI). `beside`: more work on the server's
// database, for as long as it runs (tests add faults with it).
// A signal interrupts the program: that is a clean stop (exit 0), not a failure.
export const runServer = (options: {
  readonly channel?: Beside
  readonly beside?: Layer.Layer<never, never, SqlClient.SqlClient>
} = {}): void => {
  recordSignals()
  Layer.launch(
    Layer.merge(Serve, options.beside ?? Layer.empty).pipe(Layer.provideMerge(mainLive(options.channel ?? Layer.empty)))
  ).pipe(
    Effect.onExit(announceStop),
    Effect.provide(LoggingLive),
    Effect.tapCause(reportStartFailure),
    NodeRuntime.runMain({
      disableErrorReporting: true,
      teardown: (exit, onExit) => onExit(exitCodeOf(exit))
    })
  )
}
