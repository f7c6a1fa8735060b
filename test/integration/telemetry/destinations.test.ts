import { assert, describe, layer } from "@effect/vitest"
import { Effect, Layer, Redacted } from "effect"
import { VERSION } from "../../../src/api/Version.ts"
import { headerField } from "../../../src/outbound/HeaderRules.ts"
import { SecretStore } from "../../../src/secrets/SecretStore.ts"
import { toJsonPath } from "../../../src/server/Validation.ts"
import { SvcTest, type TestOrg } from "../../../src/testing.ts"
import { invalidNameCorpus, invalidValueCorpus, refusedNameCorpus } from "../../support/headerCorpus.ts"
import { raw } from "../../support/http.ts"
import { HttpsReceiver, Reply } from "../../support/HttpsReceiver.ts"
import { decodeOtlp, ExportTraceServiceResponse } from "../../support/Otlp.ts"
import { waitForDeliveries } from "../../support/telemetry.ts"
import { loopbackTargets, TestTls } from "../../support/tls.ts"

const Svc = Layer.unwrap(Effect.map(TestTls.shared, (tls) => SvcTest.layer({ config: loopbackTargets(tls) })))

const post = (path: string, key: string, body: unknown) =>
  SvcTest.use((svc) =>
    raw(`${svc.baseUrl}${path}`, {
      method: "POST",
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
      body: JSON.stringify(body)
    })
  )

const create = (org: TestOrg, url: string, headers?: Record<string, string>) =>
  org.client.telemetry.create({ payload: headers === undefined ? { url } : { url, headers } })

