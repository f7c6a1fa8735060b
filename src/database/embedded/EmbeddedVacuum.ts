/**
 * `VACUUM` on the embedded database, as autovacuum would run it. PGlite is
 * one PostgreSQL backend with no autovacuum launcher, so without this
 * nothing ever vacuums there: the space of deleted and updated rows is
 * never marked reusable in the free space map (pruning within a page
 * aside), so the data folder grows with every update of the update-heavy
 * tables (deliveries, targets, sessions), and no row is ever frozen, so the
 * transaction ids head for wraparound (at 1 000 writes a second, 2^31 of
 * them in some 24 days; a backend outside a postmaster only warns there).
 *
 * Every `VACUUM_EVERY` it asks which tables passed one of autovacuum's
 * thresholds and vacuums those, one plain `VACUUM` each (never `FULL`, which
 * rewrites the table), so other statements take turns with them on the
 * session. A table is due when, in `pg_stat_all_tables` and `pg_class`:
 *
 * - its dead rows passed `autovacuum_vacuum_threshold` 50 plus
 *   `autovacuum_vacuum_scale_factor` 0.2 of its rows;
 * - the rows inserted since its last vacuum passed
 *   `autovacuum_vacuum_insert_threshold` 1 000 plus
 *   `autovacuum_vacuum_insert_scale_factor` 0.2 of its rows (an
 *   insert-only table is frozen and marked all-visible in steps);
 * - the age of its oldest unfrozen transaction id passed
 *   `autovacuum_freeze_max_age` 200 million (of multixact ids,
 *   `autovacuum_multixact_freeze_max_age` 400 million); a plain `VACUUM`
 *   past `vacuum_freeze_table_age` scans the whole table and freezes it;
 * - it was never vacuumed since the statistics began: a fresh data folder,
 *   or the first round after a crash (which resets them, dead-row counts
 *   included).
 *
 * A table's TOAST table is vacuumed with it and counts towards it. The
 * system catalogs count as well: `ANALYZE` (`EmbeddedStatistics.ts`)
 * rewrites `pg_statistic` every round, and their rows need freezing like
 * any other.
 *
 * A `VACUUM` holds the session for a time that grows with the table and its
 * indexes, so the watchdog gives it `VACUUM_BYTES_PER_SECOND` of allowance
 * on top of `SVC_DB_STATEMENT_TIMEOUT` (`StatementAllowance`). It runs at
 * full speed, as a `VACUUM` not run by autovacuum does (`vacuum_cost_delay`
 * 0): the session has nothing to share the disk with, and on PGlite a cost
 * delay breaks the session (tried: that `VACUUM` and every later statement
 * fail with "CommitTransactionCommand: unexpected state DEFAULT").
 *
 * What it costs and buys (`npx node bench/inprocess/vacuum.ts`, three runs
 * on the shared 2-core machine, load 3 to 8; docs/operations.md,
 * "Maintenance of the embedded database"): a round with nothing due is one
 * statement of 1.3 to 1.5 ms of PGlite's thread (2 to 4 ms in all); the
 * first round of a fresh data folder, 85 tables with the catalogs, 120 to
 * 160 ms of it. A `VACUUM` after a tenth of the rows were updated: 20 ms
 * for 100 000 rows (13.5 MB with two indexes), 170 to 290 ms of CPU (350 to
 * 500 ms in all) for 1 000 000 (134 MB). Under single-row updates of a
 * 1 000-row table with an indexed timestamp (no HOT update), without it the
 * table and its indexes grew by 41 bytes an update (8.4 to 9.1 MB after
 * 200 000, 16.6 after 400 000: 3.5 GB a day at 1 000 updates a second);
 * with a round every 60 000 updates they stayed at 3.6 to 3.8 MB from the
 * second round on (six rounds, 122 ms of `VACUUM` in all).
 */
import { Duration, Effect, Schema, type Scope } from "effect"
import type { SqlClient } from "effect/sql"
import type { SqlError } from "effect/sql/SqlError"
import { BigIntText, rowsOf } from "../../platform/Rows.ts"
import { forkSupervised } from "../../platform/Supervised.ts"
import { StatementAllowance } from "./EmbeddedSession.ts"

/** How often the tables are compared with the thresholds: autovacuum's naptime. */
const VACUUM_EVERY = Duration.seconds(60)

/**
 * The slowest rate a `VACUUM` is expected to read its table, TOAST and
 * indexes at: the watchdog's allowance for it is its size at this rate.
 * Measured 230 MB/s for a table read back from the OS's cache after a
 * restart (1 000 000 rows and two indexes, 160 MB, 710 ms) and 850 MB/s
 * from shared buffers: this is a twentieth of the slower, for a slow disk and a
 * busy machine.
 */
