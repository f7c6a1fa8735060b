import { assert, describe, it } from "@effect/vitest"
import { Result } from "effect"
import * as fc from "fast-check"
import { makeValidationPool, measureSchema, type SchemaLimits } from "../../../src/tasks/AnswerSchema.ts"
import { makeSchemaCompiler, MAX_VIOLATIONS, pointerToPath } from "../../../src/tasks/SchemaCompiler.ts"

const compiler = makeSchemaCompiler(100)
const schemas = {
  check: (schema: unknown): Result.Result<void, string> => {
    const compiled = compiler.compile(schema)
    return compiled.ok ? Result.void : Result.fail(compiled.message)
  },
  validate: (key: string, schema: unknown, value: unknown) => {
    const result = compiler.validate(key, schema, value)
    if (result._tag === "Unusable") throw new Error(result.message)
    return result.violations
  }
}

describe("answer schemas are checked as JSON Schema", () => {
  it("accepts draft 2020-12 (default), 2019-09 and draft-07 schemas", () => {
    assert.isTrue(Result.isSuccess(schemas.check({ type: "object", properties: { a: { type: "string" } } })))
    assert.isTrue(
      Result.isSuccess(
        schemas.check({
          $schema: "https://json-schema.org/draft/2020-12/schema",
          type: "array",
          prefixItems: [{ type: "string" }]
        })
      )
    )
    assert.isTrue(
      Result.isSuccess(schemas.check({ $schema: "https://json-schema.org/draft/2019-09/schema", type: "object" }))
    )
    assert.isTrue(
      Result.isSuccess(
        schemas.check({
          $schema: "http://json-schema.org/draft-07/schema#",
          type: "object",
          definitions: { x: { type: "integer" } }
        })
      )
    )
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
        items: {
          type: "array",
          items: { type: "object", properties: { price: { type: "number" } }, required: ["price"] }
        }
      }
    }
    const violations = schemas.validate("t1", schema, { items: [{ price: 1 }, { price: 2 }, { price: "x" }] })
    assert.deepStrictEqual(violations.map((v) => v.path), ["items[2].price"])
    const missing = schemas.validate("t1", schema, { items: [{}] })
    assert.deepStrictEqual(missing.map((v) => v.path), ["items[0].price"])
    const odd = {
      type: "object",
      required: ["unit price"],
      additionalProperties: false,
      properties: { "unit price": { type: "number" } }
    }
    assert.deepStrictEqual(schemas.validate("t3", odd, { "a.b": 1 }).map((v) => v.path).sort(), [
      "[\"a.b\"]",
      "[\"unit price\"]"
    ])
  })

  it("applies formats (ajv-formats) and patterns", () => {
    const schema = {
      type: "object",
      properties: { email: { type: "string", format: "email" }, code: { type: "string", pattern: "^[A-Z]{3}$" } }
    }
    assert.strictEqual(schemas.validate("t2", schema, { email: "a@b.co", code: "ABC" }).length, 0)
    assert.deepStrictEqual(schemas.validate("t2", schema, { email: "nope", code: "abc" }).map((v) => v.path).sort(), [
      "code",
      "email"
    ])
  })

  it("turns JSON pointers into JSON paths", () => {
    assert.strictEqual(pointerToPath(""), "")
    assert.strictEqual(pointerToPath("/a/0/b"), "a[0].b")
    assert.strictEqual(pointerToPath("/we ird/x~1y"), "[\"we ird\"][\"x/y\"]")
    fc.assert(
      fc.property(
        fc.array(fc.oneof(fc.nat(), fc.stringMatching(/^[a-z_][a-z0-9_]{0,8}$/)), { maxLength: 6 }),
        (segments) => {
          const pointer = segments.map((s) => `/${s}`).join("")
          const path = pointerToPath(pointer)
          for (const s of segments) {
            assert.include(path, String(s))
          }
        }
      )
    )
  })
})

