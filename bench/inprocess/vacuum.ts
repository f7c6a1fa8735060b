/**
 * `npx node bench/inprocess/vacuum.ts`: what `VACUUM` on the embedded
 * database costs and buys (`src/database/embedded/EmbeddedVacuum.ts`), through svc's
 * own client on fresh data folders with svc's schema, the loops held off
 * (their rounds are run here, when the study says).
 *
 * 1. A round's check (`dueTables`) with nothing due: PGlite's thread per
 *    check, and the first round of a fresh data folder (every table once,
 *    the catalogs with them).
 * 2. A `VACUUM` of a table of 100 000 and 1 000 000 rows (an id, a
 *    timestamp and a text of 50 bytes; the primary key and an index on the
 *    timestamp) after a tenth of its rows were updated, timestamp included.
 * 3. An update-heavy loop: `BENCH_UPDATES` (default 200 000) single-row
 *    updates spread over 1 000 rows, each moving the row's timestamp (as a
 *    delivery's `next_attempt_at` moves: no HOT update, every update
 *    writes the index too), without `VACUUM` and with a round every
 *    `BENCH_ROUND_EVERY` updates (default 60 000: the 60 s naptime at
 *    1 000 updates a second). The table's size every `BENCH_SAMPLE_EVERY`
 *    updates (default 40 000), and the data folder's after a `CHECKPOINT`.
 *
 * Measured (24 Nov 2026, three runs on the 2-core machine shared with
 * other work, load average 3 to 8; the last with `BENCH_UPDATES=400000`):
 *
 * - the first round of a fresh data folder: 85 tables (svc's and the
 *   catalogs), PGlite's thread 120 to 160 ms (190 to 560 ms in all);
 * - a check with nothing due: PGlite's thread 1.3 to 1.5 ms (2.0 to 3.8
 *   in all);
 * - `VACUUM`, a tenth of the rows updated: 100 000 rows (13.5 MB) 20 ms of
 *   PGlite's thread (20 to 55 in all); 1 000 000 rows (134 MB) 170 to 290
 *   ms (350 to 500 in all);
 * - the table with its indexes, every 40 000 updates, without `VACUUM`:
 *   2.0, 3.6, 5.2, 6.8, 8.4, 10.1, 11.7, 13.4, 15.0, 16.6 MB (41 bytes an
 *   update, without end); with a round every 60 000: 1.9, 3.2, 3.6, 3.6,
 *   3.8, 3.6, 3.6, 3.8, 3.8, 3.8 MB (six rounds, 122 ms of `VACUUM`).
 *   `base/` after 400 000: 39.6 MB against 26.7 (26 of them the empty
 *   schema); the data folder, 184 against 171 MB, is mostly WAL segments
 *   kept for reuse.
 */
import { PgClient } from "@effect/sql-pg"
import { Context, Effect, Layer } from "effect"
import { mkdtempSync, readdirSync, rmSync, statSync } from "node:fs"
import { loadavg, tmpdir } from "node:os"
import * as path from "node:path"
import { Database } from "../../src/database/Database.ts"
import { dueTables, vacuumDue } from "../../src/database/embedded/EmbeddedVacuum.ts"
import { Migrations } from "../../src/database/Migrations.ts"
import { ownThreads } from "./threads.ts"

const UPDATES = Number(process.env.BENCH_UPDATES ?? 200_000)
const ROUND_EVERY = Number(process.env.BENCH_ROUND_EVERY ?? 60_000)
/** How often the table's size is taken during the loop. */
const SAMPLE_EVERY = Number(process.env.BENCH_SAMPLE_EVERY ?? 40_000)

const folder = mkdtempSync(path.join(tmpdir(), "vacuum-study-"))

/** Bytes of the files under `dir`. */
const du = (dir: string): number => {
  let total = 0
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const full = path.join(dir, entry.name)
    total += entry.isDirectory() ? du(full) : statSync(full).size
  }
  return total
}

const mb = (bytes: number) => `${(bytes / 1024 / 1024).toFixed(1)} MB`

/** A fresh data folder with svc's schema, the maintenance loops held off. */
const open = (name: string) =>
  Effect.map(
    Layer.build(Migrations.layer.pipe(Layer.provideMerge(Database.embedded(path.join(folder, name), undefined, {
      statisticsEvery: "1 day",
      vacuumEvery: "1 day"
    })))),
    (context) => Context.get(context, PgClient.PgClient)
  )

const timed = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  Effect.gen(function*() {
    const cpu = ownThreads().worker
    const started = performance.now()
    const value = yield* effect
    return { value, ms: performance.now() - started, workerMs: (ownThreads().worker - cpu) / 1000 }
  })

const flush = (sql: PgClient.PgClient) =>
  Effect.andThen(sql`SELECT pg_stat_force_next_flush()`.unprepared, sql`SELECT 1`.unprepared)

console.log(`load average ${loadavg().map((x) => x.toFixed(1)).join(" ")}`)

