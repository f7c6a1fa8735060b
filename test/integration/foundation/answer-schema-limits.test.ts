/**
 * Answer schemas and corrections are tenant input: no schema or correction
 * may hold the event loop (every organization's requests, `/health`
 * included), and every limit answers a problem naming it.
 */
import { assert, describe, layer } from "@effect/vitest"
import { Effect, Fiber } from "effect"
import { MAX_JSON_DEPTH } from "../../../src/api/Common.ts"
import { SvcTest, type TestOrg } from "../../../src/testing.ts"
import { raw } from "../../support/http.ts"

const BUDGET_MS = 500

/** `^(a+)+$` backtracks exponentially on a run of `a`s followed by anything else. */
const catastrophic = { type: "object", properties: { s: { type: "string", pattern: "^(a+)+$" } } }
const catastrophicCorrection = { s: `${"a".repeat(40)}!` }
/** Untyped `uniqueItems`: Ajv compares every pair (deep equality). */
const uniqueSchema = { type: "object", properties: { items: { type: "array", uniqueItems: true } } }
const uniqueCorrection = { items: Array.from({ length: 40_000 }, (_, i) => ({ n: i })) }
/** ~900 KB of schema. */
const hugeSchema = {
  type: "object",
  properties: Object.fromEntries(Array.from({ length: 12_000 }, (_, i) => [`field_${i}`, { type: "string", maxLength: 100 + i }]))
}

/** POSTs `body` (a string is sent as it is: JSON too deep for `JSON.stringify`). */
const post = (org: TestOrg, path: string, body: unknown) =>
  Effect.flatMap(SvcTest, (svc) =>
    raw(`${svc.baseUrl}${path}`, {
      method: "POST",
      headers: { authorization: `Bearer ${org.key}`, "content-type": "application/json" },
      body: typeof body === "string" ? body : JSON.stringify(body)
    }))

const taskWithRun = (org: TestOrg, schema: unknown) =>
  Effect.gen(function*() {
    const task = yield* post(org, "/v1/tasks", { name: "t", answer_schema: schema })
    assert.strictEqual(task.status, 201, task.text)
    const run = yield* post(org, `/v1/tasks/${task.json.id}/runs`, { input: {}, answer: {} })
    assert.strictEqual(run.status, 201, run.text)
    return run.json.trace_id as string
  })

const timed = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  Effect.gen(function*() {
    const started = performance.now()
    const value = yield* effect
    return { value, ms: performance.now() - started }
  })

