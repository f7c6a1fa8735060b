/**
 * The rules for headers an organization adds to what svc sends: a
 * collector's (docs/telemetry.md, "The destination") and a webhook
 * endpoint's (docs/webhooks.md, "Custom headers"), which also refuses the
 * headers svc sets itself (`own`). Pure: tested on its own, with a
 * property test.
 *
 * Refused: more than 10 headers; names that differ only in case; transport
 * and hop-by-hop headers (we frame the request ourselves), trace-context
 * headers (the export must not join or fake a trace), cookies; names that
 * are not RFC 9110 tokens; values with control characters (CR, LF, NUL...)
 * or over 4 KiB. A refusal names the header, never its value. The schema
 * (`src/api/HeaderNames.ts`) states every rule but names differing only in
 * case and a value's UTF-8 length, and refuses first; these checks stay for
 * those two and for callers that do not decode through it.
 */
import { MAX_HEADERS, TRANSPORT_HEADERS } from "../api/HeaderNames.ts"

export const MAX_VALUE_BYTES = 4096

/** Refused by exact (case-insensitive) name: transport and hop-by-hop, trace context, cookies (stated in the schema too). */
const refusedNames: ReadonlySet<string> = new Set(TRANSPORT_HEADERS.names)

/** Refused by (case-insensitive) prefix. */
const refusedPrefixes: ReadonlyArray<string> = TRANSPORT_HEADERS.prefixes

/** RFC 9110 `token`: the only characters a field name may have. */
const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/

export type HeaderVerdict =
  | { readonly _tag: "Ok"; readonly headers: ReadonlyArray<readonly [name: string, value: string]> }
  | {
    readonly _tag: "Refused"
    /** The first refused header and why (what `field` of the problem names). */
    readonly field: string
    readonly message: string
    /** Every refused header with its reason, in the order given. */
    readonly problems: ReadonlyArray<{ readonly field: string; readonly message: string }>
  }

const IDENTIFIER = /^[A-Za-z_$][A-Za-z0-9_$-]*$/

/** `headers.Authorization`, or `headers["odd name"]` when the name is not identifier-like. */
export const headerField = (name: string): string =>
  IDENTIFIER.test(name) ? `headers.${name}` : `headers[${JSON.stringify(name)}]`

/**
 * A value may hold visible characters, spaces, tabs and the Latin-1 part of
 * obs-text (RFC 9110 `field-value`); anything else (CR, LF, NUL, other C0
 * controls, DEL, the C1 controls U+0080-U+009F, or a character a header
 * cannot carry) is refused.
 */
const isAcceptedValue = (value: string): boolean => {
  for (let i = 0; i < value.length; i++) {
    const code = value.charCodeAt(i)
    if (code === 0x09) continue
    if (code < 0x20 || (code >= 0x7f && code <= 0x9f) || code > 0xff) return false
  }
  return Buffer.byteLength(value, "utf8") <= MAX_VALUE_BYTES
}

/** Headers the sender sets itself, refused beside the rules above: by exact (lower-case) name or by prefix. */
export interface OwnHeaders {
  readonly names: ReadonlySet<string>
  readonly prefixes: ReadonlyArray<string>
}

const NONE: OwnHeaders = { names: new Set(), prefixes: [] }

/** Why one header is refused, or `undefined` when it is accepted (`seen`: lower-case names before it). */
const refusal = (name: string, value: unknown, seen: Set<string>, own: OwnHeaders): string | undefined => {
  if (!TOKEN.test(name)) return "the header name is not a valid HTTP field name"
  const lower = name.toLowerCase()
  if (seen.has(lower)) return "the header is given twice (names are case-insensitive)"
  seen.add(lower)
  if (own.names.has(lower) || own.prefixes.some((prefix) => lower.startsWith(prefix))) {
    return "svc sets this header itself and it cannot be replaced"
  }
  if (refusedNames.has(lower) || refusedPrefixes.some((prefix) => lower.startsWith(prefix))) {
    return "transport, hop-by-hop, trace-context and cookie headers are not accepted"
  }
  if (typeof value !== "string" || !isAcceptedValue(value)) {
    return `the header value must be at most ${MAX_VALUE_BYTES} bytes without line breaks or other control characters`
  }
  return undefined
}

/** Checks every header and reports every refused one at once, each with its reason. */
export const checkHeaders = (headers: Readonly<Record<string, string>>, own: OwnHeaders = NONE): HeaderVerdict => {
  const entries = Object.entries(headers)
  if (entries.length > MAX_HEADERS) {
    const message = `at most ${MAX_HEADERS} headers are accepted`
    return { _tag: "Refused", field: "headers", message, problems: [{ field: "headers", message }] }
  }
  const seen = new Set<string>()
  const problems: Array<{ readonly field: string; readonly message: string }> = []
  for (const [name, value] of entries) {
    const message = refusal(name, value, seen, own)
    if (message !== undefined) problems.push({ field: headerField(name), message })
  }
  const [first] = problems
  return first === undefined
    ? { _tag: "Ok", headers: entries }
    : { _tag: "Refused", field: first.field, message: first.message, problems }
}