const VACUUM_BYTES_PER_SECOND = 10 * 1024 * 1024

/** The thresholds a table is compared with (tests lower them). */
export interface VacuumThresholds {
  /** `autovacuum_vacuum_threshold` and `autovacuum_vacuum_scale_factor`: dead rows. */
  readonly deadRows: number
  readonly deadRowsScale: number
  /** `autovacuum_vacuum_insert_threshold` and `autovacuum_vacuum_insert_scale_factor`: rows inserted since the last vacuum. */
  readonly insertedRows: number
  readonly insertedRowsScale: number
  /** `autovacuum_freeze_max_age`: transactions since the oldest unfrozen transaction id of the table. */
  readonly freezeMaxAge: number
  /** `autovacuum_multixact_freeze_max_age`: the same of multixact ids. */
  readonly multixactFreezeMaxAge: number
}

/** A PostgreSQL server's defaults. */
export const AUTOVACUUM: VacuumThresholds = {
  deadRows: 50,
  deadRowsScale: 0.2,
  insertedRows: 1000,
  insertedRowsScale: 0.2,
  freezeMaxAge: 200_000_000,
  multixactFreezeMaxAge: 400_000_000
}

const DueRows = rowsOf("pg_stat_all_tables", Schema.Struct({ name: Schema.String, bytes: BigIntText }))

/**
 * The tables past one of the thresholds (see above), the ones past the
 * freeze age first, then the ones with the most dead rows: each one's
 * quoted name and its size with TOAST and indexes.
 */
export const dueTables = (
  sql: SqlClient.SqlClient,
  thresholds: VacuumThresholds = AUTOVACUUM
): Effect.Effect<ReadonlyArray<{ readonly name: string; readonly bytes: number }>, SqlError> =>
  Effect.map(
    DueRows.decoded(sql`
      SELECT c.oid::regclass::text AS name, pg_total_relation_size(c.oid) AS bytes
      FROM pg_class c
      JOIN pg_stat_all_tables s ON s.relid = c.oid
      LEFT JOIN pg_class t ON t.oid = c.reltoastrelid
      LEFT JOIN pg_stat_all_tables ts ON ts.relid = t.oid
      WHERE c.relkind IN ('r', 'm') AND c.relpersistence <> 't'
        AND (
          s.vacuum_count + s.autovacuum_count = 0
          OR s.n_dead_tup > ${thresholds.deadRows} + ${thresholds.deadRowsScale}::float8 * greatest(c.reltuples, 0)
          OR s.n_ins_since_vacuum > ${thresholds.insertedRows} + ${thresholds.insertedRowsScale}::float8 * greatest(c.reltuples, 0)
          OR ts.n_dead_tup > ${thresholds.deadRows} + ${thresholds.deadRowsScale}::float8 * greatest(t.reltuples, 0)
          OR ts.n_ins_since_vacuum > ${thresholds.insertedRows} + ${thresholds.insertedRowsScale}::float8 * greatest(t.reltuples, 0)
          OR greatest(age(c.relfrozenxid), age(t.relfrozenxid)) > ${thresholds.freezeMaxAge}
          OR greatest(mxid_age(c.relminmxid), mxid_age(t.relminmxid)) > ${thresholds.multixactFreezeMaxAge}
        )
      ORDER BY greatest(age(c.relfrozenxid), age(t.relfrozenxid)) > ${thresholds.freezeMaxAge} DESC,
        s.n_dead_tup + coalesce(ts.n_dead_tup, 0) DESC
    `),
    (rows) => rows.map((row) => ({ name: row.name, bytes: Number(row.bytes) }))
  )

/** Vacuums every table past a threshold, one statement each, each with its allowance; answers how many. */
export const vacuumDue = (
  sql: SqlClient.SqlClient,
  thresholds: VacuumThresholds = AUTOVACUUM
): Effect.Effect<number, SqlError> =>
  Effect.gen(function*() {
    const tables = yield* dueTables(sql, thresholds)
    for (const table of tables) {
      const allowance = Duration.millis(Math.ceil(table.bytes / VACUUM_BYTES_PER_SECOND * 1000))
      yield* sql.unsafe(`VACUUM ${table.name}`).unprepared.pipe(Effect.provideService(StatementAllowance, allowance))
    }
    return tables.length
  })

/** The loop: waits `every`, vacuums what passed a threshold, for the life of the scope. */
export const keepVacuumed = (
  sql: SqlClient.SqlClient,
  every: Duration.Input = VACUUM_EVERY
): Effect.Effect<void, never, Scope.Scope> =>
  forkSupervised({
    name: "the embedded database's vacuum",
    round: Effect.andThen(Effect.sleep(every), vacuumDue(sql))
  })
