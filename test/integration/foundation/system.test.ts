import { assert, describe, layer } from "@effect/vitest"
import { Validator } from "@seriousme/openapi-schema-validator"
import addFormats from "ajv-formats"
import { Ajv2020 } from "ajv/dist/2020.js"
import { Effect } from "effect"
import { OpenApi } from "effect/http-api"
import { createHash } from "node:crypto"
import { Api } from "../../../src/api/Api.ts"
import { VERSION } from "../../../src/api/Version.ts"
import { CONSOLE_CSP } from "../../../src/server/Console.ts"
import { inlineScripts } from "../../../src/server/Docs.ts"
import { SvcTest } from "../../../src/testing.ts"
import { raw } from "../../support/http.ts"

layer(SvcTest.layer(), { excludeTestServices: true })("system routes", (it) => {
  describe("liveness and readiness", () => {
    it.effect("GET /health and GET /ready answer ok without auth; /health names the version of svc", () =>
      Effect.gen(function*() {
        const svc = yield* SvcTest
        assert.deepStrictEqual((yield* raw(`${svc.baseUrl}/health`)).json, { status: "ok", version: VERSION })
        assert.deepStrictEqual((yield* raw(`${svc.baseUrl}/ready`)).json, { status: "ok" })
      }))
  })

  describe("API documents", () => {
    it.effect("GET /openapi.json is a valid OpenAPI 3.1 document of the whole API", () =>
      Effect.gen(function*() {
        const svc = yield* SvcTest
        const doc = (yield* raw(`${svc.baseUrl}/openapi.json`)).json
        assert.match(doc.openapi, /^3\.1\./)
        assert.strictEqual(doc.info.version, VERSION)
        const validator = new Validator()
        const result = yield* Effect.promise(() => validator.validate(doc))
        assert.isTrue(result.valid, JSON.stringify(result.errors ?? null).slice(0, 2000))
        for (
          const path of [
            "/v1/tasks",
            "/v1/tasks/{task_id}",
            "/v1/tasks/{task_id}/runs",
            "/v1/runs/{trace_id}",
            "/v1/tasks/{task_id}/datasets",
            "/v1/datasets/{dataset_id}",
            "/health",
            "/ready"
          ]
        ) {
          assert.property(doc.paths, path)
        }
        const create = doc.paths["/v1/tasks"].post
        assert.property(create.responses, "201")
        assert.property(create.responses, "401")
        assert.property(create.responses, "403")
        assert.property(create.responses, "400")
        assert.match(create.description, /tasks\.write/)
        // A bearer key or, for the console, its session cookie (with the same scopes).
        assert.deepStrictEqual(create.security, [{ bearer: ["tasks.write"] }, { console: ["tasks.write"] }])
        assert.deepStrictEqual(doc, JSON.parse(JSON.stringify(OpenApi.fromApi(Api))))
      }))

    it.effect("error answers, the framework's own included, match the problem schema documented for their operation", () =>
      Effect.gen(function*() {
        const svc = yield* SvcTest
        const org = yield* SvcTest.org()
        const reader = yield* svc.provisionOrg({ scopes: ["tasks.read"] })
        const doc = (yield* raw(`${svc.baseUrl}/openapi.json`)).json
        const ajv = new Ajv2020({ strict: false, allErrors: true })
        addFormats.default(ajv)
        ajv.addSchema(doc, "openapi")
        const json = (key: string) => ({ authorization: `Bearer ${key}`, "content-type": "application/json" })
        const cases: Array<[string, string, string, RequestInit]> = [
          ["/v1/tasks", "post", "400 malformed JSON", { method: "POST", headers: json(org.key), body: "{not json" }],
          ["/v1/tasks", "post", "400 a member missing", { method: "POST", headers: json(org.key), body: "{}" }],
          ["/v1/tasks", "post", "401", { method: "POST", headers: { "content-type": "application/json" }, body: "{}" }],
          ["/v1/tasks", "post", "403", { method: "POST", headers: json(reader.key), body: "{}" }],
          ["/v1/tasks", "post", "413", {
            method: "POST",
            headers: json(org.key),
            body: JSON.stringify({ name: "x".repeat(1_100_000) })
          }],
          ["/v1/tasks", "post", "415", {
            method: "POST",
            headers: { ...json(org.key), "content-type": "text/plain" },
            body: "hi"
          }],
          ["/v1/tasks/{task_id}", "get", "404", { headers: json(org.key) }],
          ["/v1/tasks/{task_id}", "get", "400 a bad path id", { headers: json(org.key) }]
        ]
        for (const [path, method, label, init] of cases) {
          const url = `${svc.baseUrl}${
            path.replace("{task_id}", label.includes("bad path") ? "nope" : "0193a0a0-0000-7000-8000-00000000000a")
          }`
          const response = yield* raw(url, init)
          const status = label.slice(0, 3)
          assert.strictEqual(String(response.status), status, `${label}: ${response.text}`)
          assert.strictEqual(response.headers.get("content-type"), "application/problem+json", label)
          const documented = doc.paths[path][method].responses[status]
          assert.isDefined(documented, `${method} ${path} documents ${status}`)
          const validate = ajv.compile({
            $ref: "openapi#/paths/" + path.replaceAll("~", "~0").replaceAll("/", "~1") +
              `/${method}/responses/${status}/content/application~1problem+json/schema`
          })
          assert.isTrue(validate(response.json), `${label}: ${JSON.stringify(validate.errors)} for ${response.text}`)
        }
      }))

    it.effect("GET /docs serves human-readable API docs that carry every operation with its examples", () =>
      Effect.gen(function*() {
        const svc = yield* SvcTest
        const docs = yield* raw(`${svc.baseUrl}/docs`)
        assert.strictEqual(docs.status, 200)
        assert.match(docs.headers.get("content-type") ?? "", /text\/html/)
        assert.include(docs.text, "<html")
        // Scalar renders the document embedded in the page (no CDN): read it back.
        assert.include(docs.text, "Scalar.createApiReference")
        const start = docs.text.lastIndexOf("content: ") + "content: ".length
        const end = docs.text.indexOf("\n      })\n    </script>", start)
        const embedded = JSON.parse(docs.text.slice(start, end))
        const served = (yield* raw(`${svc.baseUrl}/openapi.json`)).json
        assert.deepStrictEqual(embedded, served)
        let operations = 0
        for (const item of Object.values(embedded.paths) as Array<Record<string, any>>) {
          for (const op of Object.values(item)) {
            operations++
            assert.isString(op.summary)
            const success = Object.entries(op.responses as Record<string, any>).find(([status]) =>
              status.startsWith("2")
            )![1]
            for (const media of Object.values(success.content ?? {}) as Array<any>) {
              assert.property(media, "example", op.operationId)
            }
            if (op.requestBody !== undefined) {
              assert.property(op.requestBody.content["application/json"], "example", op.operationId)
            }
          }
        }
        assert.strictEqual(
          operations,
          Object.values(OpenApi.fromApi(Api).paths).flatMap((item) => Object.keys(item)).length
        )
      }))

    it.effect("GET /docs has a CSP of its own: every inline script allowed by its hash and nothing else, sandboxed, never framed", () =>
      Effect.gen(function*() {
        const svc = yield* SvcTest
        const docs = yield* raw(`${svc.baseUrl}/docs`)
        const csp = docs.headers.get("content-security-policy") ?? ""
        assert.notStrictEqual(csp, CONSOLE_CSP)
        const directives = new Map(
          csp.split(";").map((part) => part.trim().split(/\s+/)).map(([name, ...values]) => [name!, values])
        )
        assert.deepStrictEqual(directives.get("frame-ancestors"), ["'none'"])
        assert.deepStrictEqual(directives.get("default-src"), ["'none'"])
        assert.deepStrictEqual(directives.get("connect-src"), ["'none'"])
        assert.deepStrictEqual(directives.get("sandbox"), ["allow-scripts", "allow-popups"])
        const scripts = inlineScripts(docs.text)
        assert.isAtLeast(scripts.length, 2)
        assert.sameMembers(
          directives.get("script-src")!,
          scripts.map((text) => `'sha256-${createHash("sha256").update(text, "utf8").digest("base64")}'`)
        )
        assert.strictEqual(docs.headers.get("x-frame-options"), "DENY")
        assert.strictEqual(docs.headers.get("x-content-type-options"), "nosniff")
        // The console keeps its own policy.
        const consolePage = yield* raw(`${svc.baseUrl}/console/`)
        assert.strictEqual(consolePage.headers.get("content-security-policy"), CONSOLE_CSP)
      }))
  })
})