describe("compiled validators are cached within a bound and nowhere else", () => {
  it("keeps at most the configured number, least recently used dropped; Ajv's registries do not grow", () => {
    const bounded = makeSchemaCompiler(5)
    bounded.validate("warm", { type: "object" }, {})
    const registeredBefore = bounded.stats().registered
    for (let i = 0; i < 200; i++) {
      const result = bounded.validate(`task-${i}`, {
        type: "object",
        properties: { [`p${i}`]: { type: "string", pattern: "^a+$" } }
      }, {})
      assert.strictEqual(result._tag, "Checked")
    }
    assert.strictEqual(bounded.stats().cached, 5)
    assert.strictEqual(bounded.stats().registered, registeredBefore)
    assert.isTrue(bounded.has("task-199"))
    assert.isFalse(bounded.has("task-0"))
  })

  it("one task's nested $id never changes how another task's schema resolves", () => {
    const isolated = makeSchemaCompiler(10)
    const nested = (type: string) => ({
      $defs: { x: { $id: "https://example.com/x", type } },
      properties: { v: { $ref: "https://example.com/x" } }
    })
    const first = isolated.validate("a", nested("string"), { v: 1 })
    const second = isolated.validate("b", nested("number"), { v: 1 })
    assert.deepStrictEqual(first._tag === "Checked" ? first.violations.map((v) => v.path) : first, ["v"])
    assert.deepStrictEqual(second._tag === "Checked" ? second.violations : second, [])
  })

  it(`reports at most ${MAX_VIOLATIONS} violations`, () => {
    const result = compiler.validate(
      "many",
      { type: "array", items: { type: "string" } },
      Array.from({ length: 5000 }, (_, i) => i)
    )
    assert.strictEqual(result._tag === "Checked" ? result.violations.length : -1, MAX_VIOLATIONS)
  })
})

const limits: SchemaLimits = { maxBytes: 2000, maxDepth: 8, maxSubschemas: 20, maxPatternLength: 30 }

describe("answer schema limits are checked before compiling, naming the limit and where", () => {
  it("size", () => {
    const over = measureSchema({ type: "object", description: "x".repeat(3000) }, limits)
    assert.strictEqual(over?.limit, "SVC_ANSWER_SCHEMA_MAX_BYTES")
    assert.strictEqual(over?.field, "answer_schema")
    // Many members: the walk stops at the limit.
    const wide = Object.fromEntries(Array.from({ length: 100_000 }, (_, i) => [`k${i}`, 1]))
    assert.strictEqual(measureSchema({ properties: wide }, limits)?.limit, "SVC_ANSWER_SCHEMA_MAX_BYTES")
  })

  it("depth", () => {
    let deep: Record<string, unknown> = { type: "string" }
    for (let i = 0; i < 10; i++) deep = { type: "object", properties: { a: deep } }
    const over = measureSchema(deep, limits)
    assert.strictEqual(over?.limit, "SVC_ANSWER_SCHEMA_MAX_DEPTH")
    assert.match(over!.field, /^answer_schema\.properties\.a\.properties\.a/)
  })

  it("subschemas", () => {
    const properties = Object.fromEntries(Array.from({ length: 25 }, (_, i) => [`p${i}`, { type: "string" }]))
    assert.strictEqual(measureSchema({ type: "object", properties }, limits)?.limit, "SVC_ANSWER_SCHEMA_MAX_SUBSCHEMAS")
  })

  it("pattern length, in pattern and patternProperties", () => {
    const long = "^(a|b)" + "c".repeat(40) + "$"
    const over = measureSchema({ properties: { code: { type: "string", pattern: long } } }, limits)
    assert.strictEqual(over?.limit, "SVC_ANSWER_SCHEMA_MAX_PATTERN_LENGTH")
    assert.strictEqual(over?.field, "answer_schema.properties.code.pattern")
    const keyed = measureSchema({ patternProperties: { [long]: { type: "string" } } }, limits)
    assert.strictEqual(keyed?.field, "answer_schema.patternProperties")
  })

  it("a schema within every limit passes", () => {
    assert.isUndefined(
      measureSchema({ type: "object", properties: { code: { type: "string", pattern: "^[A-Z]{3}$" } } }, limits)
    )
  })
})

/** A catastrophic-backtracking pattern and a value that makes it take ~forever. */
export const catastrophic = { type: "object", properties: { s: { type: "string", pattern: "^(a+)+$" } } }
export const catastrophicValue = { s: "a".repeat(40) + "!" }

