/**
 * The capturing tracer hands spans to the operator's
 * pipeline apart from, and unaffected by, the organizations' filtering and
 * sampling; organization export behaves exactly as before.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Tracer } from "effect"
import type { OperatorSink } from "../../../src/observability/OperatorSink.ts"
import { makeSampler } from "../../../src/observability/OperatorTraces.ts"
import type { SamplerName } from "../../../src/observability/OtelEnv.ts"
import { SpanBuffers } from "../../../src/telemetry/Buffers.ts"
import { makeTracer } from "../../../src/telemetry/Capture.ts"
import { takeSpans } from "../../support/spanBatches.ts"

const ORG = "01900000-0000-7000-8000-000000000001"
const OTHER = "01900000-0000-7000-8000-000000000002"

const setup = (
  options: {
    readonly ratio?: number
    readonly sampler?: SamplerName
    readonly samplerRatio?: number
    readonly operator?: boolean
  } = {}
) => {
  const buffers = SpanBuffers.make(100)
  buffers.activate(ORG, "dest-1")
  const offered: Array<Tracer.Span> = []
  const sink: OperatorSink = {
    ...makeSampler({ name: options.sampler ?? "parentbased_always_on", ratio: options.samplerRatio ?? 1 }),
    offer: (span) => offered.push(span)
  }
  const tracer = makeTracer(
    buffers,
    options.ratio ?? 1,
    Tracer.nativeTracer,
    options.operator === false ? undefined : sink
  )
  const orgSpans = () => takeSpans(buffers, "dest-1")
  return { tracer, offered, orgSpans }
}

const work = Effect.gen(function*() {
  yield* Effect.void.pipe(
    Effect.withSpan("sql.execute", { kind: "client", attributes: { "db.system.name": "postgresql" } })
  )
  yield* Effect.void.pipe(Effect.withSpan("inner"))
})

describe("a caller's sampled traceparent cannot fill the operator's queue", () => {
  const sampledRemote = (n: number) =>
    Tracer.externalSpan({
      traceId: `${"0".repeat(16)}${n.toString(16).padStart(16, "0")}`,
      spanId: "00f067aa0ba902b7",
      sampled: true
    })

  it("parentbased_traceidratio at 0: sampled callers add at most the rate per second, a burst included; the bucket refills with time; 0 ignores them", () => {
    let clock = 0
    const sampler = makeSampler({ name: "parentbased_traceidratio", ratio: 0 }, 5, () => clock)
    const kept = (count: number) =>
      Array.from({ length: count }, (_, i) => sampler.sampleRemote(true, sampledRemote(i).traceId)).filter(Boolean)
        .length
    // A flood of 1 000 sampled requests in one instant: one second's worth is followed.
    assert.strictEqual(kept(1000), 5)
    clock += 400
    assert.strictEqual(kept(1000), 2)
    clock += 10_000
    // Never more than one second's worth, however long the quiet.
    assert.strictEqual(kept(1000), 5)
    // An unsampled caller is always followed.
    assert.isFalse(sampler.sampleRemote(false, sampledRemote(1).traceId))
    const none = makeSampler({ name: "parentbased_always_off", ratio: 1 }, 0, () => clock)
    assert.isFalse(none.sampleRemote(true, sampledRemote(1).traceId))
  })

  it("what the sampler keeps itself costs no token: parentbased_always_on keeps every sampled caller", () => {
    const sampler = makeSampler({ name: "parentbased_always_on", ratio: 1 }, 1, () => 0)
    for (let i = 0; i < 100; i++) assert.isTrue(sampler.sampleRemote(true, sampledRemote(i).traceId))
  })

  it.effect("through the tracer: 100 requests under a sampled traceparent with parentbased_always_off reach the queue as the rate allows", () =>
    Effect.gen(function*() {
      const offered: Array<Tracer.Span> = []
      const sink: OperatorSink = {
        ...makeSampler({ name: "parentbased_always_off", ratio: 1 }, 3, () => 0),
        offer: (span) => offered.push(span)
      }
      const tracer = makeTracer(SpanBuffers.make(100), 1, Tracer.nativeTracer, sink)
      for (let i = 0; i < 100; i++) {
        yield* work.pipe(
          Effect.withSpan("request", { kind: "server" }),
          Effect.withParentSpan(sampledRemote(i)),
          Effect.withTracer(tracer)
        )
      }
      // Three traces of three spans each.
      assert.strictEqual(offered.filter((span) => span.name === "request").length, 3)
      assert.strictEqual(offered.length, 9)
    }))
})

describe("the operator's pipeline", () => {
  it.effect("gets every span, of every organization, of none, and of the database client; an organization's buffer still gets only its own", () =>
    Effect.gen(function*() {
      const { tracer, offered, orgSpans } = setup()
      yield* work.pipe(Effect.withSpan("request", { attributes: { "svc.org_id": ORG } }), Effect.withTracer(tracer))
      yield* work.pipe(Effect.withSpan("other org", { attributes: { "svc.org_id": OTHER } }), Effect.withTracer(tracer))
      yield* Effect.void.pipe(Effect.withSpan("background"), Effect.withTracer(tracer))
      assert.deepStrictEqual(
        offered.map((s) => s.name).sort(),
        ["background", "inner", "inner", "other org", "request", "sql.execute", "sql.execute"]
      )
      assert.deepStrictEqual(orgSpans().map((s) => s.name).sort(), ["inner", "request"])
    }))

  it.effect("keeps what its own sampler keeps when organizations sample nothing, with the spans' attributes; organizations still get nothing", () =>
    Effect.gen(function*() {
      const { tracer, offered, orgSpans } = setup({ ratio: 0, sampler: "always_on" })
      yield* Effect.gen(function*() {
        yield* Effect.annotateCurrentSpan("http.route", "/v1/tasks")
        yield* work
      }).pipe(Effect.withSpan("request", { attributes: { "svc.org_id": ORG } }), Effect.withTracer(tracer))
      assert.strictEqual(offered.length, 3)
      const request = offered.find((s) => s.name === "request")!
      assert.isTrue(request.sampled)
      assert.strictEqual(request.attributes.get("http.route"), "/v1/tasks")
      assert.deepStrictEqual(orgSpans(), [])
    }))

  it.effect("parent-based samplers follow a caller's unsampled traceparent; always_on does not; a ratio of 0 keeps nothing", () =>
    Effect.gen(function*() {
      const remote = Tracer.externalSpan({
        traceId: "4bf92f3577b34da6a3ce929d0e0e4736",
        spanId: "00f067aa0ba902b7",
        sampled: false
      })
      const underRemote = (sampler: SamplerName) =>
        Effect.gen(function*() {
          const { tracer, offered } = setup({ sampler })
          yield* work.pipe(
            Effect.withSpan("request", { kind: "server" }),
            Effect.withParentSpan(remote),
            Effect.withTracer(tracer)
          )
          return offered.length
        })
      assert.strictEqual(yield* underRemote("parentbased_always_on"), 0)
      assert.strictEqual(yield* underRemote("parentbased_traceidratio"), 0)
      assert.strictEqual(yield* underRemote("always_on"), 3)
      const { tracer, offered } = setup({ sampler: "traceidratio", samplerRatio: 0 })
      yield* work.pipe(Effect.withSpan("request"), Effect.withTracer(tracer))
      assert.strictEqual(offered.length, 0)
    }))

  it.effect("under a sampled caller the trace keeps the caller's trace id for both pipelines", () =>
    Effect.gen(function*() {
      const { tracer, offered, orgSpans } = setup({ sampler: "parentbased_always_off" })
      const remote = Tracer.externalSpan({
        traceId: "4bf92f3577b34da6a3ce929d0e0e4736",
        spanId: "00f067aa0ba902b7",
        sampled: true
      })
      yield* Effect.void.pipe(
        Effect.withSpan("request", { attributes: { "svc.org_id": ORG } }),
        Effect.withParentSpan(remote),
        Effect.withTracer(tracer)
      )
      assert.strictEqual(offered.length, 1)
      assert.strictEqual(offered[0]!.traceId, "4bf92f3577b34da6a3ce929d0e0e4736")
      assert.strictEqual(orgSpans().length, 1)
      // parentbased_always_off keeps nothing of a new trace.
      yield* Effect.void.pipe(Effect.withSpan("root"), Effect.withTracer(tracer))
      assert.strictEqual(offered.length, 1)
    }))

  it.effect("off: spans are sampled exactly by the organizations' ratio, as before", () =>
    Effect.gen(function*() {
      const { tracer, orgSpans } = setup({ ratio: 0, operator: false })
      const sampled = yield* Effect.map(Effect.currentSpan, (span) => span.sampled).pipe(
        Effect.withSpan("request", { attributes: { "svc.org_id": ORG } }),
        Effect.withTracer(tracer)
      )
      assert.isFalse(sampled)
      assert.deepStrictEqual(orgSpans(), [])
    }))
})
