import { assert, describe, it } from "@effect/vitest"
import { Effect, Tracer } from "effect"
import fc from "fast-check"
import type { OtlpSpan } from "../../../src/otlp/Encoding.ts"
import { sampledByRatio } from "../../../src/otlp/Sampling.ts"
import { SpanBuffers } from "../../../src/telemetry/Buffers.ts"
import { makeTracer } from "../../../src/telemetry/Capture.ts"
import { takeSpans } from "../../support/spanBatches.ts"

const ORG = "01900000-0000-7000-8000-000000000001"
const OTHER = "01900000-0000-7000-8000-000000000002"

const setup = (ratio = 1, capacity = 100) => {
  const buffers = SpanBuffers.make(capacity)
  buffers.activate(ORG, "dest-1")
  const tracer = makeTracer(buffers, ratio)
  const taken = (): Array<OtlpSpan> => takeSpans(buffers, "dest-1")
  return { buffers, tracer, taken }
}

const attrs = (span: OtlpSpan) => Object.fromEntries(span.attributes.map((a) => [a.key, Object.values(a.value)[0]]))

describe("span capture", () => {
  it.effect("a span under a span annotated with svc.org_id goes to that organization's buffer; others do not", () =>
    Effect.gen(function*() {
      const { tracer, taken } = setup()
      yield* Effect.void.pipe(
        Effect.withSpan("child"),
        Effect.withSpan("root", { attributes: { "svc.org_id": ORG } }),
        Effect.withTracer(tracer)
      )
      yield* Effect.void.pipe(
        Effect.withSpan("other", { attributes: { "svc.org_id": OTHER } }),
        Effect.withTracer(tracer)
      )
      yield* Effect.void.pipe(Effect.withSpan("nobody's"), Effect.withTracer(tracer))
      const spans = taken()
      assert.deepStrictEqual(spans.map((s) => s.name).sort(), ["child", "root"])
      const root = spans.find((s) => s.name === "root")!
      const child = spans.find((s) => s.name === "child")!
      assert.strictEqual(child.parentSpanId, root.spanId)
      assert.strictEqual(child.traceId, root.traceId)
      assert.match(root.traceId, /^[0-9a-f]{32}$/)
      assert.match(root.spanId, /^[0-9a-f]{16}$/)
      assert.match(root.startTimeUnixNano, /^\d+$/)
    }))

  it.effect("a span that ends before its parent learns the organization is decided when the parent ends", () =>
    Effect.gen(function*() {
      const { tracer, taken } = setup()
      yield* Effect.gen(function*() {
        yield* Effect.void.pipe(Effect.withSpan("key lookup"))
        yield* Effect.annotateCurrentSpan("svc.org_id", ORG)
      }).pipe(Effect.withSpan("request"), Effect.withTracer(tracer))
      assert.deepStrictEqual(taken().map((s) => s.name).sort(), ["key lookup", "request"])
    }))

  it.effect("attributes pass an allowlist: semantic conventions and svc.*, never credentials, payloads or messages", () =>
    Effect.gen(function*() {
      const { tracer, taken } = setup()
      yield* Effect.fail(new Error("payload text with secret sk_live_123")).pipe(
        Effect.withSpan("op", {
          attributes: {
            "svc.org_id": ORG,
            "svc.task_id": "t1",
            "svc.api_key": "sk_live_123",
            "http.request.method": "POST",
            "url.query": "token=abc",
            "url.full": "https://x/?token=abc",
            "http.request.header.authorization": "Bearer abc",
            "code.stacktrace": "at x",
            input: "payload"
          }
        }),
        Effect.withTracer(tracer),
        Effect.ignore
      )
      const [span] = taken()
      const attributes = attrs(span!)
      assert.deepStrictEqual(Object.keys(attributes).sort(), [
        "error.type",
        "http.request.method",
        "svc.org_id",
        "svc.task_id"
      ])
      assert.strictEqual(attributes["error.type"], "Error")
      assert.strictEqual(span!.status.code, 2)
      assert.notInclude(JSON.stringify(span), "sk_live_123")
      assert.notInclude(JSON.stringify(span), "payload text")
      assert.isAbove(span!.droppedAttributesCount ?? 0, 0)
    }))

  it.effect("database client spans (svc's own infrastructure) are never exported", () =>
    Effect.gen(function*() {
      const { tracer, taken } = setup()
      yield* Effect.void.pipe(
        Effect.withSpan("postgres", {
          kind: "client",
          attributes: { "db.system.name": "postgresql", "db.query.text": "SELECT 1" }
        }),
        Effect.withSpan("Tasks.list", { attributes: { "svc.org_id": ORG } }),
        Effect.withTracer(tracer)
      )
      assert.deepStrictEqual(taken().map((s) => s.name), ["Tasks.list"])
    }))

  it.effect("a server span fails on 5xx only, with error.type the status code", () =>
    Effect.gen(function*() {
      const { tracer, taken } = setup()
      for (const status of [200, 404, 503]) {
        yield* Effect.void.pipe(
          Effect.withSpan("GET", {
            kind: "server",
            attributes: { "svc.org_id": ORG, "http.response.status_code": status }
          }),
          Effect.withTracer(tracer)
        )
      }
      const spans = taken()
      assert.deepStrictEqual(spans.map((s) => [s.kind, s.status.code, attrs(s)["error.type"]]), [
        [2, 0, undefined],
        [2, 0, undefined],
        [2, 2, "503"]
      ])
    }))

  it.effect("a full buffer drops and counts, never blocks", () =>
    Effect.gen(function*() {
      const { buffers, tracer } = setup(1, 5)
      for (let i = 0; i < 8; i++) {
        yield* Effect.void.pipe(
          Effect.withSpan(`s${i}`, { attributes: { "svc.org_id": ORG } }),
          Effect.withTracer(tracer)
        )
      }
      assert.strictEqual(buffers.size("dest-1"), 5)
      assert.strictEqual(buffers.unsavedDropped("dest-1"), 3)
      assert.strictEqual(buffers.takeDropped("dest-1"), 3)
      assert.strictEqual(buffers.unsavedDropped("dest-1"), 0)
    }))

  it.effect("deactivating drops what was buffered", () =>
    Effect.gen(function*() {
      const { buffers, tracer } = setup()
      yield* Effect.void.pipe(Effect.withSpan("s", { attributes: { "svc.org_id": ORG } }), Effect.withTracer(tracer))
      assert.strictEqual(buffers.size("dest-1"), 1)
      assert.isTrue(buffers.isActive("dest-1"))
      buffers.deactivate(ORG)
      assert.strictEqual(buffers.size("dest-1"), 0)
      assert.isFalse(buffers.isActive("dest-1"))
      yield* Effect.void.pipe(Effect.withSpan("s", { attributes: { "svc.org_id": ORG } }), Effect.withTracer(tracer))
      assert.isFalse(buffers.wants(ORG))
    }))

  describe("parent-based trace-id-ratio sampling", () => {
    it("the ratio decides on the trace id's low 56 bits: kept when R >= (1 - ratio) * 2^56 (OpenTelemetry's rejection threshold)", () => {
      assert.isTrue(sampledByRatio("f".repeat(32), 1))
      assert.isFalse(sampledByRatio("0".repeat(31) + "1", 0))
      // Only the low 56 bits count; the high 72 bits do not.
      assert.isFalse(sampledByRatio("ffffffffffffffffff00000000000001", 0.5))
      assert.isTrue(sampledByRatio("0000000000000000008fffffffffffff", 0.5))
      // Threshold for 50 %: 0x80000000000000; for 1 %: 0xfd70a3d70a3d70 (the OpenTelemetry specification's example th=fd70a4).
      assert.isTrue(sampledByRatio("00000000000000000080000000000000", 0.5))
      assert.isFalse(sampledByRatio("0000000000000000007fffffffffffff", 0.5))
      assert.isTrue(sampledByRatio("000000000000000000ffffffffffffff", 0.01))
      assert.isFalse(sampledByRatio("000000000000000000fd700000000000", 0.01))
    })

    it("property: consistent with a collector's probabilistic sampler (kept at p implies kept at every p' >= p, and R >= T)", () => {
      const hex = fc.uint8Array({ minLength: 16, maxLength: 16 }).map((bytes) => Buffer.from(bytes).toString("hex"))
      const ratio = fc.double({ min: 0, max: 1, noNaN: true })
      fc.assert(fc.property(hex, ratio, ratio, (traceId, a, b) => {
        const [low, high] = a <= b ? [a, b] : [b, a]
        if (sampledByRatio(traceId, low)) assert.isTrue(sampledByRatio(traceId, high))
        if (low > 0 && low < 1) {
          const r = BigInt(`0x${traceId.slice(-14)}`)
          const threshold = BigInt(Math.round((1 - low) * 2 ** 56))
          assert.strictEqual(sampledByRatio(traceId, low), r >= threshold)
        }
      }))
    })

    it.effect("ratio 0 keeps nothing; children follow their root", () =>
      Effect.gen(function*() {
        const { tracer, taken } = setup(0)
        yield* Effect.void.pipe(
          Effect.withSpan("child"),
          Effect.withSpan("root", { attributes: { "svc.org_id": ORG } }),
          Effect.withTracer(tracer)
        )
        assert.deepStrictEqual(taken(), [])
      }))

    it.effect("ratio 0.5 keeps about half the traces, whole", () =>
      Effect.gen(function*() {
        const { tracer, taken } = setup(0.5, 10_000)
        for (let i = 0; i < 1000; i++) {
          yield* Effect.void.pipe(
            Effect.withSpan("child"),
            Effect.withSpan("root", { attributes: { "svc.org_id": ORG } }),
            Effect.withTracer(tracer)
          )
        }
        const spans = taken()
        const roots = spans.filter((s) => s.name === "root")
        assert.isAbove(roots.length, 380)
        assert.isBelow(roots.length, 620)
        assert.strictEqual(spans.length, roots.length * 2)
        for (const root of roots) assert.isTrue(sampledByRatio(root.traceId, 0.5))
      }))

    it.effect("a remote parent's decision is inherited", () =>
      Effect.gen(function*() {
        const { tracer, taken } = setup(1)
        const remote = Tracer.externalSpan({
          traceId: "4bf92f3577b34da6a3ce929d0e0e4736",
          spanId: "00f067aa0ba902b7",
          sampled: false
        })
        yield* Effect.void.pipe(
          Effect.withSpan("s", { parent: remote, attributes: { "svc.org_id": ORG } }),
          Effect.withTracer(tracer)
        )
        assert.deepStrictEqual(taken(), [])
        const sampled = Tracer.externalSpan({
          traceId: "4bf92f3577b34da6a3ce929d0e0e4736",
          spanId: "00f067aa0ba902b7",
          sampled: true
        })
        yield* Effect.void.pipe(
          Effect.withSpan("s", { parent: sampled, attributes: { "svc.org_id": ORG } }),
          Effect.withTracer(tracer)
        )
        const [span] = taken()
        assert.strictEqual(span!.traceId, "4bf92f3577b34da6a3ce929d0e0e4736")
        assert.strictEqual(span!.parentSpanId, "00f067aa0ba902b7")
      }))

    it.effect("while no organization has a destination, new traces are unsampled for the organizations (their attributes are skipped); once one has, they are sampled", () =>
      Effect.gen(function*() {
        const buffers = SpanBuffers.make(100)
        const tracer = makeTracer(buffers, 1)
        const remote = Tracer.externalSpan({
          traceId: "4bf92f3577b34da6a3ce929d0e0e4736",
          spanId: "00f067aa0ba902b7",
          sampled: true
        })
        const sampledOf = (parent?: Tracer.AnySpan) =>
          Effect.map(Effect.currentSpan, (span) => span.sampled).pipe(
            Effect.withSpan("s", parent === undefined ? {} : { parent }),
            Effect.withTracer(tracer),
            Effect.orDie
          )
        assert.isFalse(yield* sampledOf())
        assert.isFalse(yield* sampledOf(remote))
        buffers.activate(ORG, "dest-1")
        assert.isTrue(yield* sampledOf())
        assert.isTrue(yield* sampledOf(remote))
        buffers.deactivate(ORG)
        assert.isFalse(yield* sampledOf())
      }))
  })
})
