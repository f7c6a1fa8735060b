/**
 * Ended Effect spans in their OTLP/JSON form, for every exporter (an
 * organization's collector, the operator's): which attributes may leave
 * (an allowlist of semantic-convention names and `svc.*`, never names that
 * look like credentials), `error.type` instead of failure messages and
 * stack traces, and the semantic conventions' status of a server span.
 */
import { Cause, Exit, Option, Tracer } from "effect"
import { attributeValue, type KeyValue, MAX_STRING, type OtlpSpan, SpanKind, StatusCode } from "./Encoding.ts"

/** Semantic-convention attributes we export, beside `svc.*`. */
export const allowedAttributes: ReadonlySet<string> = new Set([
  "http.request.method",
  "http.response.status_code",
  "http.route",
  "url.path",
  "url.scheme",
  "server.address",
  "server.port",
  "error.type",
  // GenAI: task runs and governed steps (docs/telemetry.md, "GenAI semantic conventions").
  "gen_ai.operation.name",
  "gen_ai.tool.name",
  "gen_ai.tool.call.id",
  "gen_ai.conversation.id"
])

const SENSITIVE =
  /authorization|secret|password|passwd|api[-_]?key|token|cookie|credential|signature|header|payload|body/i

export const isExportedAttribute = (key: string): boolean =>
  allowedAttributes.has(key) || (key.startsWith("svc.") && !SENSITIVE.test(key))

/**
 * A span's attributes without creating its map: Effect's native span
 * creates one on the first read of `attributes` (see the pinned internals
 * test); a wrapping span may say what it holds as `ownAttributes`.
 */
const attributesOf = (span: Tracer.Span): ReadonlyMap<string, unknown> | undefined =>
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

/**
 * Why the span failed (its `error.type`), or undefined. Semantic
 * conventions: a server span fails on 5xx only, and its error.type is the
 * status code.
 */
const failureOf = (
  span: Tracer.Span,
  status: Extract<Tracer.SpanStatus, { _tag: "Ended" }>,
  httpStatus: number | undefined
): string | undefined =>
  span.kind === "server" && httpStatus !== undefined
    ? httpStatus >= 500 ? String(httpStatus) : undefined
    : errorType(status.exit)

/**
 * Walks an ended span's attributes: each exported one whose value `valueOf`
 * can write goes to `keep`, the others are counted as dropped. Answers the
 * span's status, the count and its failure (`error.type`), and the failure
 * again when no `error.type` attribute carried it (one is owed).
 */
const scanAttributes = <V>(
  span: Tracer.Span,
  isExported: (key: string) => boolean,
  valueOf: (raw: unknown) => V | undefined,
  keep: (key: string, value: V) => void
) => {
  const status = span.status as Extract<Tracer.SpanStatus, { _tag: "Ended" }>
  let dropped = 0
  let httpStatus: number | undefined
  let hasErrorType = false
  const source = attributesOf(span)
  if (source !== undefined) {
    for (const [key, raw] of source) {
      const value = isExported(key) ? valueOf(raw) : undefined
      if (value === undefined) {
        dropped += 1
        continue
      }
      if (key === "http.response.status_code" && typeof raw === "number") httpStatus = raw
      if (key === "error.type") hasErrorType = true
      keep(key, value)
    }
  }
  const failure = failureOf(span, status, httpStatus)
  return { status, dropped, failure, owedErrorType: hasErrorType ? undefined : failure }
}

/**
 * The OTLP form of an ended span: allowlisted attributes, `error.type`,
 * never messages. The mapping's readable statement: what is sent is
 * `encodeSpan`'s text, which must be exactly this object's JSON
 * (`test/unit/otlp/span-encoding.test.ts`).
 */
export const toOtlpSpan = (span: Tracer.Span, isExported: (key: string) => boolean = isExportedAttribute): OtlpSpan => {
  const attributes: Array<KeyValue> = []
  const { dropped, failure, owedErrorType, status } = scanAttributes(span, isExported, attributeValue, (key, value) => {
    attributes.push({ key, value })
  })
  if (owedErrorType !== undefined) attributes.push({ key: "error.type", value: { stringValue: owedErrorType } })
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

/** `JSON.stringify(attributeValue(value))`, without the object; `undefined` for values we never export. */
const attributeValueJson = (value: unknown): string | undefined => {
  switch (typeof value) {
    case "string":
      return `{"stringValue":${
        JSON.stringify((value.length > MAX_STRING ? value.slice(0, MAX_STRING) : value).toWellFormed())
      }}`
    case "boolean":
      return value ? `{"boolValue":true}` : `{"boolValue":false}`
    case "number":
      if (Number.isSafeInteger(value)) return `{"intValue":"${value}"}`
      return Number.isFinite(value) ? `{"doubleValue":${JSON.stringify(value)}}` : undefined
    case "bigint":
      return BigInt.asIntN(64, value) === value ? `{"intValue":"${value}"}` : undefined
    default:
      return undefined
  }
}

/**
 * `JSON.stringify(toOtlpSpan(span, isExported))`, written directly: no
 * object tree to build and walk. It runs for every exported span as the
 * span ends, on the request's path.
 */
export const encodeSpan = (span: Tracer.Span, isExported: (key: string) => boolean = isExportedAttribute): string => {
  let attributes = ""
  const { dropped, failure, owedErrorType, status } = scanAttributes(
    span,
    isExported,
    attributeValueJson,
    (key, value) => {
      attributes += `${attributes === "" ? "" : ","}{"key":${JSON.stringify(key)},"value":${value}}`
    }
  )
  if (owedErrorType !== undefined) {
    attributes += `${attributes === "" ? "" : ","}{"key":"error.type","value":{"stringValue":${
      JSON.stringify(owedErrorType)
    }}}`
  }
  const parent = Option.getOrUndefined(span.parent)
  let text = `{"traceId":${JSON.stringify(span.traceId)},"spanId":${JSON.stringify(span.spanId)}`
  if (parent !== undefined) text += `,"parentSpanId":${JSON.stringify(parent.spanId)}`
  text += `,"name":${JSON.stringify(span.name)},"kind":${
    SpanKind[span.kind]
  },"startTimeUnixNano":"${status.startTime}","endTimeUnixNano":"${status.endTime}","attributes":[${attributes}]`
  if (dropped > 0) text += `,"droppedAttributesCount":${dropped}`
  if (span.links.length > 0) {
    text += `,"links":[${
      span.links.map((link) =>
        `{"traceId":${JSON.stringify(link.span.traceId)},"spanId":${JSON.stringify(link.span.spanId)},"attributes":[]}`
      ).join(",")
    }]`
  }
  return `${text},"status":${
    failure === undefined
      ? `{"code":${StatusCode.Unset}}`
      : `{"code":${StatusCode.Error},"message":${JSON.stringify(failure)}}`
  }}`
}
