/**
 * The database work counts (`src/database/WorkCounts.ts`) follow the work on
 * either database: a statement outside a transaction is one transaction, a
 * transaction's statements and its control statements count as statements
 * and the whole as one transaction, a rolled back one commits nothing, and
 * the rows of INSERT, UPDATE and DELETE are counted as their tags report.
 */
import { assert, describe, layer } from "@effect/vitest"
import { Effect } from "effect"
import { SqlClient } from "effect/sql"
import { readWorkCounts, type WorkCounts } from "../../../src/database/WorkCounts.ts"
import { databases } from "../../support/databases.ts"

/** What `body` added to the counts (nothing else runs on this database meanwhile). */
const counted = <A, E, R>(body: Effect.Effect<A, E, R>) =>
  Effect.gen(function*() {
    const before = readWorkCounts()
    yield* body
    const after = readWorkCounts()
    return {
      statements: after.statements - before.statements,
      transactions: after.transactions - before.transactions,
      rowsWritten: after.rowsWritten - before.rowsWritten
    } satisfies WorkCounts
  })

for (const [name, database] of databases) {
  layer(database(), { excludeTestServices: true })(`work counts on ${name}`, (it) => {
    describe("statements, transactions and rows written", () => {
      it.effect("a statement alone is a transaction; a transaction counts its BEGIN and COMMIT and commits once", () =>
        Effect.gen(function*() {
          const sql = yield* SqlClient.SqlClient
          yield* sql`CREATE TABLE IF NOT EXISTS work_probe (id int PRIMARY KEY, note text)`
          const alone = yield* counted(sql`INSERT INTO work_probe (id) VALUES (1), (2), (3)`)
          assert.deepStrictEqual(alone, { statements: 1, transactions: 1, rowsWritten: 3 })
          const read = yield* counted(sql`SELECT count(*) FROM work_probe`)
          assert.deepStrictEqual(read, { statements: 1, transactions: 1, rowsWritten: 0 })
          const together = yield* counted(sql.withTransaction(Effect.gen(function*() {
            yield* sql`UPDATE work_probe SET note = 'x' WHERE id <= 2`
            yield* sql`DELETE FROM work_probe WHERE id = 3`
            yield* sql`SELECT 1`
          })))
          assert.deepStrictEqual(together, { statements: 5, transactions: 1, rowsWritten: 3 })
        }))

      it.effect("a rolled back transaction commits nothing, and the next statement alone is a transaction again", () =>
        Effect.gen(function*() {
          const sql = yield* SqlClient.SqlClient
          yield* sql`CREATE TABLE IF NOT EXISTS work_probe (id int PRIMARY KEY, note text)`
          const failed = yield* counted(Effect.flip(sql.withTransaction(Effect.gen(function*() {
            yield* sql`INSERT INTO work_probe (id) VALUES (10)`
            return yield* Effect.fail("abandoned" as const)
          }))))
          assert.deepStrictEqual(failed, { statements: 3, transactions: 0, rowsWritten: 1 })
          const next = yield* counted(sql`INSERT INTO work_probe (id) VALUES (11)`)
          assert.deepStrictEqual(next, { statements: 1, transactions: 1, rowsWritten: 1 })
        }))
    })
  })
}
