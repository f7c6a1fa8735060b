/**
 * `npx node bench/inprocess/round-trip.ts`: what one statement costs svc
 * around the database's own work, on the embedded database's client
 * (`src/database/embedded/EmbeddedSession.ts`: a message to PGlite's worker thread
 * and back) and, with `BENCH_DATABASE_URL`, on `@effect/sql-pg` against a
 * scratch database of that server. The statement does nearly nothing
 * (`SELECT $1::int AS n`, prepared), so what is left is the client: Effect,
 * the thread crossing or the wire protocol, and on the database side the
 * protocol handling of one statement.
 *
 * Run one statement at a time (`sequential`: each crossing wakes a sleeping
 * thread) and 16 at once (`16 in flight`: the other thread is usually
 * awake), in alternating blocks in one process. Reported per statement, µs:
 * the database's CPU (PGlite's worker thread, or the server's backends from
 * /proc), this process's main thread and V8's helper threads.
 *
 * `BENCH_BEFORE=<checkout>` adds an embedded database opened by that
 * checkout's client (`src/database/Database.ts` there) in the same
 * alternation: an A/B of the client in one process.
 *
 * `BENCH_BLOCK` statements per block (default 4 000), `BENCH_ROUNDS`
 * rounds (default 4). /proc counts CPU in 10 ms ticks.
 */
import { PgClient } from "@effect/sql-pg"
import { Context, Effect, Layer, Redacted } from "effect"
import { Database, type DatabaseLayer } from "../../src/database/Database.ts"
import { checkoutModule } from "../support/checkoutModule.ts"
import { cpuMicros } from "../support/cpu.ts"
import { alternate, ownThreads } from "./threads.ts"

const BLOCK = Number(process.env.BENCH_BLOCK ?? 4_000)
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 4)
const serverUrl = process.env.BENCH_DATABASE_URL

type Mode = "sequential" | "16 in flight"

const prepare = (name: string, layer: DatabaseLayer) =>
  Effect.gen(function*() {
    const context = yield* Layer.build(layer)
    const sql = Context.get(context, PgClient.PgClient)
    const backends = () =>
      name !== "server" ? Effect.succeed(0) : Effect.map(
        sql<{ pid: number }>`SELECT pid FROM pg_stat_activity WHERE datname = current_database()`,
        (rows) => rows.reduce((sum, row) => sum + cpuMicros(row.pid), 0)
      )
    const one = (i: number) => sql`SELECT ${i}::int AS n`
    const block = (mode: Mode) =>
      Effect.gen(function*() {
        const before = ownThreads()
        const db0 = yield* backends()
        if (mode === "sequential") {
          for (let i = 0; i < BLOCK; i++) yield* one(i)
        } else {
          yield* Effect.forEach(Array.from({ length: 16 }, (_, k) => k), (k) =>
            Effect.gen(function*() {
              for (let i = k; i < BLOCK; i += 16) yield* one(i)
            }), { concurrency: 16, discard: true })
        }
        const db1 = yield* backends()
        const after = ownThreads()
        return {
          database: (name !== "server" ? after.worker - before.worker : db1 - db0) / BLOCK,
          main: (after.main - before.main) / BLOCK,
          helpers: (after.helpers - before.helpers) / BLOCK
        }
      })
    return { name, block }
  })

await Effect.runPromise(Effect.scoped(Effect.gen(function*() {
  const databases = [yield* prepare("pglite", Database.memory)]
  const before = process.env.BENCH_BEFORE
  if (before !== undefined && before !== "") {
    const other = yield* Effect.promise(() => import(checkoutModule(before, "database/Database.ts")))
    databases.push(yield* prepare("pglite before", other.Database.memory))
  }
  if (serverUrl !== undefined && serverUrl !== "") {
    databases.push(yield* prepare("server", Database.scratch(Redacted.make(serverUrl))))
  }
  const modes: ReadonlyArray<Mode> = ["sequential", "16 in flight"]
  yield* alternate(databases, modes, ROUNDS, (process.env.BENCH_PER_ROUND ?? "main") as "main")
})))
process.exit(0)
