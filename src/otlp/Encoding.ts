/**
 * OTLP/HTTP JSON for traces, as the OTLP specification defines it
 * (`ExportTraceServiceRequest` of opentelemetry-proto, JSON-mapped;
 * `Protobuf.ts` writes the same request as OTLP/HTTP protobuf):
 * lowerCamelCase field names, trace and span ids as lowercase hex (not
 * base64), 64-bit integers (unix nanoseconds, `intValue`) as decimal
 * strings, enums as integers, a resource carrying `service.name`.
 *
 * Written by hand on purpose: `@opentelemetry/otlp-transformer`'s JSON
 * serializer takes SDK `ReadableSpan` objects (hrtime tuples, `Resource`
 * instances) and brings six SDK packages into production dependencies;
 * Effect's own `effect/observability/OtlpTracer` is one process-wide
 * exporter and copies failure messages and stack traces into span events,
 * which may carry payload text. The mapping for spans is this small file,
 * and the tests decode what a collector receives with the official
 * protobuf definitions.
 */
import { VERSION } from "../api/Version.ts"
import { readProtobufAnswer } from "./Protobuf.ts"

export interface AnyValue {
  readonly stringValue?: string
  readonly boolValue?: boolean
  readonly intValue?: string
  readonly doubleValue?: number
}

export interface KeyValue {
  readonly key: string
  readonly value: AnyValue
}

export interface OtlpLink {
  readonly traceId: string
  readonly spanId: string
  readonly attributes: ReadonlyArray<KeyValue>
}

export interface OtlpSpan {
  readonly traceId: string
  readonly spanId: string
  readonly parentSpanId?: string
  readonly name: string
  readonly kind: number
  readonly startTimeUnixNano: string
  readonly endTimeUnixNano: string
  readonly attributes: ReadonlyArray<KeyValue>
  readonly droppedAttributesCount?: number
  readonly links?: ReadonlyArray<OtlpLink>
  readonly status: { readonly code: number; readonly message?: string }
}

/** `SpanKind` enum of trace.proto. */
export const SpanKind = {
  internal: 1,
  server: 2,
  client: 3,
  producer: 4,
  consumer: 5
} as const

/** `Status.StatusCode` enum of trace.proto. */
export const StatusCode = { Unset: 0, Ok: 1, Error: 2 } as const

/** An attribute value as OTLP/JSON writes it; `undefined` for values we never export. */
export const attributeValue = (value: unknown): AnyValue | undefined => {
  switch (typeof value) {
    case "string":
      // Well-formed UTF-16 only: a cut through a surrogate pair, or a lone
      // surrogate from a client's JSON ("\ud800"), would be written as an
      // unpaired `\ud8xx` escape, which protobuf JSON parsers (the
      // Collector's) refuse, failing the whole batch.
      return { stringValue: (value.length > MAX_STRING ? value.slice(0, MAX_STRING) : value).toWellFormed() }
    case "boolean":
      return { boolValue: value }
    case "number":
      if (Number.isSafeInteger(value)) return { intValue: String(value) }
      return Number.isFinite(value) ? { doubleValue: value } : undefined
    case "bigint":
      return BigInt.asIntN(64, value) === value ? { intValue: value.toString() } : undefined
    default:
      return undefined
  }
}

/** Longest attribute string we export. */
export const MAX_STRING = 256

export const SCOPE = { name: "svc", version: VERSION } as const

/** The request body: one resource (`service.name` = `svc`), one scope. */
export const exportRequest = (spans: ReadonlyArray<OtlpSpan>, resource: ReadonlyArray<KeyValue>) => ({
  resourceSpans: [{
    resource: { attributes: resource },
    scopeSpans: [{ scope: SCOPE, spans }]
  }]
})

export const encodeRequest = (spans: ReadonlyArray<OtlpSpan>, resource: ReadonlyArray<KeyValue>): string =>
  JSON.stringify(exportRequest(spans, resource))

/**
 * The same text as `encodeRequest`, built from spans encoded one at a time
 * (`head + spans.join(",") + tail`): captured spans are kept encoded, so a
 * batch costs a string join instead of one long `JSON.stringify` holding
 * the event loop.
 */
export const encodeRequestParts = (
  resource: ReadonlyArray<KeyValue>
): { readonly head: string; readonly span: (span: OtlpSpan) => string; readonly tail: string } => {
  const marker = "\u0000spans\u0000"
  const template = JSON.stringify({
    resourceSpans: [{ resource: { attributes: resource }, scopeSpans: [{ scope: SCOPE, spans: marker }] }]
  })
  const [head, tail] = template.split(JSON.stringify(marker)) as [string, string]
  return { head: `${head}[`, span: (span) => JSON.stringify(span), tail: `]${tail}` }
}

export const serviceResource = (extra: Readonly<Record<string, string>> = {}): ReadonlyArray<KeyValue> => [
  { key: "service.name", value: { stringValue: "svc" } },
  ...Object.entries(extra).map(([key, value]) => ({ key, value: { stringValue: value } }))
]

/** What a collector said in a 2xx `ExportTraceServiceResponse`. */
export interface ExportAnswer {
  readonly rejectedSpans: number
  readonly errorMessage: string | undefined
}

/**
 * Reads `partialSuccess` of an `ExportTraceServiceResponse`: protobuf when
 * the collector says so (`application/x-protobuf`, its answer to a protobuf
 * request), JSON otherwise. An empty or unreadable body (some collectors
 * answer `{}` or nothing) means full success.
 */
export const readExportAnswer = (body: Uint8Array, contentType?: string | undefined): ExportAnswer => {
  if (body.length === 0) return { rejectedSpans: 0, errorMessage: undefined }
  if (contentType !== undefined && /^application\/(x-)?protobuf\b/i.test(contentType.trim())) {
    return answerOf(readProtobufAnswer(body))
  }
  let parsed: unknown
  try {
    parsed = JSON.parse(new TextDecoder().decode(body))
  } catch {
    return { rejectedSpans: 0, errorMessage: undefined }
  }
  if (typeof parsed !== "object" || parsed === null) return { rejectedSpans: 0, errorMessage: undefined }
  const partial = (parsed as { partialSuccess?: unknown }).partialSuccess
  if (typeof partial !== "object" || partial === null) return { rejectedSpans: 0, errorMessage: undefined }
  return answerOf(partial as { rejectedSpans?: unknown; errorMessage?: unknown })
}

const answerOf = (
  partial: { readonly rejectedSpans?: unknown; readonly errorMessage?: unknown } | undefined
): ExportAnswer => {
  const { rejectedSpans, errorMessage } = partial ?? {}
  const rejected = typeof rejectedSpans === "string" || typeof rejectedSpans === "number" ? Number(rejectedSpans) : 0
  return {
    rejectedSpans: Number.isFinite(rejected) && rejected > 0 ? Math.floor(rejected) : 0,
    // Not cut here: secrets are masked first (the body is at most 16 KiB).
    errorMessage: typeof errorMessage === "string" && errorMessage.length > 0 ? errorMessage : undefined
  }
}
