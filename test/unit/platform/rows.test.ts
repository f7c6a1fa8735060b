import { assert, describe, it } from "@effect/vitest"
import { Cause, Effect, Exit, Schema } from "effect"
import { BigIntText, JsonColumn, RowDecodeError, rowsOf, Timestamp } from "../../../src/platform/Rows.ts"

const Things = rowsOf(
  "things",
  Schema.Struct({
    id: Schema.String,
    seq: BigIntText,
    body: JsonColumn(Schema.Json),
    created_at: Timestamp
  })
)

describe("rows decoded by schemas", () => {
  it.effect("columns decode to the domain's shapes: timestamps to RFC 3339, sequences to text", () =>
    Effect.gen(function*() {
      const at = new Date("2026-11-22T10:00:00.000Z")
      const rows = yield* Things.all(Effect.succeed([
        { id: "a", seq: "7", body: { x: [1] }, created_at: at },
        { id: "b", seq: 8n, body: null, created_at: "2026-11-22T11:00:00+01:00" }
      ]))
      assert.deepStrictEqual(rows, [
        { id: "a", seq: "7", body: { x: [1] }, created_at: "2026-11-22T10:00:00.000Z" },
        { id: "b", seq: "8", body: null, created_at: "2026-11-22T10:00:00.000Z" }
      ])
      assert.strictEqual(yield* Things.one(Effect.succeed([])), undefined)
    }))

  it.effect("a row that does not decode is a defect naming its table", () =>
    Effect.gen(function*() {
      const exit = yield* Effect.exit(
        Things.one(Effect.succeed([{ id: 1, seq: "1", body: {}, created_at: new Date() }]))
      )
      assert.isTrue(Exit.isFailure(exit))
      if (Exit.isFailure(exit)) {
        const defect = Cause.squash(exit.cause)
        assert.instanceOf(defect, RowDecodeError)
        assert.include((defect as RowDecodeError).message, "table things")
        assert.include((defect as RowDecodeError).message, "id")
      }
    }))

  it.effect("rows read with the statement's errors kept: the errors pass through, a changed row shape still dies", () =>
    Effect.gen(function*() {
      const Due = rowsOf("pg_control_checkpoint()", Schema.Struct({ due: Schema.Boolean }))
      assert.deepStrictEqual(yield* Due.decoded(Effect.succeed([{ due: true }])), [{ due: true }])
      assert.strictEqual(yield* Effect.flip(Due.decoded(Effect.fail("statement failed"))), "statement failed")
      // The column came back as text, say after a migration changed its type.
      const exit = yield* Effect.exit(Due.decoded(Effect.succeed([{ due: "t" }])))
      assert.isTrue(Exit.isFailure(exit))
      if (Exit.isFailure(exit)) {
        const defect = Cause.squash(exit.cause)
        assert.instanceOf(defect, RowDecodeError)
        assert.include((defect as RowDecodeError).message, "table pg_control_checkpoint()")
      }
    }))
})
