/**
 * `npm start`: the HTTP service on HOST:PORT (default 127.0.0.1:8080), on
 * PostgreSQL when DATABASE_URL is set, else on the embedded database in
 * SVC_DATA_DIR. SIGTERM and Ctrl-C drain in-flight requests and exit 0.
 */
import { NodeRuntime } from "@effect/platform-node"
import { Cause, Effect, Exit, Layer } from "effect"
import { HttpServer } from "effect/http"
import { createServer } from "node:http"
import { Database, DatabaseInfo } from "./platform/Database.ts"
import { SvcConfig } from "./platform/Config.ts"
import { LoggingLive } from "./platform/Logging.ts"
import { AppLive, PlatformLive } from "./server/App.ts"
import { ListenLater } from "./server/Listener.ts"

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

const Announce = Layer.effectDiscard(Effect.gen(function*() {
  const server = yield* HttpServer.HttpServer
  const database = yield* DatabaseInfo
  const address = server.address._tag === "UnixPathAddress"
    ? server.address.path
    : `http://${String(server.address.address)}:${server.address.port}`
  yield* Effect.logInfo("svc listening").pipe(Effect.annotateLogs({ address, database: database.kind }))
}))

const MainLive = Announce.pipe(
  Layer.provideMerge(AppLive),
  Layer.provide(NodeServerLive),
  Layer.provideMerge(Database.layer),
  Layer.provide(PlatformLive),
  Layer.provide(LoggingLive)
)

// A signal interrupts the program: that is a clean stop (exit 0), not a failure.
Layer.launch(MainLive).pipe(
  Effect.provide(LoggingLive),
  NodeRuntime.runMain({
    teardown: (exit, onExit) =>
      onExit(Exit.isSuccess(exit) || Cause.hasInterruptsOnly(exit.cause) ? 0 : 1)
  })
)
