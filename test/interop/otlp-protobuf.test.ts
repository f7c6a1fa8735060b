/**
 * svc's OTLP/HTTP protobuf against the official definitions: the messages
 * protobufjs generated for the OpenTelemetry JS exporter
 * (`@opentelemetry/otlp-proto-exporter-base`), a decoder independent of
 * svc's. They come from this folder's own npm project (interop.ts): without
 * it a run skips this file and says so; under CI it runs, and fails if
 * they are missing.
 */
import { assert, describe, it } from "@effect/vitest"
import { Context, Exit, Option, Tracer } from "effect"
import fc from "fast-check"
import { exportRequest, serviceResource } from "../../src/otlp/Encoding.ts"
import { encodeProtobufRequest } from "../../src/otlp/Protobuf.ts"
import { toOtlpSpan } from "../../src/otlp/Spans.ts"
import { classify } from "../../src/telemetry/Collector.ts"
import { canonical, protobufToJson } from "../support/Otlp.ts"
import { interopRequire, runs } from "./interop.ts"

const OFFICIAL = "@opentelemetry/otlp-proto-exporter-base"
const installed = runs("otlp-protobuf.test.ts", "the official OTLP protobuf definitions", OFFICIAL)
// eslint-disable-next-line @typescript-eslint/no-explicit-any
const official: any = installed
  ? interopRequire(`${OFFICIAL}/build/src/generated/root.js`).opentelemetry.proto.collector.trace.v1
  : undefined

const spanOf = (input: {
  readonly name: string
  readonly kind: Tracer.SpanKind
  readonly attributes: ReadonlyArray<readonly [string, unknown]>
  readonly parent: boolean
  readonly link: boolean
  readonly failed: boolean
  readonly start: bigint
  readonly duration: bigint
}): Tracer.Span => {
  const other = () =>
    new Tracer.NativeSpan({
      name: "other",
      parent: Option.none(),
      annotations: Context.empty(),
      links: [],
      startTime: 1n,
      kind: "internal",
      sampled: true
    })
  const span = new Tracer.NativeSpan({
    name: input.name,
    parent: input.parent ? Option.some(other()) : Option.none(),
    annotations: Context.empty(),
    links: input.link ? [{ span: other(), attributes: {} }] : [],
    startTime: input.start,
    kind: input.kind,
    sampled: true
  })
  for (const [key, value] of input.attributes) span.attribute(key, value)
  span.end(input.start + input.duration, input.failed ? Exit.die(new Error("boom")) : Exit.void)
  return span
}

describe.skipIf(!installed)("OTLP/HTTP protobuf: the JSON form's request, written by protobufjs", () => {
  it("property: the official definitions decode the protobuf body into exactly the JSON form (hex ids, 64-bit nanoseconds, enums)", () => {
    fc.assert(
      fc.property(
        fc.array(
          fc.record({
            name: fc.constantFrom("GET /v1/tasks", "Tasks.run", "AgentSessions.governStep", "é \"x\""),
            kind: fc.constantFrom<Tracer.SpanKind>("internal", "server", "client", "producer", "consumer"),
            attributes: fc.array(
              fc.tuple(
                fc.constantFrom(
                  "svc.org_id",
                  "http.response.status_code",
                  "gen_ai.tool.name",
                  "error.type",
                  "svc.count"
                ),
                fc.oneof(
                  fc.string({ unit: "grapheme", maxLength: 300 }),
                  fc.boolean(),
                  fc.integer(),
                  fc.double({ noNaN: true }),
                  fc.bigInt({ min: -(2n ** 63n), max: 2n ** 63n - 1n })
                )
              ),
              { maxLength: 8 }
            ),
            parent: fc.boolean(),
            link: fc.boolean(),
            failed: fc.boolean(),
            // Unix nanoseconds beyond 2^53: a double would round them.
            start: fc.bigInt({ min: 0n, max: 2n ** 63n }),
            duration: fc.bigInt({ min: 0n, max: 10n ** 12n })
          }),
          { minLength: 1, maxLength: 5 }
        ),
        (inputs) => {
          const json = exportRequest(
            inputs.map((input) => toOtlpSpan(spanOf(input))),
            serviceResource({ "service.version": "0.2.0" })
          )
          const bytes = encodeProtobufRequest(json)
          assert.isNull(official.ExportTraceServiceRequest.verify(official.ExportTraceServiceRequest.decode(bytes)))
          assert.strictEqual(canonical(protobufToJson(bytes)), canonical(json))
        }
      ),
      { numRuns: 500 }
    )
  })

  it("a protobuf ExportTraceServiceResponse's partial_success is read: rejected spans make the batch partial", () => {
    const answer = (body: Uint8Array, contentType: string) => ({
      status: 200,
      headers: { "content-type": contentType },
      body,
      truncated: false,
      elapsedMs: 1
    })
    const encode = (partialSuccess: object) =>
      official.ExportTraceServiceResponse.encode(official.ExportTraceServiceResponse.fromObject({ partialSuccess }))
        .finish()
    const partial = classify(
      answer(encode({ rejectedSpans: 3, errorMessage: "too old" }), "application/x-protobuf"),
      5,
      0
    )
    assert.deepInclude(partial, { _tag: "Partial", rejected: 3 })
    assert.include(partial._tag === "Partial" ? partial.error : "", "too old")
    const warned = classify(
      answer(encode({ rejectedSpans: 0, errorMessage: "slow down" }), "application/x-protobuf"),
      5,
      0
    )
    assert.deepStrictEqual(warned, { _tag: "Accepted", status: 200, warning: "slow down" })
    assert.deepStrictEqual(classify(answer(new Uint8Array(), "application/x-protobuf"), 5, 0), {
      _tag: "Accepted",
      status: 200,
      warning: undefined
    })
    // The same bytes read as JSON would say nothing.
    assert.strictEqual(classify(answer(encode({ rejectedSpans: 3 }), "application/json"), 5, 0)._tag, "Accepted")
  })
})
