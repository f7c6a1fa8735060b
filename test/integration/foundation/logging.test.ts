import { assert, describe, layer } from "@effect/vitest"
import { Effect } from "effect"
import { SvcTest } from "../../../src/testing.ts"
import { raw } from "../../support/http.ts"

layer(SvcTest.layer(), { excludeTestServices: true })("structured logs", (it) => {
  describe("logs are JSON lines with level, message, request id, org id and trace id", () => {
    it.effect("a request's log line carries the request id, org id and trace id", () =>
      Effect.gen(function*() {
        const svc = yield* SvcTest
        const org = yield* SvcTest.org()
        yield* raw(`${svc.baseUrl}/v1/tasks`, {
          headers: { authorization: `Bearer ${org.key}`, "x-request-id": "log-check-1" }
        })
        const lines = svc.logLines().map((line) => JSON.parse(line))
        const line = lines.find((entry) => entry.request_id === "log-check-1")
        assert.isDefined(line)
        assert.strictEqual(line.level, "INFO")
        assert.strictEqual(line.message, "request")
        assert.strictEqual(line.org_id, org.orgId)
        assert.match(line.trace_id, /^[0-9a-f]{32}$/)
        assert.strictEqual(line["http.response.status_code"], 200)
        assert.isString(line.time)
      }))
  })

  describe("no key, secret or authorization header ever appears in a log line", () => {
    it.effect("keys sent in good and bad requests never reach the logs", () =>
      Effect.gen(function*() {
        const svc = yield* SvcTest
        const org = yield* SvcTest.org()
        const wrongKey = "svc_" + "Z".repeat(43)
        yield* raw(`${svc.baseUrl}/v1/tasks`, { headers: { authorization: `Bearer ${org.key}` } })
        yield* raw(`${svc.baseUrl}/v1/tasks`, { headers: { authorization: `Bearer ${wrongKey}` } })
        yield* raw(`${svc.baseUrl}/v1/tasks?cursor=${org.key}`, { headers: { authorization: `Bearer ${org.key}` } })
        yield* raw(`${svc.baseUrl}/v1/tasks`, {
          method: "POST",
          headers: { authorization: `Bearer ${org.key}`, "content-type": "application/json" },
          body: JSON.stringify({ name: org.key, answer_schema: { type: "bogus" } })
        })
        const all = svc.logLines().join("\n")
        assert.notInclude(all, org.key)
        assert.notInclude(all, wrongKey)
        assert.notInclude(all.toLowerCase(), "bearer ")
        for (const line of svc.logLines()) JSON.parse(line)
      }))
  })
})
