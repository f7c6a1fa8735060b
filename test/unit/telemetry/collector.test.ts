import { assert, describe, it } from "@effect/vitest"
import { Duration, Effect } from "effect"
import fc from "fast-check"
import { classify, parseRetryAfter } from "../../../src/telemetry/Collector.ts"
import { attemptInRound, backoff, MAX_ATTEMPTS } from "../../../src/telemetry/export/Retries.ts"

const answer = (status: number, body = "", headers: Record<string, string> = {}) => ({
  status,
  headers,
  body: new TextEncoder().encode(body),
  truncated: false,
  elapsedMs: 1
})

describe("what a collector's answer means", () => {
  it("retries only 429, 502, 503 and 504", () => {
    for (const status of [429, 502, 503, 504]) assert.strictEqual(classify(answer(status), 3, 0)._tag, "Retryable")
    for (const status of [400, 401, 403, 404, 413, 500, 301, 418, 501]) {
      assert.strictEqual(classify(answer(status), 3, 0)._tag, "Rejected")
    }
  })

  it("a 200 with partialSuccess.rejectedSpans > 0 is partial with the count; 0 with a message is accepted with a warning", () => {
    const partial = classify(
      answer(200, JSON.stringify({ partialSuccess: { rejectedSpans: "2", errorMessage: "too old" } })),
      5,
      0
    )
    assert.deepInclude(partial, { _tag: "Partial", rejected: 2 })
    const warned = classify(
      answer(200, JSON.stringify({ partialSuccess: { rejectedSpans: 0, errorMessage: "slow down" } })),
      5,
      0
    )
    assert.deepStrictEqual(warned, { _tag: "Accepted", status: 200, warning: "slow down" })
    assert.deepStrictEqual(classify(answer(200, "{}"), 5, 0), { _tag: "Accepted", status: 200, warning: undefined })
    assert.deepStrictEqual(classify(answer(202, "not json"), 5, 0), {
      _tag: "Accepted",
      status: 202,
      warning: undefined
    })
  })

  it("a collector's message is masked of the destination's header values before it is cut short", () => {
    const secret = "h".repeat(30)
    const clean = (text: string) => text.split(secret).join("[redacted]")
    // The value straddles the 200-character cut of last_error.
    const message = `${"m".repeat(185)}${secret} and more`
    const partial = classify(
      answer(200, JSON.stringify({ partialSuccess: { rejectedSpans: 1, errorMessage: message } })),
      5,
      0,
      clean
    )
    assert.strictEqual(partial._tag, "Partial")
    assert.notInclude(partial._tag === "Partial" ? partial.error : "", "hhhhhhhh")
    const warned = classify(
      answer(200, JSON.stringify({ partialSuccess: { rejectedSpans: 0, errorMessage: `x${secret}` } })),
      5,
      0,
      clean
    )
    assert.deepStrictEqual(warned, { _tag: "Accepted", status: 200, warning: "x[redacted]" })
  })

  it("Retry-After in seconds or as an HTTP date, capped at 5 minutes", () => {
    assert.strictEqual(Duration.toMillis(parseRetryAfter("2", 0)!), 2000)
    assert.strictEqual(Duration.toMillis(parseRetryAfter(new Date(10_000).toUTCString(), 4000)!), 6000)
    assert.strictEqual(Duration.toMillis(parseRetryAfter("86400", 0)!), 300_000)
    assert.isUndefined(parseRetryAfter("soon", 0))
    assert.isUndefined(parseRetryAfter(undefined, 0))
    const retry = classify(answer(503, "", { "retry-after": "7" }), 1, 0)
    assert.strictEqual(retry._tag === "Retryable" ? Duration.toMillis(retry.retryAfter!) : -1, 7000)
  })

  it("a replay starts a fresh round of attempts, however many the batch used before it failed", () => {
    // Never replayed: attempts count from the enqueue.
    assert.strictEqual(attemptInRound({ attempts: 3, replays: 0, meta: { round_start: 0 } }), 3)
    // Failed at once (a 400) on attempt 1, then replayed: the replay's first attempt is attempt 1 of its round.
    assert.strictEqual(attemptInRound({ attempts: 2, replays: 1, meta: { round_start: 1 } }), 1)
    assert.strictEqual(
      attemptInRound({ attempts: 1 + MAX_ATTEMPTS, replays: 1, meta: { round_start: 1 } }),
      MAX_ATTEMPTS
    )
    // Gave up after 5, replayed twice.
    assert.strictEqual(attemptInRound({ attempts: 12, replays: 2, meta: { round_start: 10 } }), 2)
    // Failed at enqueue (queue full), then replayed.
    assert.strictEqual(attemptInRound({ attempts: 1, replays: 1, meta: { round_start: 0 } }), 1)
  })

  it("property: retry n waits the schedule's nth delay (its last past its end), within ±20 %", () => {
    const delays = fc.array(fc.integer({ min: 0, max: 3_600_000 }), { minLength: 1, maxLength: 10 })
    fc.assert(
      fc.property(
        delays,
        fc.integer({ min: 1, max: 12 }),
        fc.double({ min: 0, max: 1, noNaN: true }),
        (ms, n, random) => {
          const waited = Duration.toMillis(backoff(ms.map(Duration.millis), n, random))
          const base = ms[Math.min(n, ms.length) - 1]!
          assert.isAtLeast(waited, Math.floor(base * 0.8))
          assert.isAtMost(waited, Math.ceil(base * 1.2))
        }
      )
    )
  })
})

