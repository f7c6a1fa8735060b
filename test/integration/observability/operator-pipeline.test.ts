/**
 * The operator's trace pipeline against a real OTLP/HTTP
 * collector on loopback: a bounded queue whose overflow is dropped and
 * counted without ever making the caller wait, retries of 503, a refused
 * batch counted as dropped, gzip when asked.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Logger, Tracer } from "effect"
import { TestClock } from "effect/testing"
import * as fs from "node:fs"
import { makeMetrics } from "../../../src/observability/Metrics.ts"
import { makeOperatorPipeline } from "../../../src/observability/OperatorTraces.ts"
import type { OperatorTraceSettings } from "../../../src/observability/OtelEnv.ts"
import { makeJsonLogger } from "../../../src/platform/Logging.ts"
import { SpanBuffers } from "../../../src/telemetry/Buffers.ts"
import { makeTracer } from "../../../src/telemetry/Capture.ts"
import { eventually } from "../../support/http.ts"
import { HttpsReceiver, Reply } from "../../support/HttpsReceiver.ts"
import { decodeOtlp } from "../../support/Otlp.ts"
import { fromText, value } from "../../support/prometheus.ts"
import { TestTls } from "../../support/tls.ts"

const settingsFor = (
  url: string,
  ca: string,
  overrides: Partial<OperatorTraceSettings> = {}
): OperatorTraceSettings => ({
  url,
  headers: [],
  timeoutMs: 2_000,
  gzip: false,
  ca,
  resource: [["service.name", "svc"]],
  sampler: { name: "always_on", ratio: 1 },
  callerSampledPerSecond: 10,
  scheduleDelayMs: 100,
  exportTimeoutMs: 10_000,
  maxQueueSize: 100,
  maxExportBatchSize: 50,
  ...overrides
})

/** A pipeline on a collector, and a tracer that feeds it. */
const setup = (reply: Array<Reply>, overrides: Partial<OperatorTraceSettings> = {}) =>
  Effect.gen(function*() {
    const tls = yield* TestTls.shared
    const collector = yield* HttpsReceiver.make()
    collector.enqueue(...reply)
    const metrics = makeMetrics({ processMetrics: false })
    const sink = yield* makeOperatorPipeline(
      settingsFor(collector.url("/v1/traces"), fs.readFileSync(tls.caFile, "utf8"), overrides),
      metrics
    )
    const tracer = makeTracer(SpanBuffers.make(10), 1, Tracer.nativeTracer, sink)
    const spans = (n: number) =>
      Effect.forEach(Array.from({ length: n }, (_, i) => i), (i) => Effect.void.pipe(Effect.withSpan(`span-${i}`)), {
        discard: true
      })
        .pipe(Effect.withTracer(tracer))
    const read = Effect.promise(() => metrics.registry.metrics()).pipe(Effect.map(fromText))
    return { collector, sink, spans, read }
  })

describe("the operator's trace pipeline", () => {
  it.live("a full queue drops the span and counts it; offering never waits", () =>
    Effect.scoped(Effect.gen(function*() {
      const { collector, spans, read } = yield* setup([], {
        maxQueueSize: 3,
        maxExportBatchSize: 3,
        scheduleDelayMs: 60_000
      })
      collector.respond(() => ({ hang: true }))
      const started = performance.now()
      yield* spans(10)
      assert.isBelow(performance.now() - started, 1_000)
      const metrics = yield* read
      assert.strictEqual(
        value(metrics, "svc_telemetry_spans_dropped_total", { pipeline: "operator", reason: "buffer_full" }),
        7
      )
    })))

  it.live("503 is retried; the spans count as exported once the collector takes them", () =>
    Effect.scoped(Effect.gen(function*() {
      const { collector, spans, read } = yield* setup([Reply.status(503), Reply.ok("{}")])
      yield* spans(5)
      const [, second] = yield* collector.waitForRequests(2, "15 seconds")
      assert.strictEqual(decodeOtlp(second!).spans.length, 5)
      const metrics = yield* eventually(
        Effect.map(
          read,
          (m) => value(m, "svc_telemetry_spans_exported_total", { pipeline: "operator" }) === 5 ? m : undefined
        ),
        { what: "5 exported" }
      )
      assert.strictEqual(
        value(metrics, "svc_telemetry_spans_dropped_total", { pipeline: "operator", reason: "export_failed" }),
        0
      )
      assert.strictEqual(value(metrics, "svc_telemetry_spans_pending", { pipeline: "operator" }), 0)
    })))

  it.live("a refused batch is dropped and counted, not retried", () =>
    Effect.scoped(Effect.gen(function*() {
      const { collector, spans, read } = yield* setup([Reply.status(400)])
      yield* spans(4)
      yield* collector.waitForRequests(1, "15 seconds")
      yield* eventually(
        Effect.map(read, (m) =>
          value(m, "svc_telemetry_spans_dropped_total", { pipeline: "operator", reason: "export_failed" }) === 4
            ? m
            : undefined),
        { what: "4 dropped" }
      )
      assert.strictEqual(collector.requests().length, 1)
    })))

  it.live("gzip when OTEL_EXPORTER_OTLP_COMPRESSION=gzip", () =>
    Effect.scoped(Effect.gen(function*() {
      const { collector, spans } = yield* setup([], { gzip: true })
      yield* spans(3)
      const [request] = yield* collector.waitForRequests(1, "15 seconds")
      assert.strictEqual(request!.headers["content-encoding"], "gzip")
      const decoded = decodeOtlp(request!)
      assert.deepStrictEqual(decoded.problems, [])
      assert.strictEqual(decoded.spans.length, 3)
    })))

  it.effect("a failing collector is warned about at most once a minute, by the Clock", () => {
    const lines: Array<string> = []
    const warnings = () => lines.filter((line) => line.includes("operator trace export failed")).length
    /** Waits in real time (the test's clock stands still) until `done`. */
    const until = (done: () => boolean, what: string) =>
      Effect.promise(async () => {
        for (let i = 0; i < 500 && !done(); i++) await new Promise((resolve) => setTimeout(resolve, 10))
        assert.isTrue(done(), what)
      })
    return Effect.scoped(Effect.gen(function*() {
      // A batch of one span starts a round at once: no period to wait for.
      const { collector, spans } = yield* setup([], { maxExportBatchSize: 1 })
      collector.respond(() => Reply.status(400))
      yield* spans(1)
      yield* until(() => warnings() === 1, "the first failure is warned about")
      yield* spans(1)
      yield* until(() => collector.requests().length === 2, "a second refused batch")
      yield* Effect.promise(() => new Promise((resolve) => setTimeout(resolve, 100)))
      assert.strictEqual(warnings(), 1, "not again within the minute")
      yield* TestClock.adjust("61 seconds")
      yield* spans(1)
      yield* until(() => warnings() === 2, "a minute later, again")
    })).pipe(Effect.provide(Logger.layer([makeJsonLogger((line) => lines.push(line))])))
  })
})
