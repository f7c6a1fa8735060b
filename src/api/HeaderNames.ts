/**
 * The headers an organization may add to what svc sends (a collector's and
 * a webhook endpoint's custom headers), stated in the schema so the
 * document says them: at most 10 (`maxProperties`), each name an RFC 9110
 * token (`HeaderName`) that is not a transport, hop-by-hop, trace-context
 * or cookie header, nor (for webhooks) one svc sets itself (`propertyNames`
 * with a `not` pattern, any case). Answered `INVALID_HEADERS` naming the
 * header. What JSON Schema cannot say (two names differing only in case, a
 * value's UTF-8 length) the service checks (`src/outbound/HeaderRules.ts`).
 */
import { Schema } from "effect"
import { answeredAs, HeaderName, HeaderValue } from "./Common.ts"

/** At most this many custom headers. */
export const MAX_HEADERS = 10

/** Names refused by exact name or by prefix (lower case; compared in any case). */
export interface RefusedHeaders {
  readonly names: ReadonlyArray<string>
  readonly prefixes: ReadonlyArray<string>
}

/** Transport and hop-by-hop headers (svc frames the request), trace context (an export must not join or fake a trace), cookies. */
export const TRANSPORT_HEADERS: RefusedHeaders = {
  names: [
    "host",
    "connection",
    "keep-alive",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
    "content-length",
    "expect",
    "content-type",
    "content-encoding",
    "traceparent",
    "tracestate",
    "baggage",
    "b3",
    "uber-trace-id",
    "x-amzn-trace-id",
    "x-cloud-trace-context",
    "cookie",
    "set-cookie"
  ],
  prefixes: ["proxy-", "x-b3-", "uberctx-", "ot-tracer-"]
}

/**
 * The headers a webhook delivery's sender sets itself (`X-Svc-*`,
 * `webhook-*`, and the outbound client's `user-agent` and
 * `accept-encoding`): an endpoint's custom headers may not replace them.
 */
export const WEBHOOK_OWN_HEADERS: RefusedHeaders = {
  names: ["content-type", "user-agent", "accept-encoding"],
  prefixes: ["x-svc-", "webhook-"]
}

const anyCase = (text: string) => [...text].map((c) => /[a-z]/.test(c) ? `[${c}${c.toUpperCase()}]` : c).join("")

/** A pattern every dialect reads that matches the refused names in any case. */
const refusedPattern = (refused: ReadonlyArray<RefusedHeaders>) => {
  const names = refused.flatMap((set) => set.names).map(anyCase)
  const prefixes = refused.flatMap((set) => set.prefixes).map(anyCase)
  return `^(?:(?:${[...new Set(names)].join("|")})$|${[...new Set(prefixes)].join("|")})`
}

/** The custom headers' map: names and values checked by their schemas, at most `MAX_HEADERS`. */
export const CustomHeaders = (refused: ReadonlyArray<RefusedHeaders>, description: string) => {
  const pattern = new RegExp(refusedPattern(refused), "u")
  const message = "Expected a header svc may send: not a transport, hop-by-hop, trace-context or cookie header" +
    (refused.includes(WEBHOOK_OWN_HEADERS)
      ? ", nor one svc sets itself (Content-Type, User-Agent, Accept-Encoding, X-Svc-*, webhook-*)"
      : "")
  const name = HeaderName.check(
    Schema.makeFilter((value: string) => !pattern.test(value) || message, {
      toJsonSchema: () => ({ not: { pattern: pattern.source } }),
      ...answeredAs("INVALID_HEADERS")
    })
  )
  return Schema.Record(name, HeaderValue)
    .check(
      Schema.isMaxProperties(MAX_HEADERS, {
        message: `Expected at most ${MAX_HEADERS} headers`,
        ...answeredAs("INVALID_HEADERS")
      })
    )
    .annotate({ description })
}
