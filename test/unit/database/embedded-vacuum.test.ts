import { assert, describe, it } from "@effect/vitest"
import { Duration, Effect } from "effect"
import { Reactivity } from "effect/reactivity"
import { SqlClient } from "effect/sql"
import { rmSync } from "node:fs"
import { Database } from "../../../src/database/Database.ts"
import { makeEmbeddedClient } from "../../../src/database/embedded/EmbeddedClient.ts"
import { startSession, StatementAllowance } from "../../../src/database/embedded/EmbeddedSession.ts"
import { AUTOVACUUM, dueTables, vacuumDue } from "../../../src/database/embedded/EmbeddedVacuum.ts"
import { emptyDatabase } from "../../support/databases.ts"
import { eventually } from "../../support/http.ts"
import { emptyDataDir } from "../../support/process.ts"

/** The counters `pg_stat_user_tables` shows are written at the backend's next idle moment; this makes it the next statement. */
const flushCounters = (sql: SqlClient.SqlClient) =>
  Effect.andThen(sql`SELECT pg_stat_force_next_flush()`.unprepared, sql`SELECT 1`.unprepared)

interface Vacuumed {
  readonly vacuums: number
  readonly dead: number
  readonly frozenAge: number
}

const vacuumed = (sql: SqlClient.SqlClient, table: string) =>
  Effect.map(
    sql<{ readonly vacuums: string | number; readonly dead: string | number; readonly frozen_age: number }>`
      SELECT s.vacuum_count AS vacuums, s.n_dead_tup AS dead, age(c.relfrozenxid) AS frozen_age
      FROM pg_stat_user_tables s JOIN pg_class c ON c.oid = s.relid
      WHERE s.relname = ${table}
    `.unprepared,
    (rows): Vacuumed => ({
      vacuums: Number(rows[0]!.vacuums),
      dead: Number(rows[0]!.dead),
      frozenAge: rows[0]!.frozen_age
    })
  )

const names = (sql: SqlClient.SqlClient, thresholds = AUTOVACUUM) =>
  Effect.map(
    Effect.andThen(flushCounters(sql), dueTables(sql, thresholds)),
    (tables) => tables.map((table) => table.name)
  )

