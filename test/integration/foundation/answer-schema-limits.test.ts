/**
 * Answer schemas and corrections are tenant input: every limit answers a
 * problem naming it. That no schema or correction holds the event loop
 * (another organization's requests answered meanwhile) is the
 * hostile-tenant suite's (test/hostile/feedback.test.ts), which times it
 * alone on the machine.
 */
import { assert, describe, layer } from "@effect/vitest"
import { Effect } from "effect"
import { MAX_JSON_DEPTH } from "../../../src/api/Common.ts"
import { SvcTest, type TestOrg } from "../../../src/testing.ts"
import { raw } from "../../support/http.ts"

/** The default budget (SVC_ANSWER_VALIDATION_TIMEOUT). */
const BUDGET_MS = 1000

/** `^(a+)+$` backtracks exponentially on a run of `a`s followed by anything else. */
const catastrophic = { type: "object", properties: { s: { type: "string", pattern: "^(a+)+$" } } }
const catastrophicCorrection = { s: `${"a".repeat(40)}!` }
/** A correction near the body limit: 20 000 members whose values look like text worth scanning. */
const scrubbedCorrection = Object.fromEntries(
  Array.from({ length: 20_000 }, (_, i) => [`note_${i}`, `plain note ${i}: nothing secret`])
)
const schemaOf = (fields: number) => ({
  type: "object",
  properties: Object.fromEntries(
    Array.from({ length: fields }, (_, i) => [`field_${i}`, { type: "string", maxLength: 100 + i }])
  )
})
/** ~900 KB of schema (the size that once blocked compiling for seconds). */
const hugeSchema = schemaOf(12_000)
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

layer(SvcTest.layer({ config: { answerValidationTimeoutMs: BUDGET_MS } }), { excludeTestServices: true })(
  "answer schema and correction limits",
  (it) => {
    describe("scrubbing runs in workers too", () => {
      it.effect("a correction near the body limit that fits its schema is scrubbed and saved", () =>
        Effect.gen(function*() {
          const org = yield* SvcTest.org()
          const runId = yield* taskWithRun(org, { type: "object" })
          const response = yield* post(org, "/v1/feedback", {
            inference_log_id: runId,
            score: 1,
            correction: { ...scrubbedCorrection, key: org.key }
          })
          assert.strictEqual(response.status, 201, response.text.slice(0, 300))
          assert.strictEqual(response.json.correction.note_19999, scrubbedCorrection.note_19999)
          assert.strictEqual(response.json.correction.key, "[REDACTED]")
          assert.deepStrictEqual(response.json.redaction_warning.fields, ["correction.key"])
        }))
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
          const error = yield* org.client.tasks.create({
            payload: { name: "huge", answer_schema: hugeSchema as never }
          }).pipe(Effect.flip)
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
          const { value: response, ms } = yield* timed(
            post(org, "/v1/feedback", { inference_log_id: runId, score: -1, correction: catastrophicCorrection })
          )
          assert.strictEqual(response.status, 422)
          assert.strictEqual(response.json.code, "CORRECTION_TOO_COMPLEX")
          assert.strictEqual(response.json.limit, "SVC_ANSWER_VALIDATION_TIMEOUT")
          assert.strictEqual(response.json.limit_value, BUDGET_MS)
          assert.strictEqual(response.json.field, "correction")
          assert.isBelow(ms, BUDGET_MS * 6)
          // Nothing was saved; an ordinary correction of the same task still works.
          const fine = yield* post(org, "/v1/feedback", {
            inference_log_id: runId,
            score: 1,
            correction: { s: "aaaa" }
          })
          assert.strictEqual(fine.status, 201, fine.text)
          const mismatch = yield* post(org, "/v1/feedback", {
            inference_log_id: runId,
            score: 1,
            correction: { s: "b" }
          })
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
            const correction = yield* post(
              org,
              "/v1/feedback",
              `{"inference_log_id":"${runId}","score":1,"correction":{"a":${deep}}}`
            )
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
  }
)
