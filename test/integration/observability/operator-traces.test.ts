/**
 * The service's own traces reach the operator's OTLP/HTTP
 * collector (a real HTTPS server on loopback, its bodies checked against
 * the official protobuf definitions), separate from the organizations'
 * destinations, which keep getting only their own spans.
 *
 * The `OTEL_*` variables are read from the environment when the service
 * starts, so this file sets them before building it (each test file runs in
 * its own process).
 */
import { assert, describe, layer } from "@effect/vitest"
import { Context, Effect, Layer, Option, Redacted } from "effect"
import { VERSION } from "../../../src/api/Version.ts"
import { SvcTest } from "../../../src/testing.ts"
import { eventually } from "../../support/http.ts"
import { HttpsReceiver, type ReceivedRequest } from "../../support/HttpsReceiver.ts"
import { type DecodedSpan, decodeOtlp } from "../../support/Otlp.ts"
import { scrape, value } from "../../support/prometheus.ts"
import { loopbackTargets, TestTls } from "../../support/tls.ts"

const TOKEN = "operator-metrics-token-0123456789"

/** The operator's collector, started before the service that reads its address from the environment. */
class OperatorCollector
  extends Context.Service<OperatorCollector, HttpsReceiver["Service"]>()("test/OperatorCollector")
{}

const Svc = Layer.unwrap(Effect.gen(function*() {
  const tls = yield* TestTls.shared
  const collector = yield* HttpsReceiver.make()
  Object.assign(process.env, {
    OTEL_EXPORTER_OTLP_ENDPOINT: collector.url("/otlp"),
    OTEL_EXPORTER_OTLP_HEADERS: "x-collector-token=operator%20secret,x-tenant=ops",
    OTEL_EXPORTER_OTLP_CERTIFICATE: tls.caFile,
    OTEL_EXPORTER_OTLP_PROTOCOL: "http/json",
    OTEL_SERVICE_NAME: "svc-operator-test",
    OTEL_RESOURCE_ATTRIBUTES: "deployment.environment=test,service.name=overridden",
    OTEL_TRACES_SAMPLER: "parentbased_always_on",
    OTEL_BSP_SCHEDULE_DELAY: "200"
  })
  return Layer.merge(
    SvcTest.layer({ config: { ...loopbackTargets(tls), metricsToken: Option.some(Redacted.make(TOKEN)) } }),
    Layer.succeed(OperatorCollector, collector)
  )
}))

const spansOf = (requests: ReadonlyArray<ReceivedRequest>): ReadonlyArray<DecodedSpan> =>
  requests.flatMap((request) => decodeOtlp(request).spans)