layer(SvcTest.layer({ config: { answerValidationTimeoutMs: BUDGET_MS } }), { excludeTestServices: true })("answer schema and correction limits", (it) => {
  describe("no correction or schema holds the event loop", () => {
    it.effect("/health stays fast while one organization sends backtracking patterns, huge uniqueItems and huge schemas", () =>
      Effect.gen(function*() {
        const svc = yield* SvcTest
        const attacker = yield* SvcTest.org()
        const patternRun = yield* taskWithRun(attacker, catastrophic)
        const uniqueRun = yield* taskWithRun(attacker, uniqueSchema)

        const attackDurations: Array<number> = []
        const statuses: Array<number> = []
        const attack = Effect.gen(function*() {
          for (let round = 0; round < 3; round++) {
            const results = yield* Effect.all([
              timed(post(attacker, "/v1/feedback", { inference_log_id: patternRun, score: -1, correction: catastrophicCorrection })),
              timed(post(attacker, "/v1/feedback", { inference_log_id: uniqueRun, score: -1, correction: uniqueCorrection })),
              timed(post(attacker, "/v1/tasks", { name: "huge", answer_schema: hugeSchema }))
            ], { concurrency: "unbounded" })
            for (const { value, ms } of results) {
              attackDurations.push(ms)
              statuses.push(value.status)
            }
          }
        })

        const latencies: Array<number> = []
        let attacking = true
        const probe = Effect.gen(function*() {
          while (attacking) {
            const { value, ms } = yield* timed(raw(`${svc.baseUrl}/health`))
            assert.strictEqual(value.status, 200)
            latencies.push(ms)
            yield* Effect.sleep(10)
          }
        })
        const prober = yield* Effect.forkChild(probe)
        yield* attack
        attacking = false
        yield* Fiber.join(prober)

        // Each backtracking or uniqueItems correction was cut at the budget: 422.
        assert.deepStrictEqual([...new Set(statuses)].sort(), [400, 422])
        const attackMs = attackDurations.filter((_, i) => i % 3 !== 2)
        const slowestAttack = Math.max(...attackMs)
        const sorted = [...latencies].sort((a, b) => a - b)
        const p99 = sorted[Math.floor(sorted.length * 0.99)]!
        const max = sorted[sorted.length - 1]!
        console.log(
          `health during attack: ${latencies.length} probes, p50 ${sorted[Math.floor(sorted.length / 2)]!.toFixed(1)} ms, ` +
            `p99 ${p99.toFixed(1)} ms, max ${max.toFixed(1)} ms; attack requests ${Math.min(...attackMs).toFixed(0)}-${slowestAttack.toFixed(0)} ms`
        )
        assert.isAtLeast(latencies.length, 10)
        // Had any attack request run on the event loop, some probe would have
        // waited for all of it (each runs for at least the budget). On a busy
        // machine a probe may still be slow for other reasons, so the bound is
        // relative to the attack, not absolute.
        assert.isAtLeast(Math.min(...attackMs), BUDGET_MS * 0.9)
        assert.isBelow(max, BUDGET_MS / 2)
      }), { timeout: 120_000 })
  })

  describe("limits answer a problem naming them", () => {
    it.effect("a schema over the size limit: 400 ANSWER_SCHEMA_TOO_COMPLEX naming SVC_ANSWER_SCHEMA_MAX_BYTES", () =>
      Effect.gen(function*() {
        const org = yield* SvcTest.org()
        const response = yield* post(org, "/v1/tasks", { name: "huge", answer_schema: hugeSchema })
        assert.strictEqual(response.status, 400)
        assert.strictEqual(response.json.code, "ANSWER_SCHEMA_TOO_COMPLEX")
        assert.strictEqual(response.json.limit, "SVC_ANSWER_SCHEMA_MAX_BYTES")
        assert.strictEqual(response.json.limit_value, 65536)
        assert.strictEqual(response.json.field, "answer_schema")
        // The typed client knows the error.
        const error = yield* org.client.tasks.create({ payload: { name: "huge", answer_schema: hugeSchema as never } }).pipe(Effect.flip)
        assert.strictEqual(error._tag, "AnswerSchemaTooComplex")
      }))

    it.effect("depth, subschema count and pattern length: 400 naming the limit and the path inside the schema", () =>
      Effect.gen(function*() {
        const org = yield* SvcTest.org()
        let deep: Record<string, unknown> = { type: "string" }
        for (let i = 0; i < 20; i++) deep = { type: "object", properties: { a: deep } }
        const depth = yield* post(org, "/v1/tasks", { name: "deep", answer_schema: deep })
        assert.strictEqual(depth.status, 400)
        assert.strictEqual(depth.json.limit, "SVC_ANSWER_SCHEMA_MAX_DEPTH")
        assert.match(depth.json.field, /^answer_schema\.properties\.a\.properties\.a\./)

        const many = { anyOf: Array.from({ length: 1200 }, (_, i) => ({ const: i })) }
        const count = yield* post(org, "/v1/tasks", { name: "many", answer_schema: many })
        assert.strictEqual(count.status, 400)
        assert.strictEqual(count.json.limit, "SVC_ANSWER_SCHEMA_MAX_SUBSCHEMAS")

        const pattern = { properties: { code: { type: "string", pattern: `^${"(ab|cd)".repeat(100)}$` } } }
        const long = yield* post(org, "/v1/tasks", { name: "long", answer_schema: pattern })
        assert.strictEqual(long.status, 400)
        assert.strictEqual(long.json.limit, "SVC_ANSWER_SCHEMA_MAX_PATTERN_LENGTH")
        assert.strictEqual(long.json.field, "answer_schema.properties.code.pattern")
      }))

    it.effect("a correction whose check exceeds the time budget: 422 CORRECTION_TOO_COMPLEX naming SVC_ANSWER_VALIDATION_TIMEOUT, within the budget", () =>
      Effect.gen(function*() {
        const org = yield* SvcTest.org()
        const runId = yield* taskWithRun(org, catastrophic)
        const { value: response, ms } = yield* timed(post(org, "/v1/feedback", { inference_log_id: runId, score: -1, correction: catastrophicCorrection }))
        assert.strictEqual(response.status, 422)
        assert.strictEqual(response.json.code, "CORRECTION_TOO_COMPLEX")
        assert.strictEqual(response.json.limit, "SVC_ANSWER_VALIDATION_TIMEOUT")
        assert.strictEqual(response.json.limit_value, BUDGET_MS)
        assert.strictEqual(response.json.field, "correction")
        assert.isBelow(ms, BUDGET_MS * 6)
        // Nothing was saved; an ordinary correction of the same task still works.
        const fine = yield* post(org, "/v1/feedback", { inference_log_id: runId, score: 1, correction: { s: "aaaa" } })
        assert.strictEqual(fine.status, 201, fine.text)
        const mismatch = yield* post(org, "/v1/feedback", { inference_log_id: runId, score: 1, correction: { s: "b" } })
        assert.strictEqual(mismatch.status, 422)
        assert.strictEqual(mismatch.json.code, "CORRECTION_SHAPE_MISMATCH")
      }))

    it.effect(`JSON nested deeper than ${MAX_JSON_DEPTH} levels in any field: 400 INVALID_REQUEST naming the field, never a 500`, () =>
      Effect.gen(function*() {
        const org = yield* SvcTest.org()
        const runId = yield* taskWithRun(org, { type: "object" })
        const task = yield* post(org, "/v1/tasks", { name: "t", answer_schema: { type: "object" } })
        for (const depth of [MAX_JSON_DEPTH, 10_000]) {
          // The field's own object is level 1: `{a: deep}` is one level more than `deep`.
          const deep = "[".repeat(depth) + "]".repeat(depth)
          const correction = yield* post(org, "/v1/feedback", `{"inference_log_id":"${runId}","score":1,"correction":{"a":${deep}}}`)
          assert.strictEqual(correction.status, 400, correction.text)
          assert.strictEqual(correction.json.code, "INVALID_REQUEST")
          assert.strictEqual(correction.json.field, "correction")
          const run = yield* post(org, `/v1/tasks/${task.json.id}/runs`, `{"input":[${deep}],"answer":{}}`)
          assert.strictEqual(run.status, 400, run.text)
          assert.strictEqual(run.json.field, "input")
          const schema = yield* post(org, "/v1/tasks", `{"name":"deep","answer_schema":{"a":${deep}}}`)
          assert.strictEqual(schema.status, 400, schema.text)
          assert.strictEqual(schema.json.field, "answer_schema")
        }
        // Exactly at the limit is fine.
        const atLimit = JSON.parse("[".repeat(MAX_JSON_DEPTH) + "]".repeat(MAX_JSON_DEPTH))
        const ok = yield* post(org, `/v1/tasks/${task.json.id}/runs`, { input: atLimit, answer: {} })
        assert.strictEqual(ok.status, 201, ok.text)
      }))
  })
})
