import { assert, describe, it } from "@effect/vitest"
import { Cause, Context, Data, Exit, Option, Tracer } from "effect"
import fc from "fast-check"
import { encodeSpan, isExportedAttribute, toOtlpSpan } from "../../../src/otlp/Spans.ts"

class Refused extends Data.TaggedError("Refused")<{}> {}

const keys = fc.constantFrom(
  "svc.org_id",
  "svc.task_id",
  "svc.api_key",
  "http.request.method",
  "http.response.status_code",
  "http.route",
  "url.path",
  "url.query",
  "error.type",
  "server.port",
  "user_agent.original",
  "svc.\"quoted\"\\key"
)
const values = fc.oneof(
  fc.string(),
  fc.string({ unit: "grapheme", maxLength: 300 }),
  fc.string({ unit: "binary", maxLength: 300 }),
  fc.constantFrom("\ud800", "a\udc00b", "😀".repeat(200), "line\nbreak\t\"q\"\\", "\u2028\u2029\u0000"),
  fc.boolean(),
  fc.integer(),
  fc.double(),
  fc.constantFrom(2 ** 53, -(2 ** 60), 1e21, -0, Number.NaN, Number.POSITIVE_INFINITY, 0.1),
  fc.bigInt({ min: -(2n ** 64n), max: 2n ** 64n }),
  fc.constant(null),
  fc.constant({ nested: true }),
  fc.constant(undefined)
)
const exits = fc.constantFrom<Exit.Exit<unknown, unknown>>(
  Exit.void,
  Exit.fail(new Refused()),
  Exit.fail(new TypeError("message with secret")),
  Exit.fail("a string"),
  Exit.die(new Error("boom")),
  Exit.die("defect"),
  Exit.failCause(Cause.interrupt())
)

const spanOf = (input: {
  readonly name: string
  readonly kind: Tracer.SpanKind
  readonly attributes: ReadonlyArray<readonly [string, unknown]>
  readonly parent: boolean
  readonly links: number
  readonly exit: Exit.Exit<unknown, unknown>
  readonly start: bigint
  readonly duration: bigint
}): Tracer.Span => {
  const parent = input.parent
    ? Option.some(
      new Tracer.NativeSpan({
        name: "parent",
        parent: Option.none(),
        annotations: Context.empty(),
        links: [],
        startTime: 1n,
        kind: "internal",
        sampled: true
      })
    )
    : Option.none()
  const other = new Tracer.NativeSpan({
    name: "linked",
    parent: Option.none(),
    annotations: Context.empty(),
    links: [],
    startTime: 1n,
    kind: "internal",
    sampled: true
  })
  const span = new Tracer.NativeSpan({
    name: input.name,
    parent,
    annotations: Context.empty(),
    links: Array.from({ length: input.links }, () => ({ span: other, attributes: { "svc.x": 1 } })),
    startTime: input.start,
    kind: input.kind,
    sampled: true
  })
  for (const [key, value] of input.attributes) span.attribute(key, value)
  span.end(input.start + input.duration, input.exit)
  return span
}

describe("a span's OTLP/JSON text as capture writes it", () => {
  it("property: encodeSpan writes exactly JSON.stringify(toOtlpSpan(span)), for either attribute filter", () => {
    fc.assert(
      fc.property(
        fc.record({
          name: fc.oneof(fc.string(), fc.constantFrom("GET /v1/tasks", "é \"x\" \ud800")),
          kind: fc.constantFrom<Tracer.SpanKind>("internal", "server", "client", "producer", "consumer"),
          attributes: fc.array(fc.tuple(keys, values), { maxLength: 12 }),
          parent: fc.boolean(),
          links: fc.nat(2),
          exit: exits,
          start: fc.bigInt({ min: 0n, max: 2n ** 62n }),
          duration: fc.bigInt({ min: 0n, max: 10n ** 12n })
        }),
        fc.boolean(),
        (input, operator) => {
          const span = spanOf(input)
          const filter = operator ? (key: string) => !key.includes("api_key") : isExportedAttribute
          assert.strictEqual(encodeSpan(span, filter), JSON.stringify(toOtlpSpan(span, filter)))
        }
      ),
      { numRuns: 2000 }
    )
  })
})
