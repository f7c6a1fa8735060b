/**
 * `npm start` and `svc start`: the HTTP service on HOST:PORT (default
 * 127.0.0.1:8080), on PostgreSQL when DATABASE_URL is set, else on the
 * embedded database in SVC_DATA_DIR. SIGTERM and Ctrl-C drain in-flight
 * requests and exit 0.
 */
import * as module from "node:module"
import { embeddedDatabase } from "./platform/EntrySettings.ts"

// Node's compile cache (in the system's temporary folder): most of a start
// is compiling modules, which the cache cuts by about a third.
module.enableCompileCache?.()

// The embedded database's worker loads PGlite while the server's modules load.
if (embeddedDatabase()) (await import("./database/embedded/EarlyWorker.ts")).startEarlyWorker()
// A setting svc cannot use ends the start before the server's modules load.
if (await (await import("./server/Refusal.ts")).settingsUsable()) {
  const [{ runServer }, { AdminChannelLive }] = await Promise.all([
    import("./server/Serve.ts"),
    import("./cli/AdminChannel.ts")
  ])
  runServer({ channel: AdminChannelLive })
}
