/**
 * Planner statistics on the embedded database. PGlite is one PostgreSQL
 * backend with no autovacuum launcher, so nothing ever runs `ANALYZE`
 * there, and a statement prepared while its tables were small (every
 * statement of a fresh data folder, prepared with the process:
 * `EmbeddedPrepared.ts`) keeps the generic plan made for small tables for
 * the life of the process. On a PostgreSQL server autovacuum analyzes a
 * table once 50 rows plus a tenth of it changed, which also makes the
 * server plan its prepared statements again. This does the same on the
 * embedded database: every `ANALYZE_EVERY` it asks which tables passed
 * autovacuum's analyze threshold and analyzes those, one statement each,
 * so other statements take turns with them on the session. `ANALYZE`
 * samples at most 30 000 rows of a table, so each holds the session for a
 * bounded time, whatever the table's size.
 *
 * What it buys: a governed step's database work stays flat as a session's
 * steps accumulate. Without statistics, the allowed step's statement
 * (`StepStatement.ts`) keeps the generic plan it got when `agent_steps` was
 * nearly empty, which finds a re-sent `step_id` through the index on
 * `(session_id, seq)`, reading every earlier step of the session, instead
 * of the primary key `(session_id, step_id)`. Measured in one process
 * (`BENCH_BEFORE=<checkout without this> BENCH_KINDS=allow,pending
 * npx node bench/inprocess/step-statement.ts`, 14 rounds of 1 000 steps over
 * 16 sessions, load average 5): PGlite's thread per allowed step 330 µs
 * in the first round and 1 300 in the last before, 280 to 390 throughout
 * with this (docs/performance.md, "The embedded database against the
 * server, per unit of work"). The check itself costs PGlite's thread 1.7
 * to 2.1 ms (measured unprepared; it runs prepared), once per
 * `ANALYZE_EVERY`.
 *
 * Not done here: `VACUUM`. Without it PGlite never marks the space of
 * deleted or updated rows reusable (pruning within a page aside) nor
 * freezes old rows; see docs/performance.md.
 */
import { Duration, Effect, type Scope } from "effect"
import type { SqlClient } from "effect/sql"
import type { SqlError } from "effect/sql/SqlError"
import { forkSupervised } from "./Supervised.ts"

/** How often the tables' changes are compared with the threshold (autovacuum's naptime is 60 s; a fresh table fills fast). */
export const ANALYZE_EVERY = Duration.seconds(5)

/**
 * The tables whose rows changed more than autovacuum's analyze threshold
 * since their last `ANALYZE` (`autovacuum_analyze_threshold` 50 plus
 * `autovacuum_analyze_scale_factor` 0.1 of the rows: a never analyzed table
 * counts as empty), most changed first, as quoted names.
 */
export const staleTables = (sql: SqlClient.SqlClient): Effect.Effect<ReadonlyArray<string>, SqlError> =>
  Effect.map(
    sql<{ readonly name: string }>`
      SELECT s.relid::regclass::text AS name
      FROM pg_stat_user_tables s JOIN pg_class c ON c.oid = s.relid
      WHERE s.n_mod_since_analyze > 50 + 0.1 * greatest(c.reltuples, 0)
      ORDER BY s.n_mod_since_analyze DESC
    `,
    (rows) => rows.map((row) => row.name)
  )

/** Analyzes every table past the threshold, one statement each; answers how many. */
export const analyzeStale = (sql: SqlClient.SqlClient): Effect.Effect<number, SqlError> =>
  Effect.flatMap(staleTables(sql), (tables) =>
    Effect.as(
      Effect.forEach(tables, (name) => sql.unsafe(`ANALYZE ${name}`).unprepared, { discard: true }),
      tables.length
    ))

/** The loop: waits `every`, analyzes what passed the threshold, for the life of the scope. */
export const keepStatistics = (sql: SqlClient.SqlClient, every: Duration.Input = ANALYZE_EVERY): Effect.Effect<void, never, Scope.Scope> =>
  forkSupervised({
    name: "the embedded database's statistics",
    round: Effect.andThen(Effect.sleep(every), analyzeStale(sql))
  })