describe("VACUUM on the embedded database", () => {
  it.layer(emptyDatabase())((it) => {
    it.effect("every table is vacuumed once; after that, one with dead rows past 50 plus a fifth of it is, one below is left alone", () =>
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        yield* sql`CREATE TABLE vac_churn (id int PRIMARY KEY, k int)`.unprepared
        yield* sql`CREATE TABLE vac_quiet (id int PRIMARY KEY, k int)`.unprepared
        yield* sql`INSERT INTO vac_churn SELECT g, g FROM generate_series(1, 1000) g`.unprepared
        yield* sql`INSERT INTO vac_quiet SELECT g, g FROM generate_series(1, 100) g`.unprepared
        // Never vacuumed: both, and the catalogs with them.
        const first = yield* names(sql)
        assert.include(first, "vac_churn")
        assert.include(first, "vac_quiet")
        assert.include(first, "pg_statistic")
        assert.isAtLeast(yield* vacuumDue(sql), 3)
        assert.strictEqual((yield* vacuumed(sql, "vac_churn")).vacuums, 1)
        assert.strictEqual((yield* vacuumed(sql, "vac_quiet")).vacuums, 1)
        assert.deepStrictEqual(yield* names(sql), [])

        // 300 dead rows of 1 000 (past 50 + 200), 10 of 100 (below 50 + 20).
        yield* sql`UPDATE vac_churn SET k = k + 1 WHERE id <= 300`.unprepared
        yield* sql`UPDATE vac_quiet SET k = k + 1 WHERE id <= 10`.unprepared
        yield* flushCounters(sql)
        assert.strictEqual((yield* vacuumed(sql, "vac_churn")).dead, 300)
        assert.deepStrictEqual(yield* names(sql), ["vac_churn"])
        assert.strictEqual(yield* vacuumDue(sql), 1)
        yield* flushCounters(sql)
        assert.deepStrictEqual(yield* vacuumed(sql, "vac_churn"), {
          ...(yield* vacuumed(sql, "vac_churn")),
          vacuums: 2,
          dead: 0
        })
        assert.strictEqual((yield* vacuumed(sql, "vac_quiet")).vacuums, 1)
        assert.strictEqual((yield* vacuumed(sql, "vac_quiet")).dead, 10)
      }))

    it.effect("a table with rows inserted past 1 000 plus a fifth of it since its last vacuum is vacuumed", () =>
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        yield* sql`CREATE TABLE vac_log (id int PRIMARY KEY)`.unprepared
        yield* sql`INSERT INTO vac_log SELECT g FROM generate_series(1, 5000) g`.unprepared
        yield* flushCounters(sql)
        yield* vacuumDue(sql)
        // 1 000 + 1 000 of 5 000: not yet.
        yield* sql`INSERT INTO vac_log SELECT g FROM generate_series(5001, 7000) g`.unprepared
        assert.notInclude(yield* names(sql), "vac_log")
        yield* sql`INSERT INTO vac_log SELECT g FROM generate_series(7001, 7100) g`.unprepared
        assert.deepStrictEqual(yield* names(sql), ["vac_log"])
        assert.strictEqual(yield* vacuumDue(sql), 1)
        assert.strictEqual((yield* vacuumed(sql, "vac_log")).vacuums, 2)
      }))

    it.effect("a table whose oldest unfrozen transaction id is past the freeze age is vacuumed and frozen", () =>
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        yield* sql`CREATE TABLE vac_old (id int PRIMARY KEY, k int)`.unprepared
        yield* sql`INSERT INTO vac_old SELECT g, g FROM generate_series(1, 100) g`.unprepared
        yield* vacuumDue(sql)
        // Forty transactions, each with its own id; the freeze age lowered to 30.
        for (let i = 0; i < 40; i++) yield* sql`SELECT txid_current()`.unprepared
        const thresholds = { ...AUTOVACUUM, freezeMaxAge: 30 }
        const before = yield* vacuumed(sql, "vac_old")
        assert.isAbove(before.frozenAge, 30)
        assert.include(yield* names(sql, thresholds), "vac_old")
        assert.notInclude(yield* names(sql), "vac_old")
        // Past `vacuum_freeze_table_age` (150 million) a plain VACUUM scans the whole
        // table and freezes the rows older than `vacuum_freeze_min_age` (50 million): both lowered as well.
        yield* sql`SET vacuum_freeze_table_age = 20`.unprepared
        yield* sql`SET vacuum_freeze_min_age = 0`.unprepared
        yield* vacuumDue(sql, thresholds)
        yield* sql`RESET vacuum_freeze_table_age`.unprepared
        yield* sql`RESET vacuum_freeze_min_age`.unprepared
        const after = yield* vacuumed(sql, "vac_old")
        assert.strictEqual(after.vacuums, before.vacuums + 1)
        assert.isBelow(after.frozenAge, 30)
      }))
  })

  it.layer(emptyDatabase())((it) => {
    it.effect("a table whose oldest multixact id is past the multixact freeze age is vacuumed", () =>
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        yield* sql`CREATE TABLE vac_locked (id int PRIMARY KEY, k int)`.unprepared
        yield* sql`INSERT INTO vac_locked VALUES (1, 0)`.unprepared
        yield* flushCounters(sql)
        yield* vacuumDue(sql)
        // A row locked by a transaction and updated by its subtransaction: a multixact each time.
        for (let i = 0; i < 40; i++) {
          yield* sql.withTransaction(Effect.gen(function*() {
            yield* sql`SELECT id FROM vac_locked WHERE id = 1 FOR KEY SHARE`.unprepared
            yield* sql.withTransaction(sql`UPDATE vac_locked SET k = k + 1 WHERE id = 1`.unprepared)
          }))
        }
        const [row] = yield* sql<{ readonly age: number }>`
          SELECT mxid_age(relminmxid) AS age FROM pg_class WHERE relname = 'vac_locked'
        `.unprepared
        assert.isAbove(row!.age, 30)
        const thresholds = { ...AUTOVACUUM, multixactFreezeMaxAge: 30 }
        assert.include(yield* names(sql, thresholds), "vac_locked")
        assert.notInclude(yield* names(sql), "vac_locked")
        const before = yield* vacuumed(sql, "vac_locked")
        yield* vacuumDue(sql, thresholds)
        assert.strictEqual((yield* vacuumed(sql, "vac_locked")).vacuums, before.vacuums + 1)
      }))

    it.effect("a table whose TOAST table passed a threshold is vacuumed, its own rows below it", () =>
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        // 10 000 bytes stored as they are: five TOAST rows for each row.
        yield* sql`CREATE TABLE vac_wide (id int PRIMARY KEY, v text)`.unprepared
        yield* sql`ALTER TABLE vac_wide ALTER COLUMN v SET STORAGE EXTERNAL`.unprepared
        yield* sql`INSERT INTO vac_wide SELECT g, repeat('x', 10000) FROM generate_series(1, 1000) g`.unprepared
        yield* flushCounters(sql)
        yield* vacuumDue(sql)
        // 230 dead rows of 1 000 (below 50 + 200); 1 150 dead TOAST rows of 5 000 (past 50 + 1 000).
        yield* sql`UPDATE vac_wide SET v = repeat('y', 10000) WHERE id <= 230`.unprepared
        assert.deepStrictEqual(yield* names(sql), ["vac_wide"])
        assert.strictEqual(yield* vacuumDue(sql), 1)
        assert.strictEqual((yield* vacuumed(sql, "vac_wide")).vacuums, 2)
        // 500 rows inserted of 1 000 (below 1 000 + 200); 2 500 TOAST rows of 5 000 (past 1 000 + 1 000).
        yield* sql`INSERT INTO vac_wide SELECT g, repeat('x', 10000) FROM generate_series(1001, 1500) g`.unprepared
        assert.deepStrictEqual(yield* names(sql), ["vac_wide"])
        assert.strictEqual(yield* vacuumDue(sql), 1)
        assert.strictEqual((yield* vacuumed(sql, "vac_wide")).vacuums, 3)
      }))
  })

  it.live("a VACUUM longer than the statement timeout does not cost the session", () =>
    Effect.gen(function*() {
      const session = yield* startSession({
        dataDir: undefined,
        // Well above what a catalog query takes on a loaded machine (the
        // suite's other files share its cores), well below the VACUUM.
        statementTimeout: Duration.millis(100),
        transactionTimeout: Duration.seconds(60)
      })
      const sql = yield* makeEmbeddedClient(session).pipe(Effect.provide(Reactivity.layer))
      const allowed = Effect.provideService(StatementAllowance, Duration.minutes(2))
      // The setup and the test's own reads are allowed their time; the VACUUM
      // of 600 000 dead rows and four indexes takes several times the bound
      // (about 300 ms on two cores). The rows are written before the indexes
      // are built, then deleted: a third of the time of writing them through
      // the indexes and updating them, for a VACUUM as long.
      yield* Effect.gen(function*() {
        yield* sql`CREATE TABLE vac_big (id int, k int, v text)`.unprepared
        yield* sql`INSERT INTO vac_big SELECT g, g, md5(g::text) FROM generate_series(1, 600000) g`.unprepared
        yield* sql`ALTER TABLE vac_big ADD PRIMARY KEY (id)`.unprepared
        yield* sql`CREATE INDEX ON vac_big (k)`.unprepared
        yield* sql`CREATE INDEX ON vac_big (v)`.unprepared
        yield* sql`CREATE INDEX ON vac_big (k, v)`.unprepared
        yield* sql`VACUUM`.unprepared
        yield* sql`DELETE FROM vac_big`.unprepared
        yield* flushCounters(sql)
      }).pipe(allowed)
      assert.deepStrictEqual(yield* allowed(names(sql)), ["vac_big"])
      const started = Date.now()
      yield* vacuumDue(sql)
      const tookMs = Date.now() - started
      assert.isFalse(session.isLost())
      assert.isAbove(tookMs, 100, "the VACUUM outlasted the statement timeout")
      assert.strictEqual((yield* allowed(vacuumed(sql, "vac_big"))).vacuums, 2)
    }).pipe(Effect.scoped), { timeout: 120_000 })

  it.live("the embedded database in a data folder vacuums without being asked", () =>
    Effect.gen(function*() {
      const folder = emptyDataDir("svc-vacuum-")
      yield* Effect.addFinalizer(() => Effect.sync(() => rmSync(folder, { recursive: true, force: true })))
      yield* Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        yield* sql`CREATE TABLE vac_kept (id int PRIMARY KEY)`.unprepared
        yield* sql`INSERT INTO vac_kept SELECT g FROM generate_series(1, 500) g`.unprepared
        yield* flushCounters(sql)
        // Within a few rounds of the loop, polled: never a fixed sleep.
        yield* eventually(Effect.map(vacuumed(sql, "vac_kept"), (row) => row.vacuums > 0 ? true : undefined), {
          what: "the table vacuumed",
          timeoutMs: 20_000,
          intervalMs: 100
        })
      }).pipe(Effect.provide(Database.embedded(folder, undefined, { vacuumEvery: "200 millis" })))
    }).pipe(Effect.scoped), { timeout: 60_000 })
})
