/**
 * Capture reads two internals of Effect's `Tracer.NativeSpan`: `_attributes`
 * (the attribute map, read without creating it) and `_traceId` (set before
 * anything reads `traceId`, so a new trace takes our CSPRNG's id). They are
 * not public API. This pins what Capture relies on, so an Effect upgrade that
 * renames or reshapes them fails here, loudly, instead of silently routing
 * spans to no organization or minting trace ids another way.
 */
import { assert, describe, it } from "@effect/vitest"
import { Context, Option, Tracer } from "effect"

const newSpan = (parent: Option.Option<Tracer.AnySpan> = Option.none()) =>
  new Tracer.NativeSpan({
    name: "pinned",
    parent,
    annotations: Context.empty(),
    links: [],
    startTime: 0n,
    kind: "internal",
    sampled: true
  })

describe("the Effect span internals Capture relies on", () => {
  it("_traceId starts unset, and a value set before any read is the span's traceId", () => {
    const span = newSpan()
    assert.property(span, "_traceId")
    assert.strictEqual(span._traceId, undefined)
    span._traceId = "0af7651916cd43dd8448eb211c80319c"
    assert.strictEqual(span.traceId, "0af7651916cd43dd8448eb211c80319c")
    const child = newSpan(Option.some(span))
    assert.strictEqual(child.traceId, "0af7651916cd43dd8448eb211c80319c", "a child inherits it through traceId")
  })

  it("_attributes is undefined until the first attribute, then the map attribute() writes to", () => {
    const span = newSpan()
    assert.property(span, "_attributes")
    assert.strictEqual(span._attributes, undefined)
    span.attribute("svc.org_id", "org-1")
    assert.instanceOf(span._attributes, Map)
    assert.strictEqual(span._attributes?.get("svc.org_id"), "org-1")
    assert.strictEqual(span._attributes, span.attributes)
  })
})