describe("OTLP attribute values", () => {
  it("strings are cut at 256 characters and always well-formed UTF-16 (no unpaired surrogate escapes)", async () => {
    const { attributeValue, MAX_STRING } = await import("../../../src/otlp/Encoding.ts")
    // An emoji (a surrogate pair) straddling the cut.
    const cut = attributeValue(`${"a".repeat(MAX_STRING - 1)}\u{1F600}tail`)!.stringValue!
    assert.isAtMost(cut.length, MAX_STRING)
    assert.isTrue(cut.isWellFormed())
    assert.notMatch(JSON.stringify(cut), /\\ud[89a-f]/i)
    // A lone surrogate, as JSON.parse accepts it from a client's body.
    const lone = attributeValue(JSON.parse("\"x\\ud800y\""))!.stringValue!
    assert.isTrue(lone.isWellFormed())
    assert.deepStrictEqual(attributeValue(7), { intValue: "7" })
    assert.deepStrictEqual(attributeValue(1.5), { doubleValue: 1.5 })
    assert.deepStrictEqual(attributeValue(2n ** 63n - 1n), { intValue: "9223372036854775807" })
    assert.isUndefined(attributeValue(2n ** 63n))
    assert.isUndefined(attributeValue(Number.NaN))
  })
})

describe("OTLP encoding in slices", () => {
  it("encodeRequestParts builds exactly encodeRequest's text", async () => {
    const { encodeRequest, encodeRequestParts, serviceResource } = await import("../../../src/otlp/Encoding.ts")
    const spans = Array.from({ length: 3 }, (_, i) => ({
      traceId: "4bf92f3577b34da6a3ce929d0e0e4736",
      spanId: `00f067aa0ba902b${i}`,
      name: `s${i}`,
      kind: 1,
      startTimeUnixNano: "1",
      endTimeUnixNano: "2",
      attributes: [{ key: "svc.org_id", value: { stringValue: "o" } }],
      status: { code: 0 }
    }))
    const parts = encodeRequestParts(serviceResource())
    for (const n of [0, 1, 3]) {
      const sliced = `${parts.head}${spans.slice(0, n).map(parts.span).join(",")}${parts.tail}`
      assert.strictEqual(sliced, encodeRequest(spans.slice(0, n), serviceResource()))
    }
  })
})

describe("a batch written span by span as captured, then compressed", () => {
  it.effect("gunzips to exactly encodeRequest's text, whatever the batch before it left in the reused buffer (multi-byte text included)", () =>
    Effect.gen(function*() {
      const { gunzipSync } = yield* Effect.promise(() => import("node:zlib"))
      const { encodeRequest, encodeRequestParts, serviceResource } = yield* Effect.promise(() =>
        import("../../../src/otlp/Encoding.ts")
      )
      const { compressBatch } = yield* Effect.promise(() => import("../../../src/telemetry/Collector.ts"))
      const { BATCH_SPANS, SpanBuffers } = yield* Effect.promise(() => import("../../../src/telemetry/Buffers.ts"))
      const span = (i: number, text: string) => ({
        traceId: "4bf92f3577b34da6a3ce929d0e0e4736",
        spanId: `00f067aa0ba902b${i % 10}`,
        name: `s${i}`,
        kind: 1,
        startTimeUnixNano: "1",
        endTimeUnixNano: "2",
        attributes: [{ key: "url.path", value: { stringValue: text } }],
        status: { code: 0 }
      })
      const parts = encodeRequestParts(serviceResource())
      const buffers = SpanBuffers.make(10_000)
      buffers.activate("org", "dest")
      const batchOf = (spans: ReadonlyArray<ReturnType<typeof span>>) => {
        for (const s of spans) buffers.offer("org", parts.span(s))
        assert.strictEqual(buffers.cut("dest", "period", Date.now()), 1)
        return buffers.take("dest")!
      }
      const check = (
        body: { readonly gzipped: Uint8Array; readonly bytes: number },
        spans: ReadonlyArray<ReturnType<typeof span>>
      ) => {
        const text = gunzipSync(body.gzipped).toString("utf8")
        assert.strictEqual(text, encodeRequest(spans, serviceResource()))
        assert.strictEqual(body.bytes, Buffer.byteLength(text, "utf8"))
      }
      // Large (grown from a small buffer), then small and multi-byte (in the large one's buffer, given back), then one span.
      for (
        const batch of [
          Array.from({ length: 300 }, (_, i) => span(i, "x".repeat(200))),
          Array.from({ length: 3 }, (_, i) => span(i, "é – 😀 ü")),
          [span(1, "😀".repeat(100))]
        ]
      ) {
        check(yield* compressBatch(batchOf(batch)), batch)
      }
      // A full batch closes by itself; the spans after it start the next.
      const many = Array.from({ length: BATCH_SPANS + 88 }, (_, i) => span(i, `/v1/tasks/${i} ✓`))
      for (const s of many) buffers.offer("org", parts.span(s))
      assert.strictEqual(buffers.cut("dest", "full", Date.now()), 1)
      const full = buffers.take("dest")!
      assert.strictEqual(full.spans, BATCH_SPANS)
      assert.isUndefined(buffers.take("dest"))
      // A batch taken and not yet compressed keeps its bytes: later spans are written elsewhere.
      const rest = batchOf([])
      const a = Array.from({ length: 50 }, (_, i) => span(i, "a"))
      const b = Array.from({ length: 50 }, (_, i) => span(i, "b"))
      const ba = batchOf(a)
      const bb = batchOf(b)
      const [cf, cr, ca, cb] = yield* Effect.all([
        compressBatch(full),
        compressBatch(rest),
        compressBatch(ba),
        compressBatch(bb)
      ], { concurrency: 4 })
      check(cf, many.slice(0, BATCH_SPANS))
      check(cr, many.slice(BATCH_SPANS))
      check(ca, a)
      check(cb, b)
      assert.strictEqual(buffers.size("dest"), 0)
    }))
})
