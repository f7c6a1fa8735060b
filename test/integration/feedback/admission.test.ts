/**
 * Fair admission of feedback to the validation workers over HTTP: once the
 * validation queue (`SVC_ANSWER_VALIDATION_QUEUE`) is full, the organization
 * holding it is refused with `429 VALIDATION_BUSY` and `Retry-After`,
 * decided before its body is read; another organization is still admitted.
 */
import { assert, describe, layer } from "@effect/vitest"
import { Effect, Fiber } from "effect"
import { SvcTest, type TestOrg } from "../../../src/testing.ts"
import { eventually, raw } from "../../support/http.ts"

/** A pattern that backtracks for far longer than the check's deadline on `slowValue`. */
const slowSchema = { type: "object", properties: { s: { type: "string", pattern: "^(a+)+$" } } }
const slowValue = { s: "a".repeat(40) + "!" }

const setup = (org: TestOrg) =>
  Effect.gen(function*() {
    const task = yield* org.client.tasks.create({ payload: { name: "slow", answer_schema: slowSchema as never } })
    const run = yield* org.client.tasks.logRun({
      params: { task_id: task.id },
      payload: { input: { q: "x" }, answer: { s: "aaa" } }
    })
    return run.trace_id
  })

const post = (baseUrl: string, key: string, body: string) =>
  raw(`${baseUrl}/v1/feedback`, {
    method: "POST",
    headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
    body
  })

layer(SvcTest.layer({ config: { answerValidationQueue: 1, answerValidationTimeoutMs: 1000 } }), {
  excludeTestServices: true
})(
  "fair admission of feedback to the validation workers",
  (it) => {
    describe("a full queue refuses only the organization holding it, before reading the body", () => {
      it.effect("429 VALIDATION_BUSY with Retry-After for the holder (even for a body that is not JSON); another organization is admitted", () =>
        Effect.gen(function*() {
          const svc = yield* SvcTest
          const flood = yield* SvcTest.org()
          const other = yield* SvcTest.org()
          const floodRun = yield* setup(flood)
          const otherRun = yield* setup(other)
          // One slow check holds the only place in the queue until its deadline.
          const slow = yield* post(
            svc.baseUrl,
            flood.key,
            JSON.stringify({ inference_log_id: floodRun, score: 0, correction: slowValue })
          ).pipe(
            Effect.forkChild
          )
          const refused = yield* eventually(
            Effect.map(
              post(svc.baseUrl, flood.key, "{ this is not JSON"),
              (response) => response.status === 429 ? response : undefined
            ),
            { what: "the flooding organization to be refused" }
          )
          assert.strictEqual(refused.status, 429)
          assert.strictEqual((refused.json as { code: string }).code, "VALIDATION_BUSY")
          assert.strictEqual((refused.json as { limit: string }).limit, "SVC_ANSWER_VALIDATION_QUEUE")
          assert.strictEqual(refused.headers.get("retry-after"), "1")
          // The queue is full, but this organization holds nothing of it.
          const admitted = yield* post(svc.baseUrl, other.key, JSON.stringify({ inference_log_id: otherRun, score: 1 }))
          assert.strictEqual(admitted.status, 201)
          const slowAnswer = yield* Fiber.join(slow)
          assert.strictEqual(slowAnswer.status, 422)
          // Once the slow check has ended, the organization is admitted again (and its bad body answered as such).
          const after = yield* post(svc.baseUrl, flood.key, "{ this is not JSON")
          assert.strictEqual(after.status, 400)
        }))
    })
  }
)
