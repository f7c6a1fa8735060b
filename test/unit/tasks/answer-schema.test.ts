import { assert, describe, it } from "@effect/vitest"
import { Result } from "effect"
import * as fc from "fast-check"
import { AnswerSchemas, pointerToPath } from "../../../src/tasks/AnswerSchema.ts"

const schemas = AnswerSchemas.make()

describe("answer schemas are checked as JSON Schema", () => {
  it("accepts draft 2020-12 (default), 2019-09 and draft-07 schemas", () => {
    assert.isTrue(Result.isSuccess(schemas.check({ type: "object", properties: { a: { type: "string" } } })))
    assert.isTrue(Result.isSuccess(schemas.check({ $schema: "https://json-schema.org/draft/2020-12/schema", type: "array", prefixItems: [{ type: "string" }] })))
    assert.isTrue(Result.isSuccess(schemas.check({ $schema: "https://json-schema.org/draft/2019-09/schema", type: "object" })))
    assert.isTrue(Result.isSuccess(schemas.check({ $schema: "http://json-schema.org/draft-07/schema#", type: "object", definitions: { x: { type: "integer" } } })))
  })

  it("refuses what is not valid JSON Schema, saying what is wrong", () => {
    const bad = schemas.check({ type: "objectx" })
    assert.isTrue(Result.isFailure(bad))
    if (Result.isFailure(bad)) assert.match(bad.failure, /type/)
    assert.isTrue(Result.isFailure(schemas.check({ type: "object", properties: { a: { minLength: -1 } } })))
    assert.isTrue(Result.isFailure(schemas.check({ $schema: "http://json-schema.org/draft-04/schema#" })))
    assert.isTrue(Result.isFailure(schemas.check({ $ref: "https://example.com/remote.json" })))
  })

  it("locates violations by JSON path", () => {
    const schema = {
      type: "object",
      required: ["items"],
      properties: {
        items: { type: "array", items: { type: "object", properties: { price: { type: "number" } }, required: ["price"] } }
      }
    }
    const violations = schemas.validate("t1", schema, { items: [{ price: 1 }, { price: 2 }, { price: "x" }] })
    assert.deepStrictEqual(violations.map((v) => v.path), ["items[2].price"])
    const missing = schemas.validate("t1", schema, { items: [{}] })
    assert.deepStrictEqual(missing.map((v) => v.path), ["items[0].price"])
    const odd = { type: "object", required: ["unit price"], additionalProperties: false, properties: { "unit price": { type: "number" } } }
    assert.deepStrictEqual(schemas.validate("t3", odd, { "a.b": 1 }).map((v) => v.path).sort(), ['["a.b"]', '["unit price"]'])
  })

  it("applies formats (ajv-formats) and patterns", () => {
    const schema = { type: "object", properties: { email: { type: "string", format: "email" }, code: { type: "string", pattern: "^[A-Z]{3}$" } } }
    assert.strictEqual(schemas.validate("t2", schema, { email: "a@b.co", code: "ABC" }).length, 0)
    assert.deepStrictEqual(schemas.validate("t2", schema, { email: "nope", code: "abc" }).map((v) => v.path).sort(), ["code", "email"])
  })

  it("turns JSON pointers into JSON paths", () => {
    assert.strictEqual(pointerToPath(""), "")
    assert.strictEqual(pointerToPath("/a/0/b"), "a[0].b")
    assert.strictEqual(pointerToPath("/we ird/x~1y"), '["we ird"]["x/y"]')
    fc.assert(fc.property(fc.array(fc.oneof(fc.nat(), fc.stringMatching(/^[a-z_][a-z0-9_]{0,8}$/)), { maxLength: 6 }), (segments) => {
      const pointer = segments.map((s) => `/${s}`).join("")
      const path = pointerToPath(pointer)
      for (const s of segments) assert.include(path, String(s))
    }))
  })
})
