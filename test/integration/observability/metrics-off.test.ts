/** Without SVC_METRICS_PORT or SVC_METRICS_TOKEN there is no /metrics. */
import { assert, describe, layer } from "@effect/vitest"
import { Effect } from "effect"
import { SvcTest } from "../../../src/testing.ts"
import { raw } from "../../support/http.ts"

layer(SvcTest.layer(), { excludeTestServices: true })("metrics off", (it) => {
  describe("neither SVC_METRICS_PORT nor SVC_METRICS_TOKEN", () => {
    it.effect("GET /metrics is an unknown route (404, with or without a bearer token) and no metrics listener starts", () =>
      Effect.gen(function*() {
        const svc = yield* SvcTest
        const org = yield* SvcTest.org()
        for (
          const headers of [{}, { authorization: `Bearer ${org.key}` }, {
            authorization: "Bearer anything-at-all-0123456789"
          }]
        ) {
          const answer = yield* raw(`${svc.baseUrl}/metrics`, { headers })
          assert.strictEqual(answer.status, 404)
          assert.strictEqual(answer.json.code, "NOT_FOUND")
        }
        assert.isFalse(svc.logLines().some((line) => line.includes("svc metrics listening")))
      }))
  })
})
