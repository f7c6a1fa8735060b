import { PgClient } from "@effect/sql-pg"
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { SqlClient } from "effect/sql"
import { SqlError } from "effect/sql/SqlError"
import fc from "fast-check"
import { encodeStatement, serializeParam } from "../../../src/database/embedded/EmbeddedProtocol.ts"
import { emptyDatabase } from "../../support/databases.ts"

/** Text without NUL (PostgreSQL text cannot hold it), any other code point. */
const text = fc.string({ unit: "grapheme", maxLength: 40 }).filter((s) => !s.includes("\u0000"))
const int4 = fc.integer({ min: -2147483648, max: 2147483647 })
const int8 = fc.bigInt({ min: -(2n ** 63n), max: 2n ** 63n - 1n })
const instant = fc.date({
  min: new Date("1900-01-01T00:00:00Z"),
  max: new Date("2200-01-01T00:00:00Z"),
  noInvalidDate: true
})
const json = fc.jsonValue({ maxDepth: 3 }).map((value) => JSON.parse(JSON.stringify(value)) as unknown)

describe("the embedded statement protocol", () => {
  it("encodes Parse, Bind, Describe, Execute and Sync with their lengths", () => {
    const bytes = Buffer.from(encodeStatement("SELECT $1, $2", ["é", null], [0, 23]))
    const kinds: Array<string> = []
    let at = 0
    while (at < bytes.length) {
      kinds.push(String.fromCharCode(bytes[at]!))
      at += 1 + bytes.readInt32BE(at + 1)
    }
    assert.strictEqual(at, bytes.length)
    assert.deepStrictEqual(kinds, ["P", "B", "D", "E", "S"])
    // The two-byte "é" is counted in bytes, and the null parameter is -1.
    assert.isTrue(bytes.includes(Buffer.from([0, 0, 0, 2, 0xc3, 0xa9, 0xff, 0xff, 0xff, 0xff])))
  })

  it("serializes each parameter in PostgreSQL's text format for its type", () => {
    const serializers = { 16: (v: boolean) => (v ? "t" : "f"), 25: String } as never
    assert.strictEqual(serializeParam(null, 0, serializers), null)
    assert.strictEqual(serializeParam("x", 16, serializers), "x")
    assert.strictEqual(serializeParam(true, 16, serializers), "t")
    // PostgreSQL reads an unquoted null, in any case, as NULL.
    assert.strictEqual(serializeParam([null, "a b"], 0, serializers)!.toUpperCase(), "{NULL,\"A B\"}")
  })

  it.layer(emptyDatabase())((it) => {
    it.effect("values of every type come back as they went in", () =>
      Effect.gen(function*() {
        const client = yield* SqlClient.SqlClient
        const check = <A>(
          arbitrary: fc.Arbitrary<A>,
          sql: string,
          expected: (value: A) => unknown = (value) => value
        ) =>
          Effect.promise(() =>
            fc.assert(
              fc.asyncProperty(arbitrary, async (value) => {
                const rows = await Effect.runPromise(client.unsafe<{ v: unknown }>(sql, [value]))
                assert.deepStrictEqual(rows[0]!.v, expected(value))
              }),
              { numRuns: 60 }
            )
          )
        yield* check(text, "SELECT $1::text AS v")
        yield* check(text, "SELECT $1 AS v")
        yield* check(int4, "SELECT $1 AS v")
        yield* check(int8, "SELECT $1 AS v")
        yield* check(
          fc.double({ noNaN: true, noDefaultInfinity: true }).filter((n) => !Number.isInteger(n)),
          "SELECT $1 AS v"
        )
        yield* check(fc.boolean(), "SELECT $1 AS v")
        yield* check(instant, "SELECT $1 AS v")
        yield* check(fc.uint8Array({ maxLength: 40 }), "SELECT $1 AS v", (value) => new Uint8Array(value))
        yield* check(fc.array(int4, { minLength: 1, maxLength: 8 }), "SELECT $1 AS v")
        yield* check(fc.array(int8, { minLength: 1, maxLength: 8 }), "SELECT $1 AS v")
        yield* check(fc.array(text, { minLength: 1, maxLength: 8 }), "SELECT $1 AS v")
        yield* check(fc.array(instant, { minLength: 1, maxLength: 4 }), "SELECT $1 AS v")
        yield* check(fc.array(fc.boolean(), { minLength: 1, maxLength: 4 }), "SELECT $1 AS v")
        yield* check(fc.array(fc.option(text, { nil: null }), { minLength: 1, maxLength: 8 }), "SELECT $1::text[] AS v")
        yield* check(json.map((value) => JSON.stringify(value)), "SELECT $1::jsonb AS v", (value) => JSON.parse(value))
      }), { timeout: 60_000 })

    it.effect("jsonb, bigint and timestamps decode as on a server", () =>
      Effect.gen(function*() {
        const pg = yield* PgClient.PgClient
        const [row] = yield* pg<{ j: unknown; n: bigint; t: Date; d: string }>`
          SELECT ${pg.json({ a: [1, "x", null] })}::jsonb AS j, 9007199254740993::int8 AS n,
                 '2026-11-23 10:00:00+00'::timestamptz AS t, '2026-11-23'::date AS d`
        assert.deepStrictEqual(row!.j, { a: [1, "x", null] })
        assert.strictEqual(row!.n, 9007199254740993n)
        assert.strictEqual(row!.t.toISOString(), "2026-11-23T10:00:00.000Z")
        assert.strictEqual(row!.d, "2026-11-23")
      }))

    it.effect("errors carry their SQLSTATE and the session answers the next statement", () =>
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        yield* sql`CREATE TEMP TABLE protocol_things (id int PRIMARY KEY)`
        yield* sql`INSERT INTO protocol_things VALUES (1)`
        const unique = yield* Effect.flip(sql`INSERT INTO protocol_things VALUES (1)`)
        assert.instanceOf(unique, SqlError)
        assert.strictEqual(unique.reason._tag, "UniqueViolation")
        const syntax = yield* Effect.flip(sql.unsafe("SELEC 1"))
        assert.strictEqual(syntax.reason._tag, "SqlSyntaxError")
        const badParam = yield* Effect.flip(sql.unsafe("SELECT $1::int AS v", ["not a number"]))
        assert.strictEqual((badParam.reason as { cause: { code?: string } }).cause.code, "22P02")
        const [row] = yield* sql<{ n: number }>`SELECT count(*)::int AS n FROM protocol_things`
        assert.strictEqual(row!.n, 1)
      }))

    it.effect("a transaction's writes are rolled back with it, and a savepoint keeps what came before", () =>
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        yield* sql`CREATE TEMP TABLE protocol_tx (id int)`
        yield* Effect.flip(
          sql.withTransaction(Effect.andThen(sql`INSERT INTO protocol_tx VALUES (1)`, Effect.fail("no")))
        )
        yield* sql.withTransaction(Effect.gen(function*() {
          yield* sql`INSERT INTO protocol_tx VALUES (2)`
          yield* Effect.flip(
            sql.withTransaction(Effect.andThen(sql`INSERT INTO protocol_tx VALUES (3)`, Effect.fail("no")))
          )
        }))
        const rows = yield* sql<{ id: number }>`SELECT id FROM protocol_tx ORDER BY id`
        assert.deepStrictEqual(rows.map((r) => r.id), [2])
      }))
  })
})