describe("the validation pool: a deadline per check, a slow organization never holding every worker, a bounded queue", () => {
  const settings = { workers: 2, timeoutMs: 300, heapMb: 64, cacheEntries: 4, queueCapacity: 4 }
  const run = (
    pool: ReturnType<typeof makeValidationPool>,
    orgId: string,
    request: Parameters<ReturnType<typeof makeValidationPool>["submit"]>[1]
  ) =>
    new Promise<{ tag: string; ms: number }>((resolve, reject) => {
      const started = performance.now()
      const release = pool.admit(orgId)
      if (release === undefined) return reject(new Error("queue full"))
      pool.submit(orgId, request, (outcome) => {
        release()
        resolve({ tag: outcome._tag === "Reply" ? outcome.reply._tag : outcome._tag, ms: performance.now() - started })
      })
    })

  it("a check over the deadline ends with Timeout once the deadline passes and its worker is replaced", async () => {
    const pool = makeValidationPool(settings)
    try {
      const result = await run(pool, "org-a", {
        op: "validate",
        key: "t",
        schema: catastrophic,
        value: catastrophicValue
      })
      assert.strictEqual(result.tag, "Timeout")
      assert.strictEqual(pool.replacedWorkers(), 1)
      // The replacement works.
      const after = await run(pool, "org-a", { op: "validate", key: "t", schema: { type: "object" }, value: {} })
      assert.strictEqual(after.tag, "Checked")
    } finally {
      pool.close()
    }
  })

  it("one organization's expensive checks never hold up another organization's", async () => {
    const pool = makeValidationPool(settings)
    try {
      // Every worker is up (its warm-up done) once it answers.
      await pool.stats()
      const hostile = [1, 2, 3].map(() =>
        run(pool, "hostile", { op: "validate", key: "evil", schema: catastrophic, value: catastrophicValue })
      )
      const honest = await run(pool, "honest", {
        op: "validate",
        key: "fine",
        schema: { type: "object", properties: { a: { type: "number" } } },
        value: { a: 1 }
      })
      assert.strictEqual(honest.tag, "Checked")
      // Well below one deadline: the hostile organization held at most one worker.
      assert.isBelow(honest.ms, settings.timeoutMs)
      const outcomes = await Promise.all(hostile)
      assert.deepStrictEqual(outcomes.map((o) => o.tag), ["Timeout", "Timeout", "Timeout"])
    } finally {
      pool.close()
    }
  })

  it("once the queue is full, more checks of the organization holding it are refused at once", async () => {
    const pool = makeValidationPool(settings)
    try {
      await run(pool, "warm", { op: "validate", key: "w", schema: { type: "object" }, value: {} })
      // Four admitted: the queue is full, and the organization holds all of it.
      const waiting = [0, 1, 2, 3].map(() =>
        run(pool, "org", { op: "validate", key: "evil", schema: catastrophic, value: catastrophicValue })
      )
      let refused = false
      try {
        await run(pool, "org", { op: "validate", key: "x", schema: { type: "object" }, value: {} })
      } catch {
        refused = true
      }
      assert.isTrue(refused)
      await Promise.all(waiting)
    } finally {
      pool.close()
    }
  })

  it("workers keep at most `cacheEntries` compiled validators however many tasks are checked", async () => {
    const pool = makeValidationPool(settings)
    try {
      for (let i = 0; i < 60; i++) {
        const result = await run(pool, `org-${i % 3}`, {
          op: "check",
          key: `task-${i}`,
          schema: { type: "object", properties: { [`p${i}`]: { type: "string" } } }
        })
        assert.strictEqual(result.tag, "Ok")
      }
      const stats = await pool.stats()
      assert.strictEqual(stats.length, 2)
      for (const worker of stats) assert.isAtMost(worker.cached, settings.cacheEntries)
      // Ajv's registries hold only its meta-schemas, never a task's schema.
      const again = await pool.stats()
      assert.deepStrictEqual(again.map((w) => w.registered), stats.map((w) => w.registered))
    } finally {
      pool.close()
    }
  })
})
