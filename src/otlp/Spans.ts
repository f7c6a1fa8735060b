/**
 * Ended Effect spans in their OTLP/JSON form, for every exporter (an
 * organization's collector, the operator's): which attributes may leave
 * (an allowlist of semantic-convention names and `svc.*`, never names that
 * look like credentials), `error.type` instead of failure messages and
 * stack traces, and the semantic conventions' status of a server span.
 */
import { Cause, Exit, Option, Tracer } from "effect"
import { attributeValue, type KeyValue, type OtlpSpan, SpanKind, StatusCode } from "./Encoding.ts"

/** Semantic-convention attributes we export, beside `svc.*`. */
export const allowedAttributes: ReadonlySet<string> = new Set([
  "http.request.method",
  "http.response.status_code",
  "http.route",
  "url.path",
  "url.scheme",
  "server.address",
  "server.port",
  "error.type"
])

const SENSITIVE = /authorization|secret|password|passwd|api[-_]?key|token|cookie|credential|signature|header|payload|body/i

export const isExportedAttribute = (key: string): boolean =>
  allowedAttributes.has(key) || (key.startsWith("svc.") && !SENSITIVE.test(key))

/**
 * A span's attributes without creating its map: Effect's native span
 * creates one on the first read of `attributes` (see the pinned internals
 * test); a wrapping span may say what it holds as `ownAttributes`.
 */
export const attributesOf = (span: Tracer.Span): ReadonlyMap<string, unknown> | undefined =>
  "ownAttributes" in span
    ? (span as { readonly ownAttributes: ReadonlyMap<string, unknown> | undefined }).ownAttributes
    : span instanceof Tracer.NativeSpan
    ? span._attributes
    : span.attributes

const errorType = (exit: Exit.Exit<unknown, unknown>): string | undefined => {
  if (Exit.isSuccess(exit) || Cause.hasInterruptsOnly(exit.cause)) return undefined
  for (const reason of exit.cause.reasons) {
    const value = reason._tag === "Fail" ? reason.error : reason._tag === "Die" ? reason.defect : undefined
    if (typeof value === "object" && value !== null) {
      if ("_tag" in value && typeof value._tag === "string") return value._tag
      if (value instanceof Error) return value.name
    }
    if (reason._tag === "Die") return "defect"
  }
  return "_OTHER"
}

/** The OTLP form of an ended span: allowlisted attributes, `error.type`, never messages. */
export const toOtlpSpan = (span: Tracer.Span, isExported: (key: string) => boolean = isExportedAttribute): OtlpSpan => {
  const status = span.status as Extract<Tracer.SpanStatus, { _tag: "Ended" }>
  const attributes: Array<KeyValue> = []
  let dropped = 0
  let httpStatus: number | undefined
  let hasErrorType = false
  const source = attributesOf(span)
  if (source !== undefined) {
    for (const [key, raw] of source) {
      if (!isExported(key)) {
        dropped += 1
        continue
      }
      const value = attributeValue(raw)
      if (value === undefined) {
        dropped += 1
        continue
      }
      if (key === "http.response.status_code" && typeof raw === "number") httpStatus = raw
      if (key === "error.type") hasErrorType = true
      attributes.push({ key, value })
    }
  }
  let failure = errorType(status.exit)
  // Semantic conventions: a server span fails on 5xx only; its error.type is the status code.
  if (span.kind === "server" && httpStatus !== undefined) {
    failure = httpStatus >= 500 ? String(httpStatus) : undefined
  }
  if (failure !== undefined && !hasErrorType) attributes.push({ key: "error.type", value: { stringValue: failure } })
  const parent = Option.getOrUndefined(span.parent)
  const links = span.links.length === 0
    ? undefined
    : span.links.map((link) => ({ traceId: link.span.traceId, spanId: link.span.spanId, attributes: [] }))
  return {
    traceId: span.traceId,
    spanId: span.spanId,
    ...(parent === undefined ? {} : { parentSpanId: parent.spanId }),
    name: span.name,
    kind: SpanKind[span.kind],
    startTimeUnixNano: status.startTime.toString(),
    endTimeUnixNano: status.endTime.toString(),
    attributes,
    ...(dropped > 0 ? { droppedAttributesCount: dropped } : {}),
    ...(links === undefined ? {} : { links }),
    status: failure === undefined ? { code: StatusCode.Unset } : { code: StatusCode.Error, message: failure }
  }
}

