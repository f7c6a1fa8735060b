import { assert, describe, layer } from "@effect/vitest"
import { Effect } from "effect"
import { SvcTest } from "../../../src/testing.ts"
import { raw } from "../../support/http.ts"

const isProblem = (response: { headers: Headers; json: any; status: number }, code: string) => {
  assert.strictEqual(response.headers.get("content-type"), "application/problem+json")
  assert.strictEqual(response.json.status, response.status)
  assert.strictEqual(response.json.code, code)
  assert.isString(response.json.type)
  assert.isString(response.json.title)
}

layer(SvcTest.layer({ config: { maxBodyBytes: 1024 * 1024 } }), { excludeTestServices: true })(
  "errors are RFC 9457 problem details",
  (it) => {
    describe("undecodable input: 400 INVALID_REQUEST naming the field", () => {
      it.effect("a missing or mistyped body member", () =>
        Effect.gen(function*() {
          const svc = yield* SvcTest
          const org = yield* SvcTest.org()
          const post = (body: unknown) =>
            raw(`${svc.baseUrl}/v1/tasks`, {
              method: "POST",
              headers: { authorization: `Bearer ${org.key}`, "content-type": "application/json" },
              body: JSON.stringify(body)
            })
          const missing = yield* post({ answer_schema: {} })
          assert.strictEqual(missing.status, 400)
          isProblem(missing, "INVALID_REQUEST")
          assert.strictEqual(missing.json.field, "name")
          const wrong = yield* post({ name: 5, answer_schema: {} })
          assert.strictEqual(wrong.json.field, "name")
          const extra = yield* post({ name: "x", answer_schema: {}, nmae: "typo" })
          assert.strictEqual(extra.json.field, "nmae")
          const notObject = yield* post({ name: "x", answer_schema: [1] })
          assert.strictEqual(notObject.json.field, "answer_schema")
          const both = yield* post({})
          assert.sameMembers(both.json.errors.map((e: { field: string }) => e.field), ["name", "answer_schema"])
        }))

      it.effect("malformed JSON, a bad path id, a bad query value, a foreign cursor", () =>
        Effect.gen(function*() {
          const svc = yield* SvcTest
          const org = yield* SvcTest.org()
          const auth = { authorization: `Bearer ${org.key}` }
          const malformed = yield* raw(`${svc.baseUrl}/v1/tasks`, {
            method: "POST",
            headers: { ...auth, "content-type": "application/json" },
            body: "{not json"
          })
          assert.strictEqual(malformed.status, 400)
          isProblem(malformed, "INVALID_REQUEST")
          const badId = yield* raw(`${svc.baseUrl}/v1/tasks/not-a-uuid`, { headers: auth })
          assert.strictEqual(badId.status, 400)
          assert.strictEqual(badId.json.field, "task_id")
          const badLimit = yield* raw(`${svc.baseUrl}/v1/tasks?limit=1000`, { headers: auth })
          assert.strictEqual(badLimit.json.field, "limit")
          const badCursor = yield* raw(`${svc.baseUrl}/v1/tasks?cursor=abc`, { headers: auth })
          assert.strictEqual(badCursor.status, 400)
          assert.strictEqual(badCursor.json.field, "cursor")
          const badTrace = yield* raw(`${svc.baseUrl}/v1/runs/XYZ`, { headers: auth })
          assert.strictEqual(badTrace.json.field, "trace_id")
        }))

      it.effect("the typed client sees InvalidRequest with the field", () =>
        Effect.gen(function*() {
          const org = yield* SvcTest.org()
          const error = yield* org.client.tasks.create({ payload: { name: "x", answer_schema: { type: "nope" } } })
            .pipe(Effect.flip)
          assert.strictEqual(error._tag, "InvalidRequest")
          if (error._tag === "InvalidRequest") {
            assert.strictEqual(error.field, "answer_schema")
            assert.match(error.detail ?? "", /not a valid JSON Schema/)
          }
        }))
    })

    describe("limits and framework answers", () => {
      it.effect("a body over 1 MiB: 413 PAYLOAD_TOO_LARGE problem naming its limit like every limit (limit_bytes kept, deprecated)", () =>
        Effect.gen(function*() {
          const svc = yield* SvcTest
          const org = yield* SvcTest.org()
          const response = yield* raw(`${svc.baseUrl}/v1/tasks`, {
            method: "POST",
            headers: { authorization: `Bearer ${org.key}`, "content-type": "application/json" },
            body: JSON.stringify({ name: "x", answer_schema: { description: "a".repeat(1024 * 1024 + 1) } })
          })
          assert.strictEqual(response.status, 413)
          isProblem(response, "PAYLOAD_TOO_LARGE")
          assert.strictEqual(response.json.limit, "SVC_MAX_BODY_BYTES")
          assert.strictEqual(response.json.limit_value, 1024 * 1024)
          assert.strictEqual(response.json.limit_bytes, 1024 * 1024)
        }))

      it.effect("a body just under 1 MiB is accepted", () =>
        Effect.gen(function*() {
          const svc = yield* SvcTest
          const org = yield* SvcTest.org()
          // (A run's input: answer schemas have a size limit of their own.)
          const task = yield* org.client.tasks.create({ payload: { name: "x", answer_schema: { type: "object" } } })
          const response = yield* raw(`${svc.baseUrl}/v1/tasks/${task.id}/runs`, {
            method: "POST",
            headers: { authorization: `Bearer ${org.key}`, "content-type": "application/json" },
            body: JSON.stringify({ input: { description: "a".repeat(1000 * 1000) }, answer: {} })
          })
          assert.strictEqual(response.status, 201)
        }))

      it.effect("unknown route: 404 NOT_FOUND problem; wrong content type: 415 problem", () =>
        Effect.gen(function*() {
          const svc = yield* SvcTest
          const org = yield* SvcTest.org()
          const unknown = yield* raw(`${svc.baseUrl}/v1/nothing-here`)
          assert.strictEqual(unknown.status, 404)
          isProblem(unknown, "NOT_FOUND")
          const text = yield* raw(`${svc.baseUrl}/v1/tasks`, {
            method: "POST",
            headers: { authorization: `Bearer ${org.key}`, "content-type": "text/plain" },
            body: "hello"
          })
          assert.strictEqual(text.status, 415)
          isProblem(text, "UNSUPPORTED_MEDIA_TYPE")
        }))

      it.effect("every answer carries a request id, echoing a well-formed incoming one", () =>
        Effect.gen(function*() {
          const svc = yield* SvcTest
          const mine = yield* raw(`${svc.baseUrl}/health`, { headers: { "x-request-id": "req-123" } })
          assert.strictEqual(mine.headers.get("x-request-id"), "req-123")
          const generated = yield* raw(`${svc.baseUrl}/health`, { headers: { "x-request-id": "bad id\twith tab" } })
          assert.notStrictEqual(generated.headers.get("x-request-id"), "bad id\twith tab")
          assert.match(generated.headers.get("x-request-id") ?? "", /^[0-9a-f-]{36}$/)
        }))
    })
  }
)
