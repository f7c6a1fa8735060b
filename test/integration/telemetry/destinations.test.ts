import { assert, describe, layer } from "@effect/vitest"
import { Effect, Layer, Redacted } from "effect"
import { SecretStore } from "../../../src/secrets/SecretStore.ts"
import { SvcTest } from "../../../src/testing.ts"
import { HttpsReceiver } from "../../support/HttpsReceiver.ts"
import { raw } from "../../support/http.ts"
import { decodeOtlp } from "../../support/Otlp.ts"
import { loopbackTargets, TestTls } from "../../support/tls.ts"

const Svc = Layer.unwrap(Effect.map(TestTls.shared, (tls) => SvcTest.layer({ config: loopbackTargets(tls) })))

const post = (url: string, key: string, body: unknown) =>
  raw(url, {
    method: "POST",
    headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
    body: JSON.stringify(body)
  })

layer(SecretStore.layer.pipe(Layer.provideMerge(Svc)), { excludeTestServices: true })(
  "telemetry destinations",
  (it) => {
    describe("rule 1: GET, POST, test, DELETE as the spec's table says", () => {
      it.effect("POST answers 201 {id, url_hint}; GET lists it without URL or headers; DELETE 204, then 404", () =>
        Effect.gen(function*() {
          const svc = yield* SvcTest
          const org = yield* SvcTest.org()
          const collector = yield* HttpsReceiver.make()
          const response = yield* post(`${svc.baseUrl}/v1/telemetry-destinations`, org.key, {
            url: collector.url("/v1/traces?token=abc123secret"),
            headers: { Authorization: "Bearer collector-token-xyz" }
          })
          assert.strictEqual(response.status, 201)
          assert.deepStrictEqual(Object.keys(response.json).sort(), ["id", "url_hint"])
          assert.notInclude(response.text, "abc123secret")
          assert.notInclude(response.text, "collector-token-xyz")
          const id = response.json.id as string
          const listed = yield* raw(`${svc.baseUrl}/v1/telemetry-destinations`, {
            headers: { authorization: `Bearer ${org.key}` }
          })
          assert.strictEqual(listed.status, 200)
          assert.notInclude(listed.text, "abc123secret")
          assert.notInclude(listed.text, "collector-token-xyz")
          const [destination] = listed.json.destinations
          assert.deepStrictEqual(Object.keys(destination).sort(), [
            "created_at",
            "dropped_spans",
            "id",
            "last_delivered_at",
            "last_error",
            "pending_spans",
            "url_hint"
          ])
          assert.strictEqual(destination.id, id)
          assert.strictEqual(destination.dropped_spans, 0)
          const removed = yield* raw(`${svc.baseUrl}/v1/telemetry-destinations/${id}`, {
            method: "DELETE",
            headers: { authorization: `Bearer ${org.key}` }
          })
          assert.strictEqual(removed.status, 204)
          const again = yield* org.client.telemetry.remove({ params: { id } }).pipe(Effect.flip)
          assert.strictEqual(again._tag, "NotFound")
          assert.deepStrictEqual((yield* org.client.telemetry.list()).destinations, [])
        }).pipe(Effect.scoped))

      it.effect("the test endpoint exports one test span at once: 200 {delivered: true}, decoded with the official definitions", () =>
        Effect.gen(function*() {
          const org = yield* SvcTest.org()
          const collector = yield* HttpsReceiver.make()
          const created = yield* org.client.telemetry.create({
            payload: { url: collector.url("/v1/traces"), headers: { Authorization: "Bearer t0k3n" } }
          })
          const result = yield* org.client.telemetry.test({ params: { id: created.id } })
          assert.deepStrictEqual(result, { delivered: true })
          const request = yield* collector.waitFor((r) => decodeOtlp(r).spans.some((s) => s.name === "svc.telemetry.test"))
          assert.strictEqual(request.path, "/v1/traces")
          assert.strictEqual(request.headers["content-type"], "application/json")
          assert.strictEqual(request.headers.authorization, "Bearer t0k3n")
          const decoded = decodeOtlp(request)
          assert.deepStrictEqual(decoded.problems, [])
          assert.strictEqual(decoded.resource["service.name"], "svc")
          assert.strictEqual(decoded.spans[0]!.attributes["svc.org_id"], org.orgId)
        }).pipe(Effect.scoped))

      it.effect("spans of the organization's API requests reach its collector", () =>
        Effect.gen(function*() {
          const org = yield* SvcTest.org()
          const collector = yield* HttpsReceiver.make()
          yield* org.client.telemetry.create({ payload: { url: collector.url("/v1/traces") } })
          yield* org.client.tasks.list({ query: {} })
          const request = yield* collector.waitFor((r) =>
            decodeOtlp(r).spans.some((s) => s.kind === 2 && s.attributes["url.path"] === "/v1/tasks")
          )
          const decoded = decodeOtlp(request)
          assert.deepStrictEqual(decoded.problems, [])
          const server = decoded.spans.find((s) => s.kind === 2 && s.attributes["url.path"] === "/v1/tasks")!
          assert.strictEqual(server.attributes["http.request.method"], "GET")
          assert.strictEqual(server.attributes["http.response.status_code"], 200)
          assert.strictEqual(server.attributes["svc.org_id"], org.orgId)
        }).pipe(Effect.scoped))
    })

    describe("rule 3: header values are secrets", () => {
      it.effect("values are encrypted at rest and join the organization's protected values", () =>
        Effect.gen(function*() {
          const svc = yield* SvcTest
          const org = yield* SvcTest.org()
          const collector = yield* HttpsReceiver.make()
          yield* org.client.telemetry.create({
            payload: { url: collector.url("/v1/traces"), headers: { "X-Api-Key": "very-secret-value-42" } }
          })
          const rows = yield* svc.sql<{ sealed: string }>`SELECT sealed FROM org_secrets WHERE org_id = ${org.orgId}`
          assert.strictEqual(rows.length, 1)
          assert.notInclude(rows[0]!.sealed, "very-secret-value-42")
          const values = yield* SecretStore.use((store) => store.orgValues(org.orgId))
          assert.include(values.map(Redacted.value), "very-secret-value-42")
          assert.isFalse(svc.logLines().some((line) => line.includes("very-secret-value-42")))
        }).pipe(Effect.scoped))
    })
  }
)
