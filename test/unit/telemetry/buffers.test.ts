import { assert, describe, it } from "@effect/vitest"
import { Duration } from "effect"
import { BATCH_SPANS, FLUSH_EVERY, SpanBuffers } from "../../../src/telemetry/Buffers.ts"

const ORG = "01900000-0000-7000-8000-000000000001"

/** A span's text as capture writes it (only its name matters here). */
const span = (name: string) => JSON.stringify({ name })

const setup = () => {
  const buffers = SpanBuffers.make(10_000)
  buffers.activate(ORG, "dest")
  let n = 0
  const offer = (count: number) => {
    for (let i = 0; i < count; i++) buffers.offer(ORG, span(`s${n++}`))
  }
  /** The names in the next batch `take` gives, or undefined. */
  const next = (): Array<string> | undefined => {
    const batch = buffers.take("dest")
    if (batch === undefined) return undefined
    const body = JSON.parse(Buffer.from(batch.body).toString("utf8")) as {
      resourceSpans: ReadonlyArray<{ scopeSpans: ReadonlyArray<{ spans: ReadonlyArray<{ name: string }> }> }>
    }
    const names = body.resourceSpans[0]!.scopeSpans[0]!.spans.map((s) => s.name)
    assert.strictEqual(names.length, batch.spans)
    batch.release()
    return names
  }
  return { buffers, offer, next }
}

const names = (from: number, count: number) => Array.from({ length: count }, (_, i) => `s${from + i}`)

describe("cutting a buffer into batches (a flush round)", () => {
  it("a round started by a full batch soon after the last cut takes only full batches: the rest joins the next batch", () => {
    const { buffers, offer, next } = setup()
    const t0 = 1_000_000
    offer(10)
    assert.strictEqual(buffers.cut("dest", "period", t0), 1)
    assert.deepStrictEqual(next(), names(0, 10))
    // A full batch and 20 spans more, half a period after that cut.
    offer(BATCH_SPANS + 20)
    assert.strictEqual(buffers.cut("dest", "full", t0 + 500), 1)
    assert.deepStrictEqual(next(), names(10, BATCH_SPANS))
    assert.isUndefined(next())
    assert.strictEqual(buffers.size("dest"), 20)
    // The 20 are the start of the next full batch, not a small batch of their own.
    offer(BATCH_SPANS - 20 + 7)
    assert.strictEqual(buffers.cut("dest", "full", t0 + 1000), 1)
    assert.deepStrictEqual(next(), names(10 + BATCH_SPANS, BATCH_SPANS))
    assert.isUndefined(next())
    assert.strictEqual(buffers.size("dest"), 7)
  })

  it("a round started by the period, by a full batch a period or more after the last cut, or before any cut takes everything", () => {
    const { buffers, offer, next } = setup()
    const t0 = 1_000_000
    // Before any cut.
    offer(BATCH_SPANS + 3)
    assert.strictEqual(buffers.cut("dest", "full", t0), 2)
    assert.deepStrictEqual(next(), names(0, BATCH_SPANS))
    assert.deepStrictEqual(next(), names(BATCH_SPANS, 3))
    // A period after the last cut.
    offer(BATCH_SPANS + 5)
    assert.strictEqual(buffers.cut("dest", "full", t0 + Duration.toMillis(FLUSH_EVERY)), 2)
    assert.strictEqual(next()!.length, BATCH_SPANS)
    assert.deepStrictEqual(next(), names(2 * BATCH_SPANS + 3, 5))
    // The period, right after.
    offer(4)
    assert.strictEqual(buffers.cut("dest", "period", t0 + Duration.toMillis(FLUSH_EVERY) + 1), 1)
    assert.deepStrictEqual(next(), names(2 * BATCH_SPANS + 8, 4))
    // Nothing buffered: no batch, and an empty buffer is not a cut.
    assert.strictEqual(buffers.cut("dest", "period", t0 + 10_000), 0)
    assert.isUndefined(next())
  })

  it("spans captured after a cut wait for the next one, whatever the round", () => {
    const { buffers, offer, next } = setup()
    offer(3)
    assert.strictEqual(buffers.cut("dest", "period", 1_000), 1)
    offer(2)
    assert.deepStrictEqual(next(), names(0, 3))
    assert.isUndefined(next())
    assert.strictEqual(buffers.size("dest"), 2)
  })
})
