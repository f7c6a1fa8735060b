/**
 * `JsonObject`: a request's JSON object is checked to be an object (not an
 * array, a scalar or null), its strings storable and its nesting bounded,
 * and passed through as parsed; its JSON Schema says `object`.
 */
import { assert, describe, it } from "@effect/vitest"
import { Result, Schema } from "effect"
import { JsonObject, MAX_JSON_DEPTH, UNSTORABLE_STRING_MESSAGE } from "../../../src/api/Common.ts"

const Body = Schema.Struct({ correction: JsonObject })
const decode = (value: unknown) => Schema.decodeUnknownResult(Body)(value, { errors: "all" })
const failure = (value: unknown) => {
  const result = decode(value)
  return Result.isFailure(result) ? result.failure.message : "decoded"
}

describe("JSON object schema", () => {
  it("an array, a scalar or null is refused as not an object, naming the field", () => {
    for (const value of [[1, 2], "text", 5, true, null]) {
      const message = failure({ correction: value })
      assert.include(message, "Expected object", JSON.stringify(value))
      assert.include(message, `["correction"]`)
    }
  })

  it("an object is passed through as parsed, members and their order kept", () => {
    const correction = JSON.parse(`{"b":[1,{"c":null}],"a":"x","__proto__":{"d":1}}`) as object
    const result = decode({ correction })
    assert.isTrue(Result.isSuccess(result))
    if (Result.isSuccess(result)) {
      assert.strictEqual(result.success.correction, correction)
      assert.strictEqual(JSON.stringify(result.success.correction), `{"b":[1,{"c":null}],"a":"x","__proto__":{"d":1}}`)
    }
  })

  it("strings and member names are checked for storability, and nesting for depth", () => {
    assert.include(failure({ correction: { a: ["ok", "x\u0000"] } }), `["correction"]["a"][1]`)
    assert.include(failure({ correction: { ["k\ud800"]: 1 } }), UNSTORABLE_STRING_MESSAGE)
    let deep: unknown = "leaf"
    for (let i = 0; i < MAX_JSON_DEPTH; i++) deep = [deep]
    assert.include(failure({ correction: { deep } }), `deeper than ${MAX_JSON_DEPTH} levels`)
    assert.strictEqual(failure({ correction: { deep: (deep as Array<unknown>)[0] } }), "decoded")
  })

  it("its JSON Schema is an object's, as documented for clients", () => {
    assert.deepStrictEqual(Schema.toJsonSchemaDocument(JsonObject).schema, { type: "object" })
  })
})
