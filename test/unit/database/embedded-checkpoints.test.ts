import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { SqlClient } from "effect/sql"
import { rmSync } from "node:fs"
import { Database } from "../../../src/database/Database.ts"
import { checkpointIfDue, keepCheckpoints } from "../../../src/database/embedded/EmbeddedCheckpoints.ts"
import { eventually } from "../../support/http.ts"
import { emptyDataDir } from "../../support/process.ts"

const redo = (sql: SqlClient.SqlClient) =>
  Effect.map(
    sql<{ readonly redo: string }>`SELECT redo_lsn::text AS redo FROM pg_control_checkpoint()`.unprepared,
    (rows) => rows[0]!.redo
  )

/** About 4 MB of WAL. */
const write = (sql: SqlClient.SqlClient) =>
  sql`INSERT INTO checkpoint_rows SELECT g, repeat('x', 400) FROM generate_series(1, 8000) g`.unprepared

/** A data folder, as svc runs the embedded database (a database in memory has no WAL files to bound). */
const inFolder = <A, E>(body: (sql: SqlClient.SqlClient) => Effect.Effect<A, E, SqlClient.SqlClient>) =>
  Effect.gen(function*() {
    const folder = emptyDataDir("svc-checkpoints-")
    yield* Effect.addFinalizer(() => Effect.sync(() => rmSync(folder, { recursive: true, force: true })))
    return yield* Effect.flatMap(SqlClient.SqlClient, body).pipe(Effect.provide(Database.embedded(folder)))
  }).pipe(Effect.scoped)

describe("checkpoints on the embedded database", () => {
  it.live(
    "a checkpoint runs once the WAL since the last one passes its bound, and not before",
    () =>
      inFolder((sql) =>
        Effect.gen(function*() {
          yield* sql`CREATE TABLE checkpoint_rows (id int, v text)`.unprepared
          yield* write(sql)
          const before = yield* redo(sql)
          assert.isFalse(yield* checkpointIfDue(sql, { walBytes: 64 * 1024 * 1024, timeout: "1 hour" }))
          assert.strictEqual(yield* redo(sql), before)
          assert.isTrue(yield* checkpointIfDue(sql, { walBytes: 1024 * 1024, timeout: "1 hour" }))
          assert.notStrictEqual(yield* redo(sql), before)
          // Nothing written since: not due, however short the time bound.
          assert.isFalse(yield* checkpointIfDue(sql, { walBytes: 1024 * 1024, timeout: "1 millis" }))
          yield* write(sql)
          assert.isTrue(yield* checkpointIfDue(sql, { walBytes: 64 * 1024 * 1024, timeout: "1 millis" }))
        })
      ),
    { timeout: 60_000 }
  )

  it.live("the loop moves the redo point while writes go on", () =>
    inFolder((sql) =>
      Effect.gen(function*() {
        yield* sql`CREATE TABLE checkpoint_rows (id int, v text)`.unprepared
        const before = yield* redo(sql)
        yield* keepCheckpoints(sql, { every: "20 millis", bounds: { walBytes: 1024 * 1024, timeout: "1 hour" } })
        yield* write(sql)
        yield* eventually(Effect.map(redo(sql), (now) => now !== before ? now : undefined), { what: "a checkpoint" })
      }).pipe(Effect.scoped)
    ), { timeout: 60_000 })
})
