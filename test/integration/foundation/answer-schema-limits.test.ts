/**
 * Answer schemas and corrections are tenant input: no schema or correction
 * may hold the event loop (every organization's requests, `/health`
 * included), and every limit answers a problem naming it.
 */
import { assert, describe, layer } from "@effect/vitest"
import { Effect, Fiber } from "effect"
import { spawn } from "node:child_process"
import { mkdtempSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { MAX_JSON_DEPTH } from "../../../src/api/Common.ts"
import { SvcTest, type TestOrg } from "../../../src/testing.ts"
import { raw } from "../../support/http.ts"

/** The default budget (SVC_ANSWER_VALIDATION_TIMEOUT). */
const BUDGET_MS = 1000

/** `^(a+)+$` backtracks exponentially on a run of `a`s followed by anything else. */
const catastrophic = { type: "object", properties: { s: { type: "string", pattern: "^(a+)+$" } } }
const catastrophicCorrection = { s: `${"a".repeat(40)}!` }
/** Untyped `uniqueItems`: Ajv compares every pair (deep equality). */
const uniqueSchema = { type: "object", properties: { items: { type: "array", uniqueItems: true } } }
/** 40 000 items: ~800 million comparisons, seconds even on a fast machine (the budget is one second). */
const uniqueCorrection = { items: Array.from({ length: 40_000 }, (_, i) => ({ n: i })) }
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
/**
 * ~300 KB, for the loop measuring /health: over the size limit all the
 * same, while parsing it (work the event loop must still do for any body)
 * stays small beside the checks being measured.
 */
const bigSchema = schemaOf(4_000)

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

/** Sends each body in turn, `rounds` times, from a child process; answers each status and duration. */
const ATTACKER = `
const { readFileSync } = await import("node:fs")
const plan = JSON.parse(process.env.ATTACK_PLAN)
const bodies = plan.requests.map((r) => ({ path: r.path, body: readFileSync(r.file) }))
for (let round = 0; round < plan.rounds; round++) {
  for (const { path, body } of bodies) {
    const started = performance.now()
    const response = await fetch(plan.baseUrl + path, {
      method: "POST",
      headers: { authorization: "Bearer " + plan.key, "content-type": "application/json" },
      body
    })
    await response.arrayBuffer()
    console.log(JSON.stringify({ status: response.status, ms: performance.now() - started }))
  }
}
`

/** Writes the bodies to files (before measuring: serializing them is this process's work). */
const attackFiles = (requests: ReadonlyArray<{ readonly path: string; readonly body: unknown }>) => {
  const dir = mkdtempSync(join(tmpdir(), "svc-attack-"))
  return requests.map((request, i) => {
    const file = join(dir, `${i}.json`)
    writeFileSync(file, JSON.stringify(request.body))
    return { path: request.path, file }
  })
}

const runAttacker = (
  baseUrl: string,
  key: string,
  files: ReadonlyArray<{ readonly path: string; readonly file: string }>,
  rounds: number
) =>
  Effect.callback<ReadonlyArray<{ readonly status: number; readonly ms: number }>, Error>((resume) => {
    const child = spawn(process.execPath, ["--input-type=module", "-e", ATTACKER], {
      env: { ...process.env, ATTACK_PLAN: JSON.stringify({ baseUrl, key, rounds, requests: files }) },
      stdio: ["ignore", "pipe", "inherit"]
    })
    let out = ""
    child.stdout.on("data", (chunk) => (out += chunk))
    child.on("exit", (code) =>
      resume(
        code === 0
          ? Effect.succeed(out.trim().split("\n").map((line) => JSON.parse(line)))
          : Effect.fail(new Error(`attacker exited with ${code}`))
      ))
    return Effect.sync(() => child.kill())
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
    describe("no correction or schema holds the event loop", () => {
      it.effect(
        "/health stays fast while one organization sends backtracking patterns, huge uniqueItems and huge schemas",
        () =>
          Effect.gen(function*() {
            const svc = yield* SvcTest
            const attacker = yield* SvcTest.org()
            const patternRun = yield* taskWithRun(attacker, catastrophic)
            const uniqueRun = yield* taskWithRun(attacker, uniqueSchema)

            // The attacker runs in another process: this event loop is the
            // service's, and the probe measures only what the service does.
            const files = attackFiles([
              {
                path: "/v1/feedback",
                body: { inference_log_id: patternRun, score: -1, correction: catastrophicCorrection }
              },
              { path: "/v1/feedback", body: { inference_log_id: uniqueRun, score: -1, correction: uniqueCorrection } },
              { path: "/v1/tasks", body: { name: "huge", answer_schema: bigSchema } }
            ])
            let attacking = true
            const attack = runAttacker(svc.baseUrl, attacker.key, files, 3).pipe(Effect.ensuring(Effect.sync(() => {
              attacking = false
            })))

            const latencies: Array<number> = []
            const probe = Effect.gen(function*() {
              while (attacking) {
                const { value, ms } = yield* timed(raw(`${svc.baseUrl}/health`))
                assert.strictEqual(value.status, 200)
                latencies.push(ms)
                yield* Effect.sleep(10)
              }
            })
            const prober = yield* Effect.forkChild(probe)
            const results = yield* attack
            yield* Fiber.join(prober)
            // Each backtracking or uniqueItems correction was cut at the budget
            // (422), the huge schema refused (400).
            assert.deepStrictEqual(results.map((r) => r.status), [422, 422, 400, 422, 422, 400, 422, 422, 400])
            // The backtracking and uniqueItems checks ran for at least the budget each.
            const attackMs = results.filter((_, i) => i % 3 < 2).map((r) => r.ms)
            const slowestAttack = Math.max(...attackMs)
            const sorted = [...latencies].sort((a, b) => a - b)
            const p99 = sorted[Math.floor(sorted.length * 0.99)]!
            const max = sorted[sorted.length - 1]!
            console.log(
              `health during attack: ${latencies.length} probes, p50 ${
                sorted[Math.floor(sorted.length / 2)]!.toFixed(1)
              } ms, ` +
                `p99 ${p99.toFixed(1)} ms, max ${max.toFixed(1)} ms; attack requests ${
                  Math.min(...attackMs).toFixed(0)
                }-${slowestAttack.toFixed(0)} ms`
            )
            assert.isAtLeast(latencies.length, 10)
            // Had any check run on the event loop, some probe (one every 10 ms)
            // would have waited for nearly all of it: about as long as the attack
            // request itself (each runs for at least the budget; unchecked, the
            // pattern alone would run for hours, the uniqueItems check for many
            // seconds). What the event loop still does per request (parsing and
            // decoding a body of a few hundred KB, one at a time here) costs tens
            // of milliseconds, a few hundred on a machine as busy as a shared
            // 2-core CI box, so the bound is relative to the attack's own duration
            // rather than absolute.
            const fastestAttack = Math.min(...attackMs)
            assert.isAtLeast(fastestAttack, BUDGET_MS * 0.9)
            assert.isBelow(max, fastestAttack * 0.75)
          }),
        { timeout: 120_000 }
      )
    })

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