layer(Svc, { excludeTestServices: true })("the service's own traces", (it) => {
  describe("export to the operator's collector", () => {
    it.effect("every span of every organization and of the database client reaches it; an organization's destination still gets only its own", () =>
      Effect.gen(function*() {
        const svc = yield* SvcTest
        const operator = yield* OperatorCollector
        const a = yield* SvcTest.org({ name: "a" })
        const b = yield* SvcTest.org({ name: "b" })
        const destination = yield* HttpsReceiver.make()
        yield* a.client.telemetry.create({ payload: { url: destination.url("/v1/traces") } })
        const task = yield* a.client.tasks.create({ payload: { name: "t", answer_schema: { type: "object" } } })
        yield* a.client.tasks.logRun({ params: { task_id: task.id }, payload: { input: 1, answer: {} } })
        yield* b.client.tasks.list({ query: {} })

        const serverSpanOf = (orgId: string) => (request: ReceivedRequest) =>
          decodeOtlp(request).spans.some((s) => s.kind === 2 && s.attributes["svc.org_id"] === orgId)
        yield* operator.waitFor(serverSpanOf(a.orgId), "20 seconds")
        yield* operator.waitFor(serverSpanOf(b.orgId), "20 seconds")
        yield* destination.waitFor(
          (r) => decodeOtlp(r).spans.some((s) => s.attributes["url.path"] === `/v1/tasks/${task.id}/runs`),
          "20 seconds"
        )

        // What the operator's collector received: valid OTLP/HTTP JSON at the
        // signal path, with the configured headers and resource.
        const received = operator.requests()
        for (const request of received) {
          assert.strictEqual(request.method, "POST")
          assert.strictEqual(request.path, "/otlp/v1/traces")
          assert.strictEqual(request.headers["content-type"], "application/json")
          assert.strictEqual(request.headers["x-collector-token"], "operator secret")
          assert.strictEqual(request.headers["x-tenant"], "ops")
          assert.strictEqual(request.headers["user-agent"], `svc/${VERSION}`)
          const decoded = decodeOtlp(request)
          assert.deepStrictEqual(decoded.problems, [])
          assert.strictEqual(decoded.resource["service.name"], "svc-operator-test")
          assert.strictEqual(decoded.resource["deployment.environment"], "test")
          assert.match(String(decoded.resource["service.instance.id"]), /^[0-9a-f-]{36}$/)
        }
        const operatorSpans = spansOf(received)
        assert.isTrue(
          operatorSpans.some((s) =>
            s.attributes["db.system.name"] === "postgresql" && typeof s.attributes["db.query.text"] === "string"
          ),
          "database client spans"
        )
        const created = operatorSpans.find((s) =>
          s.kind === 2 && s.attributes["http.route"] === "/v1/tasks" && s.attributes["http.request.method"] === "POST"
        )
        assert.isDefined(created)
        assert.strictEqual(created!.attributes["svc.org_id"], a.orgId)
        // No credentials in what the operator gets either.
        const everything = received.map((r) => Buffer.from(r.body).toString("utf8")).join("\n")
        assert.notInclude(everything, a.key)
        assert.notInclude(everything, b.key)

        // The organization's destination: its own spans only, never the
        // database client's, never another organization's, never the
        // operator's resource or headers.
        const own = destination.requests()
        for (const request of own) {
          assert.strictEqual(decodeOtlp(request).resource["service.name"], "svc")
          assert.isUndefined(request.headers["x-collector-token"])
          assert.strictEqual(request.headers["user-agent"], `svc/${VERSION}`)
        }
        const ownSpans = spansOf(own)
        assert.isNotEmpty(ownSpans)
        for (const span of ownSpans) {
          assert.notStrictEqual(span.attributes["svc.org_id"], b.orgId)
          assert.isUndefined(span.attributes["db.system.name"])
        }
        const ofB = new Set(operatorSpans.filter((s) => s.attributes["svc.org_id"] === b.orgId).map((s) => s.traceId))
        assert.isNotEmpty(ofB)
        for (const span of ownSpans) assert.isFalse(ofB.has(span.traceId), "a span of another organization's trace")
        // The same work, seen by both: every span A's destination got, the operator got too.
        const operatorIds = new Set(operatorSpans.map((s) => s.spanId))
        yield* eventually(
          Effect.sync(() => {
            const all = new Set(spansOf(operator.requests()).map((s) => s.spanId))
            return ownSpans.every((s) => all.has(s.spanId)) ? true : undefined
          }),
          { timeoutMs: 10_000, what: "the operator to have every span of the organization's export" }
        )
        assert.isAbove(operatorIds.size, 0)

        // Counted as exported by each pipeline.
        const metrics = yield* scrape(`${svc.baseUrl}/metrics`, TOKEN)
        assert.isAbove(value(metrics, "svc_telemetry_spans_exported_total", { pipeline: "operator" })!, 0)
        assert.strictEqual(
          value(metrics, "svc_telemetry_spans_dropped_total", { pipeline: "operator", reason: "buffer_full" }),
          0
        )
        assert.isFalse(
          svc.logLines().some((line) => line.includes("operator secret") || line.includes("operator%20secret")),
          "collector headers are never logged"
        )
      }))
  })
})
