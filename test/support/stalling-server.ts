/**
 * svc's server (`src/main.ts`) that, on SIGUSR2, runs one statement on its
 * database that sleeps 30 s: a statement past the embedded database's
 * watchdog, from outside the process (nothing an operator or a tenant sends
 * runs one on the server's session).
 */
import { Effect, Layer } from "effect"
import { SqlClient } from "effect/sql"
import { AdminChannelLive } from "../../src/cli/AdminChannel.ts"
import { runServer } from "../../src/server/Serve.ts"

const Stall = Layer.effectDiscard(Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  process.on("SIGUSR2", () => void Effect.runFork(Effect.ignore(sql`SELECT pg_sleep(30)`)))
}))

// With the admin channel, as `src/main.ts` runs it: the CLI reaches the data through it.
runServer({ channel: AdminChannelLive, beside: Stall })
