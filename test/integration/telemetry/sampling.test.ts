import { assert, describe, layer } from "@effect/vitest"
import { Duration, Effect, Layer } from "effect"
import { SvcTest } from "../../../src/testing.ts"
import { raw } from "../../support/http.ts"
import { HttpsReceiver } from "../../support/HttpsReceiver.ts"
import { decodeOtlp } from "../../support/Otlp.ts"
import { loopbackTargets, TestTls } from "../../support/tls.ts"

/** SVC_TELEMETRY_SAMPLE_RATIO=0: no new trace is kept; a caller's sampled traceparent still is (parent-based). */
const Svc = Layer.unwrap(
  Effect.map(TestTls.shared, (tls) =>
    SvcTest.layer({
      config: { ...loopbackTargets(tls), telemetrySampleRatio: 0, telemetryFlushInterval: Duration.millis(200) }
    }))
)

layer(Svc, { excludeTestServices: true })("telemetry sampling", (it) => {
  describe("parent-based trace-id-ratio sampling", () => {
    it.effect("with ratio 0 only traces whose caller sampled them are exported", () =>
      Effect.gen(function*() {
        const svc = yield* SvcTest
        const org = yield* SvcTest.org()
        const collector = yield* HttpsReceiver.make()
        // Created without a traceparent (the typed client would send a sampled one).
        const created = yield* raw(`${svc.baseUrl}/v1/telemetry-destinations`, {
          method: "POST",
          headers: { authorization: `Bearer ${org.key}`, "content-type": "application/json" },
          body: JSON.stringify({ url: collector.url("/v1/traces") })
        })
        assert.strictEqual(created.status, 201)
        const get = (path: string, traceparent?: string) =>
          raw(`${svc.baseUrl}${path}`, {
            headers: { authorization: `Bearer ${org.key}`, ...(traceparent === undefined ? {} : { traceparent }) }
          })
        for (let i = 0; i < 10; i++) yield* get("/v1/tasks")
        // Unsampled by the caller: not exported either.
        yield* get("/v1/tasks?limit=2", "00-11111111111111111111111111111111-2222222222222222-00")
        // The marker: sampled by its caller. Buffers are first in, first out,
        // so once it has arrived, any span of the earlier requests would have too.
        const marker = "4bf92f3577b34da6a3ce929d0e0e4736"
        yield* get("/v1/tasks?limit=3", `00-${marker}-00f067aa0ba902b7-01`)
        yield* collector.waitFor((r) => decodeOtlp(r).spans.some((s) => s.traceId === marker), "20 seconds")
        const spans = collector.requests().flatMap((r) => decodeOtlp(r).spans)
        assert.deepStrictEqual([...new Set(spans.map((s) => s.traceId))], [marker])
        const server = spans.find((s) => s.kind === 2)!
        assert.strictEqual(server.parentSpanId, "00f067aa0ba902b7")
      }).pipe(Effect.scoped))
  })
})
