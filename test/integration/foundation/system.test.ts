import { Validator } from "@seriousme/openapi-schema-validator"
import { assert, describe, layer } from "@effect/vitest"
import { Effect } from "effect"
import { SvcTest } from "../../../src/testing.ts"
import { raw } from "../../support/http.ts"

layer(SvcTest.layer(), { excludeTestServices: true })("system routes", (it) => {
  describe("liveness and readiness", () => {
    it.effect("GET /health and GET /ready answer ok without auth", () =>
      Effect.gen(function*() {
        const svc = yield* SvcTest
        assert.deepStrictEqual((yield* raw(`${svc.baseUrl}/health`)).json, { status: "ok" })
        assert.deepStrictEqual((yield* raw(`${svc.baseUrl}/ready`)).json, { status: "ok" })
      }))
  })

  describe("API documents", () => {
    it.effect("GET /openapi.json is a valid OpenAPI 3.1 document of the whole API", () =>
      Effect.gen(function*() {
        const svc = yield* SvcTest
        const doc = (yield* raw(`${svc.baseUrl}/openapi.json`)).json
        assert.match(doc.openapi, /^3\.1\./)
        const validator = new Validator()
        const result = yield* Effect.promise(() => validator.validate(doc))
        assert.isTrue(result.valid, JSON.stringify(result.errors ?? null).slice(0, 2000))
        for (const path of ["/v1/tasks", "/v1/tasks/{task_id}", "/v1/tasks/{task_id}/runs", "/v1/runs/{trace_id}", "/v1/tasks/{task_id}/datasets", "/v1/datasets/{dataset_id}", "/health", "/ready"]) {
          assert.property(doc.paths, path)
        }
        const create = doc.paths["/v1/tasks"].post
        assert.property(create.responses, "201")
        assert.property(create.responses, "401")
        assert.property(create.responses, "403")
        assert.property(create.responses, "400")
        assert.match(create.description, /tasks\.write/)
        assert.deepStrictEqual(create.security, [{ bearer: [] }])
      }))

    it.effect("GET /docs serves human-readable API docs", () =>
      Effect.gen(function*() {
        const svc = yield* SvcTest
        const docs = yield* raw(`${svc.baseUrl}/docs`)
        assert.strictEqual(docs.status, 200)
        assert.match(docs.headers.get("content-type") ?? "", /text\/html/)
        assert.include(docs.text, "<html")
      }))
  })
})