layer(SecretStore.layer.pipe(Layer.provideMerge(Svc)), { excludeTestServices: true })(
  "telemetry destinations",
  (it) => {
    describe("GET, POST, test, DELETE as docs/telemetry.md's table says", () => {
      it.effect("POST answers 201 {id, url_hint}; GET lists it without URL or headers; DELETE 204, then 404", () =>
        Effect.gen(function*() {
          const svc = yield* SvcTest
          const org = yield* SvcTest.org()
          const collector = yield* HttpsReceiver.make()
          const response = yield* post("/v1/telemetry-destinations", org.key, {
            url: collector.url("/v1/traces?token=abc123secret"),
            headers: { Authorization: "Bearer collector-token-xyz" }
          })
          assert.strictEqual(response.status, 201)
          assert.deepStrictEqual(Object.keys(response.json).sort(), ["compression", "id", "protocol", "url_hint"])
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
            "compression",
            "created_at",
            "dropped_spans",
            "id",
            "last_delivered_at",
            "last_error",
            "pending_spans",
            "protocol",
            "url_hint"
          ])
          assert.strictEqual(destination.id, id)
          assert.strictEqual(destination.url_hint, response.json.url_hint)
          assert.strictEqual(destination.dropped_spans, 0)
          const removed = yield* raw(`${svc.baseUrl}/v1/telemetry-destinations/${id}`, {
            method: "DELETE",
            headers: { authorization: `Bearer ${org.key}` }
          })
          assert.strictEqual(removed.status, 204)
          const again = yield* org.client.telemetry.remove({ params: { id } }).pipe(Effect.flip)
          assert.strictEqual(again._tag, "NotFound")
          assert.deepStrictEqual((yield* org.client.telemetry.list()).destinations, [])
          assert.isFalse(
            svc.logLines().some((line) => line.includes("collector-token-xyz") || line.includes("abc123secret"))
          )
        }).pipe(Effect.scoped))

      it.effect("a second destination: 409 DESTINATION_EXISTS; after DELETE another can be configured", () =>
        Effect.gen(function*() {
          const org = yield* SvcTest.org()
          const collector = yield* HttpsReceiver.make()
          const first = yield* create(org, collector.url("/a"))
          const response = yield* post("/v1/telemetry-destinations", org.key, { url: collector.url("/b") })
          assert.strictEqual(response.status, 409)
          assert.strictEqual(response.json.code, "DESTINATION_EXISTS")
          const typed = yield* create(org, collector.url("/b")).pipe(Effect.flip)
          assert.strictEqual(typed._tag, "DestinationExists")
          yield* org.client.telemetry.remove({ params: { id: first.id } })
          const second = yield* create(org, collector.url("/b"))
          assert.notStrictEqual(second.id, first.id)
          // Concurrent creates: exactly one wins.
          yield* org.client.telemetry.remove({ params: { id: second.id } })
          const results = yield* Effect.forEach([1, 2, 3, 4], () => Effect.result(create(org, collector.url("/c"))), {
            concurrency: "unbounded"
          })
          assert.strictEqual(results.filter((r) => r._tag === "Success").length, 1)
        }).pipe(Effect.scoped))

      it.effect("a destination deleted between a request's reads (its row read, its URL gone): left out of the list, its test span and deliveries 404, never a 500", () =>
        Effect.gen(function*() {
          const svc = yield* SvcTest
          const org = yield* SvcTest.org()
          const collector = yield* HttpsReceiver.make()
          const { id } = yield* create(org, collector.url("/v1/traces"))
          // What a concurrent DELETE has done when the request reads the URL: the row is still there to read.
          yield* svc.sql`DELETE FROM org_secrets WHERE owner_kind = 'telemetry_destination_url' AND owner_id = ${id}`
          assert.deepStrictEqual((yield* org.client.telemetry.list()).destinations, [])
          assert.strictEqual((yield* Effect.flip(org.client.telemetry.test({ params: { id } })))._tag, "NotFound")
          assert.strictEqual(
            (yield* Effect.flip(org.client.telemetry.deliveries({ params: { id }, query: {} })))._tag,
            "NotFound"
          )
        }).pipe(Effect.scoped))

      it.effect("scopes: org_config.read lists and reads deliveries; creating, testing, deleting and replaying need org_config.write", () =>
        Effect.gen(function*() {
          const org = yield* SvcTest.org()
          const collector = yield* HttpsReceiver.make()
          const { id } = yield* create(org, collector.url("/v1/traces"))
          const reader = yield* org.newKey(["org_config.read"])
          assert.strictEqual((yield* reader.client.telemetry.list()).destinations.length, 1)
          yield* reader.client.telemetry.deliveries({ params: { id }, query: {} })
          for (
            const attempt of [
              reader.client.telemetry.create({ payload: { url: collector.url("/x") } }),
              reader.client.telemetry.test({ params: { id } }),
              reader.client.telemetry.remove({ params: { id } }),
              reader.client.telemetry.replay({ params: { id, delivery: id } })
            ]
          ) {
            const error = yield* Effect.flip(
              attempt as Effect.Effect<unknown, { _tag: string; required_scope?: string }>
            )
            assert.strictEqual(error._tag, "InsufficientScope")
            assert.strictEqual(error.required_scope, "org_config.write")
          }
          const writerOnly = yield* org.newKey(["tasks.read"])
          const denied = yield* Effect.flip(writerOnly.client.telemetry.list())
          assert.strictEqual(denied._tag, "InsufficientScope")
        }).pipe(Effect.scoped))

      it.effect("another organization's destination or delivery: 404", () =>
        Effect.gen(function*() {
          const owner = yield* SvcTest.org()
          const stranger = yield* SvcTest.org()
          const collector = yield* HttpsReceiver.make()
          const { id } = yield* create(owner, collector.url("/v1/traces"))
          yield* owner.client.tasks.list({ query: {} })
          const { deliveries } = yield* waitForDeliveries(owner, id, (list) => list.length > 0)
          const delivery = deliveries[0]!.id
          for (
            const attempt of [
              stranger.client.telemetry.test({ params: { id } }),
              stranger.client.telemetry.remove({ params: { id } }),
              stranger.client.telemetry.deliveries({ params: { id }, query: {} }),
              stranger.client.telemetry.replay({ params: { id, delivery } })
            ]
          ) {
            const error = yield* Effect.flip(attempt as Effect.Effect<unknown, { _tag: string }>)
            assert.strictEqual(error._tag, "NotFound")
          }
          // The stranger's own destination does not reach the owner's deliveries either.
          const other = yield* create(stranger, collector.url("/other"))
          const cross = yield* Effect.flip(stranger.client.telemetry.replay({ params: { id: other.id, delivery } }))
          assert.strictEqual(cross._tag, "NotFound")
          assert.deepStrictEqual((yield* stranger.client.telemetry.list()).destinations.map((d) => d.id), [other.id])
        }).pipe(Effect.scoped))
    })

    describe("the latest 50 delivery records", () => {
      it.effect("newest first, at most 50, queue statuses shown as pending, never payloads", () =>
        Effect.gen(function*() {
          const svc = yield* SvcTest
          const org = yield* SvcTest.org()
          const collector = yield* HttpsReceiver.make({ respond: () => Reply.hang() })
          const { id } = yield* create(org, collector.url("/v1/traces"))
          const statuses = ["queued", "sending", "retrying", "delivered", "failed", "partial"]
          for (let i = 0; i < 60; i++) {
            // Rows written directly (far in the future, so no worker claims them).
            yield* svc.sql`
            INSERT INTO deliveries (id, org_id, kind, target_id, status, payload, meta, next_attempt_at)
            VALUES (gen_random_uuid(), ${org.orgId}, 'telemetry', ${id}, ${statuses[i % 6]!}, 'sealed-payload',
                    ${JSON.stringify({ span_count: i })}::jsonb, now() + interval '1 day')
          `
          }
          const { deliveries } = yield* org.client.telemetry.deliveries({ params: { id }, query: {} })
          assert.strictEqual(deliveries.length, 50)
          assert.strictEqual(deliveries[0]!.span_count, 59)
          assert.deepStrictEqual(
            [...new Set(deliveries.map((d) => d.status))].sort(),
            ["delivered", "failed", "partial", "pending"]
          )
          assert.notInclude(JSON.stringify(deliveries), "sealed-payload")
        }).pipe(Effect.scoped))
    })

    describe("the URL is public HTTPS through the outbound guard", () => {
      it.effect("http, credentials in the URL, and non-public addresses: 400 INVALID_URL, never echoing credentials", () =>
        Effect.gen(function*() {
          const org = yield* SvcTest.org()
          const collector = yield* HttpsReceiver.make()
          const cases = [
            `http://127.0.0.1:${collector.port}/v1/traces`,
            `https://alice:hunter2pass@127.0.0.1:${collector.port}/v1/traces`,
            `https://tokenonly99@127.0.0.1:${collector.port}/v1/traces`,
            "https://10.0.0.1/v1/traces",
            "https://169.254.169.254/latest",
            "https://localhost/v1/traces",
            "not a url"
          ]
          for (const url of cases) {
            const response = yield* post("/v1/telemetry-destinations", org.key, { url })
            assert.strictEqual(response.status, 400, url)
            assert.strictEqual(response.json.code, "INVALID_URL", url)
            assert.strictEqual(response.json.field, "url")
            assert.notInclude(response.text, "hunter2pass")
            assert.notInclude(response.text, "tokenonly99")
          }
          assert.deepStrictEqual((yield* org.client.telemetry.list()).destinations, [])
        }).pipe(Effect.scoped))
    })

    describe("collector headers", () => {
      it.effect("each refused class and invalid values: 400 INVALID_HEADERS naming the header; invalid names: 400 INVALID_REQUEST naming it; never the value", () =>
        Effect.gen(function*() {
          const org = yield* SvcTest.org()
          const collector = yield* HttpsReceiver.make()
          const url = collector.url("/v1/traces")
          const cases: Array<Record<string, string>> = [
            ...refusedNameCorpus.map(([, names]) => ({ [names[0]!]: "value-never-echoed" })),
            ...invalidNameCorpus.filter((name) => name !== "").map((name) => ({ [name]: "value-never-echoed" })),
            ...invalidValueCorpus.map(([, value]) => ({ "X-Token": `value-never-echoed${value}` })),
            { "X-Token": "value-never-echoed-1", "x-token": "value-never-echoed-2" },
            Object.fromEntries(Array.from({ length: 11 }, (_, i) => [`X-H${i}`, "value-never-echoed"]))
          ]
          for (const headers of cases) {
            const response = yield* post("/v1/telemetry-destinations", org.key, { url, headers })
            assert.strictEqual(response.status, 400, JSON.stringify(Object.keys(headers)))
            // A NUL is refused for every string of every body, and a name that is not an HTTP field name by the
            // schema (`propertyNames` in the document), before the header rules: 400 INVALID_REQUEST, also naming the header.
            const bySchema = Object.entries(headers).some(([name, value]) =>
              invalidNameCorpus.includes(name) || value.includes("\u0000")
            )
            assert.strictEqual(response.json.code, bySchema ? "INVALID_REQUEST" : "INVALID_HEADERS")
            assert.isString(response.json.field)
            assert.isTrue(
              response.json.field === "headers" ||
                Object.keys(headers).some((name) =>
                  response.json.field === headerField(name) || response.json.field === toJsonPath(["headers", name])
                ),
              response.json.field
            )
            assert.notInclude(response.text, "value-never-echoed")
          }
          assert.deepStrictEqual((yield* org.client.telemetry.list()).destinations, [])
          // At most 10 is fine.
          const ten = Object.fromEntries(Array.from({ length: 10 }, (_, i) => [`X-H${i}`, "v"]))
          yield* create(org, url, ten)
        }).pipe(Effect.scoped))

      it.effect("every refused header is in one answer, each with its reason (names and values are the document's rules)", () =>
        Effect.gen(function*() {
          const org = yield* SvcTest.org()
          const collector = yield* HttpsReceiver.make()
          const url = collector.url("/v1/traces")
          const refused = yield* post("/v1/telemetry-destinations", org.key, {
            url,
            headers: {
              Host: "value-never-echoed",
              "X-Ok": "fine",
              "X-Token": "value-never-echoed\r\n",
              Traceparent: "value-never-echoed",
              "X-Other": "value-never-echoed\u0007"
            }
          })
          assert.strictEqual(refused.status, 400)
          assert.strictEqual(refused.json.code, "INVALID_HEADERS")
          assert.strictEqual(refused.json.field, "headers.Host")
          assert.match(
            refused.json.detail,
            /^headers\.Host: Expected a header svc may send: not a transport, hop-by-hop, trace-context or cookie header/
          )
          assert.sameMembers(refused.json.errors.map((e: { field: string }) => e.field), [
            "headers.Host",
            "headers.Traceparent",
            "headers.X-Token",
            "headers.X-Other"
          ])
          assert.notInclude(refused.text, "value-never-echoed")
          // Two names differing only in case: the one rule JSON Schema cannot state, checked by the service.
          const twice = yield* post("/v1/telemetry-destinations", org.key, {
            url,
            headers: { "X-Key": "a", "x-key": "b" }
          })
          assert.strictEqual(twice.json.code, "INVALID_HEADERS")
          assert.strictEqual(twice.json.field, "headers.x-key")
        }).pipe(Effect.scoped))

      it.effect("values are encrypted at rest, never returned or logged, sent to the collector, and join the protected values", () =>
        Effect.gen(function*() {
          const svc = yield* SvcTest
          const org = yield* SvcTest.org()
          const collector = yield* HttpsReceiver.make()
          const { id } = yield* create(org, collector.url("/v1/traces"), { "X-Api-Key": "very-secret-value-42" })
          const rows = yield* svc.sql<{ sealed: string; owner_kind: string }>`
          SELECT sealed, owner_kind FROM org_secrets WHERE org_id = ${org.orgId} AND owner_kind = 'telemetry_destination'
        `
          assert.strictEqual(rows.length, 1)
          assert.strictEqual(rows[0]!.owner_kind, "telemetry_destination")
          assert.notInclude(rows[0]!.sealed, "very-secret-value-42")
          const values = yield* SecretStore.use((store) => store.orgValues(org.orgId))
          assert.include(values.map(Redacted.value), "very-secret-value-42")
          yield* org.client.telemetry.test({ params: { id } })
          yield* org.client.tasks.list({ query: {} })
          yield* waitForDeliveries(org, id, (list) => list.some((d) => d.status === "delivered"))
          assert.isTrue(collector.requests().every((r) => r.headers["x-api-key"] === "very-secret-value-42"))
          const everything = JSON.stringify([
            yield* org.client.telemetry.list(),
            yield* org.client.telemetry.deliveries({ params: { id }, query: {} }),
            yield* svc.sql`SELECT * FROM deliveries WHERE org_id = ${org.orgId}`,
            yield* svc
              .sql`SELECT * FROM delivery_attempts a JOIN deliveries d ON d.id = a.delivery_id WHERE d.org_id = ${org.orgId}`,
            collector.requests().map((r) => decodeOtlp(r).json)
          ], (_key, value) => (typeof value === "bigint" ? value.toString() : value))
          assert.notInclude(everything, "very-secret-value-42")
          assert.isFalse(svc.logLines().some((line) => line.includes("very-secret-value-42")))
        }).pipe(Effect.scoped))
    })

    describe("protocol and compression", () => {
      it.effect("default http/json and none; http/protobuf and gzip are stored and shown; a bad value is 400 naming its field", () =>
        Effect.gen(function*() {
          const svc = yield* SvcTest
          const collector = yield* HttpsReceiver.make()
          const plain = yield* SvcTest.org()
          const created = yield* create(plain, collector.url("/v1/traces"))
          assert.deepInclude(created, { protocol: "http/json", compression: "none" })
          assert.deepInclude((yield* plain.client.telemetry.list()).destinations[0]!, {
            protocol: "http/json",
            compression: "none"
          })
          const org = yield* SvcTest.org()
          const response = yield* post("/v1/telemetry-destinations", org.key, {
            url: collector.url("/v1/traces"),
            protocol: "http/protobuf",
            compression: "gzip"
          })
          assert.strictEqual(response.status, 201)
          assert.deepInclude(response.json, { protocol: "http/protobuf", compression: "gzip" })
          const listed = yield* raw(`${svc.baseUrl}/v1/telemetry-destinations`, {
            headers: { authorization: `Bearer ${org.key}` }
          })
          assert.deepInclude(listed.json.destinations[0], { protocol: "http/protobuf", compression: "gzip" })
          const other = yield* SvcTest.org()
          for (
            const [field, value] of [["protocol", "grpc"], ["protocol", "http/proto"], ["compression", "zstd"], [
              "compression",
              true
            ]] as const
          ) {
            const bad = yield* post("/v1/telemetry-destinations", other.key, {
              url: collector.url("/v1/traces"),
              [field]: value
            })
            assert.strictEqual(bad.status, 400, `${field}: ${String(value)}`)
            assert.strictEqual(bad.json.field, field)
          }
          assert.deepStrictEqual((yield* other.client.telemetry.list()).destinations, [])
        }).pipe(Effect.scoped))

      it.effect("the test span goes in the destination's protocol and compression; a protobuf partial success fails it", () =>
        Effect.gen(function*() {
          const org = yield* SvcTest.org()
          const collector = yield* HttpsReceiver.make()
          const { id } = yield* org.client.telemetry.create({
            payload: { url: collector.url("/v1/traces"), protocol: "http/protobuf", compression: "gzip" }
          })
          assert.deepStrictEqual(yield* org.client.telemetry.test({ params: { id } }), { delivered: true })
          const request = collector.requests().find((r) =>
            decodeOtlp(r).spans.some((s) => s.name === "svc.telemetry.test")
          )!
          assert.strictEqual(request.headers["content-type"], "application/x-protobuf")
          assert.strictEqual(request.headers["content-encoding"], "gzip")
          const decoded = decodeOtlp(request)
          assert.deepStrictEqual(decoded.problems, [])
          assert.strictEqual(decoded.spans[0]!.attributes["svc.org_id"], org.orgId)
          assert.deepInclude(decoded.json.resourceSpans[0].scopeSpans[0].scope, { name: "svc", version: VERSION })
          collector.enqueue(Reply.status(200, {
            headers: { "content-type": "application/x-protobuf" },
            body: ExportTraceServiceResponse.encode(
              ExportTraceServiceResponse.fromObject({ partialSuccess: { rejectedSpans: 1 } })
            ).finish()
          }))
          const rejected = yield* Effect.flip(org.client.telemetry.test({ params: { id } }))
          assert.strictEqual(rejected._tag, "ExportFailed")
        }).pipe(Effect.scoped))
    })

    describe("test exports one test span at once", () => {
      it.effect("200 {delivered: true} when the collector accepts; the span decodes with the official definitions", () =>
        Effect.gen(function*() {
          const org = yield* SvcTest.org()
          const collector = yield* HttpsReceiver.make()
          const { id } = yield* create(org, collector.url("/v1/traces"), { Authorization: "Bearer t0k3n" })
          const result = yield* org.client.telemetry.test({ params: { id } })
          assert.deepStrictEqual(result, { delivered: true })
          const request = collector.requests().find((r) =>
            decodeOtlp(r).spans.some((s) => s.name === "svc.telemetry.test")
          )
          assert.isDefined(request, "the test span arrived before the answer")
          assert.strictEqual(request!.method, "POST")
          assert.strictEqual(request!.path, "/v1/traces")
          assert.strictEqual(request!.headers["content-type"], "application/json")
          assert.strictEqual(request!.headers.authorization, "Bearer t0k3n")
          assert.strictEqual(request!.headers["user-agent"], `svc/${VERSION}`)
          // The default: OTLP/HTTP JSON, not compressed.
          assert.isUndefined(request!.headers["content-encoding"])
          const decoded = decodeOtlp(request!)
          assert.deepStrictEqual(decoded.problems, [])
          assert.strictEqual(decoded.resource["service.name"], "svc")
          assert.deepStrictEqual(decoded.json.resourceSpans[0].scopeSpans[0].scope, { name: "svc", version: VERSION })
          assert.strictEqual(decoded.spans.length, 1)
          assert.strictEqual(decoded.spans[0]!.attributes["svc.org_id"], org.orgId)
          const [destination] = (yield* org.client.telemetry.list()).destinations
          assert.isNotNull(destination!.last_delivered_at)
          assert.isNull(destination!.last_error)
        }).pipe(Effect.scoped))

      it.effect("else 502 EXPORT_FAILED naming the collector's status, not its body", () =>
        Effect.gen(function*() {
          const svc = yield* SvcTest
          const org = yield* SvcTest.org()
          // The organizations' own request spans reach this collector too, in
          // batches, at any time: every request gets the answer of the moment,
          // so a batch neither takes the test's answer nor leaves another
          // last_error behind.
          let answer = Reply.ok()
          const collector = yield* HttpsReceiver.make({ respond: () => answer })
          const { id } = yield* create(org, collector.url("/v1/traces"))
          for (const status of [401, 500, 503]) {
            answer = Reply.status(status, { body: "collector-body-text-never-echoed" })
            const response = yield* post(`/v1/telemetry-destinations/${id}/test`, org.key, undefined)
            assert.strictEqual(response.status, 502)
            assert.strictEqual(response.json.code, "EXPORT_FAILED")
            assert.strictEqual(response.json.collector_status, status)
            assert.include(response.json.detail, String(status))
            assert.notInclude(response.text, "collector-body-text-never-echoed")
          }
          answer = Reply.json({ partialSuccess: { rejectedSpans: "1", errorMessage: "no" } })
          const rejected = yield* Effect.flip(org.client.telemetry.test({ params: { id } }))
          assert.strictEqual(rejected._tag, "ExportFailed")
          const [destination] = (yield* org.client.telemetry.list()).destinations
          assert.isString(destination!.last_error)
          // A collector echoing a header value in its partialSuccess message:
          // the destination's last_error masks it, as the export worker does.
          const echoing = yield* SvcTest.org()
          const echoed = yield* create(echoing, collector.url("/v1/traces"), { "X-Api-Key": "echoed-header-value-77" })
          answer = Reply.json({
            partialSuccess: { rejectedSpans: "1", errorMessage: "bad key echoed-header-value-77" }
          })
          const echoFailure = yield* post(`/v1/telemetry-destinations/${echoed.id}/test`, echoing.key, undefined)
          assert.strictEqual(echoFailure.status, 502)
          assert.notInclude(echoFailure.text, "echoed-header-value-77")
          const [echoedDestination] = (yield* echoing.client.telemetry.list()).destinations
          assert.include(echoedDestination!.last_error ?? "", "rejected 1")
          assert.notInclude(echoedDestination!.last_error ?? "", "echoed-header-value-77")
          // Unreachable collector: still 502, with no status to name.
          const other = yield* SvcTest.org()
          const unreachable = yield* create(other, "https://127.0.0.1:1/v1/traces")
          const down = yield* post(`/v1/telemetry-destinations/${unreachable.id}/test`, other.key, undefined)
          assert.strictEqual(down.status, 502)
          assert.strictEqual(down.json.code, "EXPORT_FAILED")
          assert.isUndefined(down.json.collector_status)
          assert.isFalse(svc.logLines().some((line) => line.includes("collector-body-text-never-echoed")))
        }).pipe(Effect.scoped))
    })

    describe("searching delivery records", () => {
      it.effect("records filter by status (pending: queued, sending or retrying) and creation time, page by cursor, refuse bad values", () =>
        Effect.gen(function*() {
          const svc = yield* SvcTest
          const org = yield* SvcTest.org()
          const collector = yield* HttpsReceiver.make()
          const { id } = yield* create(org, collector.url("/v1/traces"))
          // Six batches' records as the queue keeps them, one hour apart.
          const statuses = ["delivered", "failed", "partial", "queued", "retrying", "delivered"]
          for (const [i, status] of statuses.entries()) {
            yield* svc.sql`
            INSERT INTO deliveries (id, org_id, kind, target_id, status, meta, created_at, finished_at, next_attempt_at)
            VALUES (gen_random_uuid(), ${org.orgId}, 'telemetry', ${id}, ${status}, '{"span_count": 3}'::jsonb,
                    ${new Date(Date.UTC(2026, 10, 20, i))}, ${
              ["queued", "retrying"].includes(status) ? null : new Date(Date.UTC(2026, 10, 20, i, 5))
            },
                    now() + interval '1 day')`
          }
          const statusesOf = (query: Parameters<typeof org.client.telemetry.deliveries>[0]["query"]) =>
            Effect.map(
              org.client.telemetry.deliveries({ params: { id }, query }),
              (page) => page.deliveries.map((d) => d.status)
            )
          assert.deepStrictEqual(yield* statusesOf({}), [
            "delivered",
            "pending",
            "pending",
            "partial",
            "failed",
            "delivered"
          ])
          assert.deepStrictEqual(yield* statusesOf({ status: "pending" }), ["pending", "pending"])
          assert.deepStrictEqual(yield* statusesOf({ status: "delivered", created_from: "2026-11-20T01:00:00Z" }), [
            "delivered"
          ])
          assert.deepStrictEqual(
            yield* statusesOf({ created_from: "2026-11-20T01:00:00Z", created_until: "2026-11-20T03:00:00Z" }),
            ["partial", "failed"]
          )
          assert.deepStrictEqual(yield* statusesOf({ finished_until: "2026-11-20T01:00:00Z" }), ["delivered"])
          // The organization's own requests are exported to the collector meanwhile: their batches' records
          // are newer than the seeded ones, which the window keeps the pages to.
          const seeded = { created_until: "2026-11-21T00:00:00Z" }
          const first = yield* org.client.telemetry.deliveries({ params: { id }, query: { ...seeded, limit: 4 } })
          const rest = yield* org.client.telemetry.deliveries({
            params: { id },
            query: { ...seeded, limit: 4, cursor: first.next_cursor! }
          })
          assert.strictEqual(rest.next_cursor, null)
          assert.deepStrictEqual(
            [...first.deliveries, ...rest.deliveries].map((d) => d.status),
            yield* statusesOf(seeded)
          )
          assert.strictEqual(first.deliveries.length + rest.deliveries.length, statuses.length)
          for (
            const [name, value] of [["status", "queued"], ["created_from", "today"], ["limit", "101"], ["cursor", "x"]]
          ) {
            const refused = yield* raw(`${svc.baseUrl}/v1/telemetry-destinations/${id}/deliveries?${name}=${value}`, {
              headers: { authorization: `Bearer ${org.key}` }
            })
            assert.strictEqual(refused.status, 400, `${name}=${value}`)
            assert.strictEqual(refused.json.field, name)
          }
        }).pipe(Effect.scoped))
    })
  }
)
