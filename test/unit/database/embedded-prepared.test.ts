import { assert, describe, it } from "@effect/vitest"
import { PGlite } from "@electric-sql/pglite"
import { Effect } from "effect"
import { SqlClient } from "effect/sql"
import { afterAll, beforeAll } from "vitest"
import { PreparedStatements } from "../../../src/database/embedded/EmbeddedPrepared.ts"
import { runStatement } from "../../../src/database/embedded/EmbeddedProtocol.ts"
import { emptyDatabase, emptyPGlite } from "../../support/databases.ts"

/** The message types of a batch, in order. */
const kinds = (batch: Uint8Array) => {
  const bytes = Buffer.from(batch)
  const out: Array<string> = []
  let at = 0
  while (at < bytes.length) {
    out.push(String.fromCharCode(bytes[at]!))
    at += 1 + bytes.readInt32BE(at + 1)
  }
  assert.strictEqual(at, bytes.length)
  return out
}

describe("named prepared statements on the embedded database", () => {
  it("parses and describes a statement once, then only binds and executes it", () => {
    const cache = new PreparedStatements(2)
    const first = cache.get("SELECT $1", [23])
    assert.deepStrictEqual(kinds(cache.encode(first, "SELECT $1", ["1"], [23])), ["P", "B", "D", "E", "S"])
    first.description = null
    assert.strictEqual(cache.get("SELECT $1", [23]), first)
    assert.deepStrictEqual(kinds(cache.encode(first, "SELECT $1", ["1"], [23])), ["B", "E", "S"])
    // The same text with another parameter type is another statement.
    assert.notStrictEqual(cache.get("SELECT $1", [0]), first)
  })

  it("closes the least recently used statement with the next one once over its bound", () => {
    const cache = new PreparedStatements(2)
    const a = cache.get("SELECT 1", [])
    a.description = null
    cache.get("SELECT 2", []).description = null
    cache.get("SELECT 1", [])
    const c = cache.get("SELECT 3", [])
    assert.strictEqual(cache.size, 2)
    assert.deepStrictEqual(kinds(cache.encode(c, "SELECT 3", [], [])), ["C", "P", "B", "D", "E", "S"])
    assert.deepStrictEqual(kinds(cache.encode(a, "SELECT 1", [], [])), ["B", "E", "S"])
  })

  describe("on PGlite", () => {
    let db: PGlite
    beforeAll(async () => {
      db = await emptyPGlite()
      await db.exec("CREATE TABLE t (id int PRIMARY KEY, v text)")
    })
    afterAll(() => db.close())
    const held = async () =>
      (await db.query<{ name: string }>("SELECT name FROM pg_prepared_statements ORDER BY prepare_time")).rows.map((
        row
      ) => row.name)

    it("answers a prepared statement's rows as its first run did, and holds no more than its bound", async () => {
      const cache = new PreparedStatements(2)
      const run = (sql: string, params: Array<unknown>, types: Array<number>) =>
        runStatement(db as never, sql, params, types, false, cache)
      await run("INSERT INTO t VALUES ($1, $2)", [1, "a"], [23, 0])
      const once = await run("SELECT id, v FROM t WHERE id = $1", [1], [23])
      const again = await run("SELECT id, v FROM t WHERE id = $1", [1], [23])
      assert.deepStrictEqual(again, once)
      assert.deepStrictEqual(again.rows, [{ id: 1, v: "a" }])
      assert.strictEqual((await held()).length, 2)
      await run("SELECT $1::int AS n", [7], [23])
      await run("SELECT $1::text AS s", ["x"], [0])
      // The evicted names were closed with the statements after them.
      assert.isAtMost((await held()).length, 2)
      assert.strictEqual(cache.size, 2)
    })

    it("keeps the session usable after a prepared statement fails inside a transaction", async () => {
      const cache = new PreparedStatements()
      const run = (sql: string, params: Array<unknown> = [], types: Array<number> = []) =>
        runStatement(db as never, sql, params, types, false, cache)
      const insert = "INSERT INTO t VALUES ($1, $2) RETURNING id"
      await run(insert, [2, "b"], [23, 0])
      await run("BEGIN")
      const duplicate = await run(insert, [2, "b"], [23, 0]).then(
        () => undefined,
        (error: { code?: string }) => error.code
      )
      assert.strictEqual(duplicate, "23505")
      await run("ROLLBACK")
      assert.deepStrictEqual((await run(insert, [3, "c"], [23, 0])).rows, [{ id: 3 }])
    })

    it("runs a statement whose plan went stale again, outside a transaction, with the new columns", async () => {
      const cache = new PreparedStatements()
      const run = (sql: string, params: Array<unknown> = [], types: Array<number> = []) =>
        runStatement(db as never, sql, params, types, false, cache)
      await db.exec("CREATE TABLE s (id int); INSERT INTO s VALUES (1)")
      assert.deepStrictEqual((await run("SELECT * FROM s")).rows, [{ id: 1 }])
      await db.exec("ALTER TABLE s ADD COLUMN w text")
      assert.deepStrictEqual((await run("SELECT * FROM s")).rows, [{ id: 1, w: null }])
      assert.deepStrictEqual((await run("SELECT * FROM s")).rows, [{ id: 1, w: null }])
    })
  })

  it.layer(emptyDatabase())((it) => {
    it.effect("the embedded session runs svc's statements under names it keeps", () =>
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        for (let i = 0; i < 3; i++) {
          const [row] = yield* sql<{ n: number }>`SELECT ${i}::int + 1 AS n`
          assert.strictEqual(row!.n, i + 1)
        }
        const held = yield* sql<
          { count: bigint }
        >`SELECT count(*) AS count FROM pg_prepared_statements WHERE statement LIKE 'SELECT $1::int + 1%'`
        assert.strictEqual(held[0]!.count, 1n)
      }))
  })
})