await Effect.runPromise(Effect.scoped(Effect.gen(function*() {
  // 1. The check, and the first round.
  yield* Effect.scoped(Effect.gen(function*() {
    const sql = yield* open("check")
    yield* flush(sql)
    const first = yield* timed(vacuumDue(sql))
    console.log(
      `first round of a fresh data folder: ${first.value} tables, ${first.ms.toFixed(0)} ms (PGlite's thread ${
        first.workerMs.toFixed(0)
      } ms)`
    )
    yield* flush(sql)
    for (let i = 0; i < 20; i++) yield* dueTables(sql) // prepared, warm
    const n = 200
    const checks = yield* timed(Effect.gen(function*() {
      let due = 0
      for (let i = 0; i < n; i++) due += (yield* dueTables(sql)).length
      return due
    }))
    console.log(
      `a check with ${checks.value / n} tables due: ${(checks.ms / n).toFixed(2)} ms each, PGlite's thread ${
        (checks.workerMs / n).toFixed(2)
      } ms`
    )
  }))

  // 2. A VACUUM after a tenth of the rows changed.
  for (const rows of [100_000, 1_000_000]) {
    yield* Effect.scoped(Effect.gen(function*() {
      const sql = yield* open(`table-${rows}`)
      yield* sql.unsafe(`CREATE TABLE study (id int PRIMARY KEY, at timestamptz NOT NULL DEFAULT now(), v text)`)
        .unprepared
      yield* sql`CREATE INDEX ON study (at)`.unprepared
      yield* sql.unsafe(`INSERT INTO study (id, v) SELECT g, repeat('x', 50) FROM generate_series(1, ${rows}) g`)
        .unprepared
      yield* sql`VACUUM study`.unprepared
      yield* sql`UPDATE study SET at = at + interval '1 second' WHERE id % 10 = 0`.unprepared
      const [size] = yield* sql<{ readonly bytes: string }>`SELECT pg_total_relation_size('study')::text AS bytes`
        .unprepared
      const vacuum = yield* timed(sql`VACUUM study`.unprepared)
      console.log(
        `VACUUM of ${rows} rows (${mb(Number(size!.bytes))}), a tenth updated: ${
          vacuum.ms.toFixed(0)
        } ms (PGlite's thread ${vacuum.workerMs.toFixed(0)} ms)`
      )
    }))
  }

  // 3. The update-heavy loop, without and with the rounds.
  for (const arm of ["without", "with"] as const) {
    yield* Effect.scoped(Effect.gen(function*() {
      const sql = yield* open(`churn-${arm}`)
      yield* sql`CREATE TABLE churn (id int PRIMARY KEY, at timestamptz NOT NULL DEFAULT now(), attempts int NOT NULL DEFAULT 0, v text)`
        .unprepared
      yield* sql`CREATE INDEX ON churn (at)`.unprepared
      yield* sql`INSERT INTO churn (id, v) SELECT g, repeat('x', 100) FROM generate_series(1, 1000) g`.unprepared
      // Both arms start from the first round (every table once), as svc's first minute does.
      yield* flush(sql)
      yield* vacuumDue(sql)
      let rounds = 0
      let roundMs = 0
      const sizes: Array<string> = []
      const loop = yield* timed(Effect.gen(function*() {
        for (let i = 1; i <= UPDATES; i++) {
          yield* sql`UPDATE churn SET at = now() + ${
            i % 997
          } * interval '1 millisecond', attempts = attempts + 1 WHERE id = ${(i * 7919) % 1000 + 1}`
          if (arm === "with" && i % ROUND_EVERY === 0) {
            yield* flush(sql)
            const round = yield* timed(vacuumDue(sql))
            rounds += round.value
            roundMs += round.ms
          }
          if (i % SAMPLE_EVERY === 0) {
            const [size] = yield* sql<{ readonly total: string }>`SELECT pg_total_relation_size('churn')::text AS total`
            sizes.push(`${i / 1000}k: ${mb(Number(size!.total))}`)
          }
        }
      }))
      yield* sql`CHECKPOINT`.unprepared
      const [size] = yield* sql<{ readonly heap: string; readonly total: string }>`
        SELECT pg_relation_size('churn')::text AS heap, pg_total_relation_size('churn')::text AS total
      `.unprepared
      const pgdata = path.join(folder, `churn-${arm}`, "pgdata")
      console.log(
        `${UPDATES} updates of 1 000 rows ${arm} VACUUM: table ${mb(Number(size!.heap))}, with indexes ${
          mb(Number(size!.total))
        }; ` +
          `base/ ${mb(du(path.join(pgdata, "base")))}, data folder ${mb(du(pgdata))}; ` +
          `${(loop.ms / 1000).toFixed(1)} s, ${rounds} VACUUMs taking ${roundMs.toFixed(0)} ms`
      )
      console.log(`  the table with its indexes after ${sizes.join(", ")}`)
    }))
  }
})))

console.log(`load average ${loadavg().map((x) => x.toFixed(1)).join(" ")}`)
rmSync(folder, { recursive: true, force: true })
