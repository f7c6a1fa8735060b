import { parse, PGlite } from "@electric-sql/pglite"
import { afterAll, assert, beforeAll, describe, it } from "vitest"
import { AnswerBytes, readAnswer } from "../../../src/database/embedded/EmbeddedAnswer.ts"
import { encodeStatement, runStatement } from "../../../src/database/embedded/EmbeddedProtocol.ts"
import { needsSync } from "../../../src/database/embedded/EmbeddedWriteThrough.ts"
import { emptyPGlite } from "../../support/databases.ts"

/** Statements whose answers cover rows, nulls, text in any script, counts, DDL and errors. */
const STATEMENTS: ReadonlyArray<readonly [string, ReadonlyArray<string | null>, ReadonlyArray<number>]> = [
  ["SELECT id, v, n, at, j, tags FROM t ORDER BY id", [], []],
  ["SELECT $1::text AS a, $2::int AS b, NULL::text AS c", ["héllo ✓ 𝄞", "42"], [0, 0]],
  ["SELECT 1 AS x, 2 AS x", [], []],
  ["SELECT 1 AS \"__proto__\"", [], []],
  ["SELECT * FROM t WHERE false", [], []],
  ["INSERT INTO t (id, v) VALUES (10, 'x'), (11, 'y')", [], []],
  ["UPDATE t SET v = 'z' WHERE id >= 10", [], []],
  ["DELETE FROM t WHERE id = 11 RETURNING id, v", [], []],
  ["CREATE TABLE IF NOT EXISTS u (id int)", [], []],
  ["INSERT INTO t (id, v) VALUES (10, 'dup')", [], []],
  ["SELECT 1 / 0", [], []],
  ["SELECT nope FROM t", [], []]
]

describe("reading PGlite's raw answer", () => {
  // The same statements on two like databases: ours on one, PGlite's parser on the other.
  let db: PGlite
  let twin: PGlite
  const setUp = async (pg: PGlite) => {
    await pg.exec(`CREATE TABLE t (id int PRIMARY KEY, v text, n bigint, at timestamptz, j jsonb, tags text[]);
      INSERT INTO t VALUES (1, 'a', 9007199254740993, '2026-01-02T03:04:05.678Z', '{"k": [1, "é"]}', '{x,"y z",NULL}'), (2, NULL, NULL, NULL, NULL, NULL)`)
    return pg
  }
  beforeAll(async () => {
    db = await setUp(await emptyPGlite())
    twin = await setUp(await emptyPGlite())
  })
  afterAll(async () => {
    await db.close()
    await twin.close()
  })

  it("gives the rows, command, count and error PGlite's own parseResults gives, as objects and as arrays", async () => {
    for (const [sql, values, types] of STATEMENTS) {
      for (const arrays of [false, true]) {
        const message = encodeStatement(sql, values, types)
        const bytes = new AnswerBytes()
        await db.execProtocolRawStream(message, { syncToFs: false, onRawData: bytes.onRawData })
        const ours = readAnswer(bytes.take(), db.parsers as never, arrays, undefined)
        const messages = await twin.execProtocolStream(message, { syncToFs: false, throwOnError: false })
        const error = messages.find((m: { name: string }) => m.name === "error") as Record<string, unknown> | undefined
        if (error !== undefined) {
          assert.isDefined(ours.error, sql)
          for (
            const field of [
              "message",
              "code",
              "constraint",
              "detail",
              "severity",
              "table",
              "schema",
              "position",
              "routine"
            ]
          ) {
            assert.strictEqual(ours.error![field], error[field], `${sql}: ${field}`)
          }
          continue
        }
        assert.isUndefined(ours.error, sql)
        const theirs = parse.parseResults(messages, twin.parsers, arrays ? { rowMode: "array" } : undefined)[0]!
        assert.deepStrictEqual(ours.rows, theirs.rows, sql)
        assert.strictEqual(ours.command, (theirs as { command?: string }).command, sql)
        assert.strictEqual(ours.affectedRows, theirs.affectedRows, sql)
      }
    }
  })

  it("reads a prepared statement's later rows by the columns its first run described", async () => {
    const bytes = new AnswerBytes()
    const parseOnce = new Uint8Array(
      encodeStatement("SELECT id, v FROM t WHERE id = $1", ["1"], [23], { name: "s1", parse: true, describe: true })
    )
    await db.execProtocolRawStream(parseOnce, { syncToFs: false, onRawData: bytes.onRawData })
    const first = readAnswer(bytes.take(), db.parsers as never, false, undefined)
    assert.deepStrictEqual(first.columns, [{ name: "id", type: 23 }, { name: "v", type: 25 }])
    const again = new Uint8Array(
      encodeStatement("SELECT id, v FROM t WHERE id = $1", ["1"], [23], { name: "s1", parse: false, describe: false })
    )
    await db.execProtocolRawStream(again, { syncToFs: false, onRawData: bytes.onRawData })
    const later = readAnswer(bytes.take(), db.parsers as never, false, first.columns)
    assert.isUndefined(later.columns)
    assert.deepStrictEqual(later.rows, [{ id: 1, v: "a" }])
  })

  it("leaves PGlite's own query and exec answering after a statement ran on the raw stream", async () => {
    await runStatement(db as never, "SELECT $1::int AS n", [1], [23], false)
    assert.deepStrictEqual((await db.query<{ n: number }>("SELECT 2 AS n")).rows, [{ n: 2 }])
    const results = await db.exec("SELECT 3 AS n")
    assert.deepStrictEqual(results[0]!.rows, [{ n: 3 }])
  })
})

describe("syncing PGlite's files after a statement", () => {
  it("is skipped on the file systems that write through, and kept on any other", async () => {
    const db = await emptyPGlite()
    try {
      let syncs = 0
      const sync = db.syncToFs.bind(db)
      Object.assign(db, { syncToFs: () => (syncs++, sync()) })
      await runStatement(db as never, "SELECT $1::int AS n", [1], [23], false)
      assert.strictEqual(syncs, 0)
      assert.isFalse(needsSync(db))
      assert.isTrue(needsSync({ fs: {} }))
      assert.isTrue(needsSync({}))
    } finally {
      await db.close()
    }
  })
})
