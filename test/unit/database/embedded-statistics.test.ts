import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { SqlClient } from "effect/sql"
import { rmSync } from "node:fs"
import { Database } from "../../../src/database/Database.ts"
import { analyzeStale, staleTables } from "../../../src/database/embedded/EmbeddedStatistics.ts"
import { emptyDatabase } from "../../support/databases.ts"
import { eventually } from "../../support/http.ts"
import { emptyDataDir } from "../../support/process.ts"

/** The counters `pg_stat_user_tables` shows are written at the backend's next idle moment; this makes it the next statement. */
const flushCounters = (sql: SqlClient.SqlClient) =>
  Effect.andThen(sql`SELECT pg_stat_force_next_flush()`.unprepared, sql`SELECT 1`.unprepared)

const analyzed = (sql: SqlClient.SqlClient, table: string) =>
  Effect.map(
    sql<{ readonly analyzed: boolean }>`
      SELECT (last_analyze IS NOT NULL) AS analyzed FROM pg_stat_user_tables WHERE relname = ${table}
    `.unprepared,
    (rows) => rows[0]?.analyzed === true
  )

describe("planner statistics on the embedded database", () => {
  it.layer(emptyDatabase())((it) => {
    it.effect("a table changed by more than 50 rows plus a tenth of it is analyzed, one changed by less is not", () =>
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        yield* sql`CREATE TABLE stats_grown (id int PRIMARY KEY, k int)`.unprepared
        yield* sql`CREATE TABLE stats_few (id int PRIMARY KEY, k int)`.unprepared
        yield* sql`INSERT INTO stats_grown SELECT g, g % 7 FROM generate_series(1, 1000) g`.unprepared
        yield* sql`INSERT INTO stats_few SELECT g, g FROM generate_series(1, 50) g`.unprepared
        yield* flushCounters(sql)
        const stale = yield* staleTables(sql)
        assert.include(stale, "stats_grown")
        assert.notInclude(stale, "stats_few")
        assert.isAtLeast(yield* analyzeStale(sql), 1)
        assert.isTrue(yield* analyzed(sql, "stats_grown"))
        assert.isFalse(yield* analyzed(sql, "stats_few"))
        yield* flushCounters(sql)
        assert.notInclude(yield* staleTables(sql), "stats_grown")
        // A tenth of 1 000 rows plus 50 more: past the threshold again.
        yield* sql`UPDATE stats_grown SET k = k + 1 WHERE id <= 160`.unprepared
        yield* flushCounters(sql)
        assert.include(yield* staleTables(sql), "stats_grown")
      }))
  })

  it.live(
    "the embedded database in a data folder analyzes what changed without being asked",
    () =>
      Effect.gen(function*() {
        const folder = emptyDataDir("svc-stats-")
        yield* Effect.addFinalizer(() => Effect.sync(() => rmSync(folder, { recursive: true, force: true })))
        yield* Effect.gen(function*() {
          const sql = yield* SqlClient.SqlClient
          yield* sql`CREATE TABLE stats_kept (id int PRIMARY KEY)`.unprepared
          yield* sql`INSERT INTO stats_kept SELECT g FROM generate_series(1, 500) g`.unprepared
          yield* flushCounters(sql)
          // Within a few rounds of the loop, polled: never a fixed sleep.
          yield* eventually(Effect.map(analyzed(sql, "stats_kept"), (done) => done ? true : undefined), {
            what: "the table analyzed",
            timeoutMs: 20_000,
            intervalMs: 100
          })
        }).pipe(Effect.provide(Database.embedded(folder, undefined, { statisticsEvery: "200 millis" })))
      }).pipe(Effect.scoped),
    { timeout: 60_000 }
  )
})
