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
 * Speeds up: a governed step's database work stays flat as a session's
 * steps accumulate. Without statistics, the allowed step's statement
 * (`StepStatement.ts`) keeps the generic plan it got when `agent_steps` was
 * nearly empty, which finds a re-sent `step_id` through the index on
 * `(session_id, seq)`, reading every earlier step of the session, instead
 * of the primary key `(session_id, step_id)`. Measured in one process
 * (`BENCH_BEFORE=<checkout without this> BENCH_KINDS=allow
 * npx node bench/inprocess/step-statement.ts`, 36 rounds of 1 000 steps
 * over 16 sessions on a fresh data folder, 90 s, load average 6 to 7):
 * PGlite's thread per allowed step went from 330 µs to 2 080 without
 * this; with it, the same growth until the first round (1 030 µs after
 * 28 000 steps), then 280 to 380 (bench/notes/embedded.md, "The embedded
 * database against the server, per unit of work"). That look-up no longer
 * depends on the first round (migration `0740_step_lookup_plans`: the
 * ordered index cannot serve it), but every other plan does. The check itself costs
 * PGlite's thread 1.7 to 2.1 ms (measured unprepared; it runs prepared),
 * once per `ANALYZE_EVERY`; an `ANALYZE` at `STATISTICS_TARGET` 12 to 13
 * ms for a table of 22 000 to 122 000 rows.
 *
 * `VACUUM`, autovacuum's other half, has its own thresholds and loop
 * (`EmbeddedVacuum.ts`).
 */
import { Duration, Effect, Schema, type Scope } from "effect"
import type { SqlClient } from "effect/sql"
import type { SqlError } from "effect/sql/SqlError"
import { rowsOf } from "../../platform/Rows.ts"
import { forkSupervised } from "../../platform/Supervised.ts"

/**
 * How often the tables' changes are compared with the threshold:
 * autovacuum's naptime. A statement planned before the first round keeps
 * its plan until then (a minute of a fresh data folder; the statistics
 * are kept in the data folder, so a restart plans with them).
 */
const ANALYZE_EVERY = Duration.seconds(60)

/**
 * The statistics target of these `ANALYZE`s (a server's default is 100):
 * a sample of 3 000 rows and 10 most common values per column. Enough to
 * choose among svc's indexes, and a quarter to a tenth of the time: on
 * PGlite a table of 22 000 webhook events took 58 ms of CPU at 100 and 13
 * at 10; one of 122 000, 155 and 12.
 */
const STATISTICS_TARGET = 10

const StaleRows = rowsOf("pg_stat_user_tables", Schema.Struct({ name: Schema.String }))

/**
 * The tables whose rows changed more than autovacuum's analyze threshold
 * since their last `ANALYZE` (`autovacuum_analyze_threshold` 50 plus
 * `autovacuum_analyze_scale_factor` 0.1 of the rows: a never analyzed table
 * counts as empty), most changed first, as quoted names.
 */
export const staleTables = (sql: SqlClient.SqlClient): Effect.Effect<ReadonlyArray<string>, SqlError> =>
  Effect.map(
    StaleRows.decoded(sql`
      SELECT s.relid::regclass::text AS name
      FROM pg_stat_user_tables s JOIN pg_class c ON c.oid = s.relid
      WHERE s.n_mod_since_analyze > 50 + 0.1 * greatest(c.reltuples, 0)
      ORDER BY s.n_mod_since_analyze DESC
    `),
    (rows) => rows.map((row) => row.name)
  )

/**
 * Analyzes every table past the threshold, one statement each, at
 * `STATISTICS_TARGET`, set on the session for them (only `ANALYZE` reads
 * it; a round that fails midway leaves it set, and the next sets it
 * again); answers how many.
 */
export const analyzeStale = (sql: SqlClient.SqlClient): Effect.Effect<number, SqlError> =>
  Effect.gen(function*() {
    const tables = yield* staleTables(sql)
    if (tables.length === 0) return 0
    yield* sql.unsafe(`SET default_statistics_target = ${STATISTICS_TARGET}`).unprepared
    for (const name of tables) yield* sql.unsafe(`ANALYZE ${name}`).unprepared
    yield* sql`RESET default_statistics_target`.unprepared
    return tables.length
  })

/** The loop: waits `every`, analyzes what passed the threshold, for the life of the scope. */
export const keepStatistics = (
  sql: SqlClient.SqlClient,
  every: Duration.Input = ANALYZE_EVERY
): Effect.Effect<void, never, Scope.Scope> =>
  forkSupervised({
    name: "the embedded database's statistics",
    round: Effect.andThen(Effect.sleep(every), analyzeStale(sql))
  })
