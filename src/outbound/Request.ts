/**
 * What an outbound request is, what it answers, and how it fails: the
 * types every caller of `OutboundHttp` and its steps share, and the
 * preparation of a send (deadline, parsed target) before anything is
 * resolved.
 */
import { Data, Duration } from "effect"
import { parseTarget, type Target } from "./TargetUrl.ts"

export interface CheckedUrl {
  /** The URL as the WHATWG parser normalised it (fragment removed). Store this one. */
  readonly url: string
  /** Safe to show: `https://hooks.example.com/…/abcd` style, never credentials, the query or the full path. */
  readonly urlHint: string
}

/** Why a URL is refused; `message` never echoes the URL or its credentials. */
export class UnsafeUrl extends Data.TaggedError("UnsafeUrl")<{ readonly message: string }> {}

/** A client certificate to present in the TLS handshake (mutual TLS); `id` names this certificate and key. */
export interface ClientCertificate {
  readonly id: string
  /** PEM, leaf first, then any intermediates. */
  readonly certificate: string
  readonly privateKey: string
}

export interface OutboundRequest {
  readonly url: string
  readonly method: "POST" | "GET"
  /** Sent as given, except `accept-encoding`, which is always `identity` (we never decompress). */
  readonly headers: Readonly<Record<string, string>>
  readonly body?: Uint8Array | string | undefined
  /** Deadline for the whole exchange: resolution, connect, TLS, headers and body. */
  readonly timeout: Duration.Input
  /** How much of the response body to keep (default 4 KiB); reading stops there. */
  readonly maxResponseBytes?: number | undefined
  /**
   * Connections are pooled per origin, checked addresses and partition.
   * Callers whose targets must not hold up each other (two webhook endpoints
   * on one host, one of them hanging) pass the target's id: each gets its
   * own pool, so one target's stuck requests never queue another's.
   */
  readonly partition?: string | undefined
  /**
   * Most connections the pool of this request keeps to the origin (default
   * 32). A caller that bounds its own requests to the origin passes the same
   * bound: then no request ever queues behind another in the pool.
   */
  readonly connections?: number | undefined
  /** Whose request this is: DNS lookups in flight are bounded per organization. */
  readonly orgId?: string | undefined
  /** Presented when the server asks for one; its connections have a pool of their own. */
  readonly clientCertificate?: ClientCertificate | undefined
  /**
   * The request is safe to send twice (it changes nothing the first sending
   * did not): when its connection is closed or reset before any answer (a
   * kept-alive connection the server closed as the request went out), it is
   * sent once more, on another connection, within the same deadline. Never
   * for a request that may have acted.
   */
  readonly repeatable?: boolean | undefined
}

export interface OutboundResponse {
  readonly status: number
  /** Lower-case names; repeated headers joined with `, `. */
  readonly headers: Readonly<Record<string, string>>
  /** The first `maxResponseBytes` of the body. */
  readonly body: Uint8Array
  /** True when the body was longer than `maxResponseBytes` (or its end was not awaited). */
  readonly truncated: boolean
  readonly elapsedMs: number
}

/**
 * A request that got no (complete) HTTP answer: refused target, timeout,
 * network or TLS failure. `message` never contains URL credentials, the
 * URL's path or query, request headers or bodies.
 */
export class OutboundFailure extends Data.TaggedError("OutboundFailure")<{
  readonly reason: "unsafe_target" | "timeout" | "network" | "tls"
  readonly message: string
}> {}

const DEFAULT_MAX_RESPONSE_BYTES = 4096

/** What a send needs before it resolves anything: its deadline, its parsed target, and where it reads to. */
export interface Prepared {
  /** `performance.now()` when the send began. */
  readonly started: number
  readonly timeoutMs: number
  readonly target: Target
  readonly maxBytes: number
}

/** `f` of a URL, remembered for the last `kept` URLs (a burst sends to one endpoint again and again); `f` must be pure. */
export const perUrl = <A>(kept: number, f: (url: string) => A) => {
  const known = new Map<string, A>()
  return (url: string): A => {
    let found = known.get(url)
    if (found === undefined) {
      if (known.size >= kept) known.clear()
      found = f(url)
      known.set(url, found)
    }
    return found
  }
}

/**
 * A send's first step. Parsing is pure, so a URL sent to again and again is
 * parsed once (the address checks that need DNS still run at every send).
 */
export const makePrepare = () => {
  const parseCached = perUrl(1_024, parseTarget)
  return (request: OutboundRequest): Prepared | OutboundFailure => {
    const started = performance.now()
    const timeoutMs = Duration.toMillis(request.timeout)
    if (!(timeoutMs > 0)) {
      return new OutboundFailure({ reason: "timeout", message: "the deadline had passed before sending" })
    }
    const parsed = parseCached(request.url)
    if (parsed._tag === "Refused") return new OutboundFailure({ reason: "unsafe_target", message: parsed.message })
    return {
      started,
      timeoutMs,
      target: parsed.target,
      maxBytes: request.maxResponseBytes ?? DEFAULT_MAX_RESPONSE_BYTES
    }
  }
}

const errorCodes = (error: unknown): ReadonlyArray<string> => {
  const codes: Array<string> = []
  const seen = new Set<unknown>()
  const visit = (value: unknown, depth: number) => {
    if (depth > 5 || typeof value !== "object" || value === null || seen.has(value)) return
    seen.add(value)
    if ("code" in value && typeof value.code === "string") codes.push(value.code)
    if ("cause" in value) visit(value.cause, depth + 1)
    if (value instanceof AggregateError) { for (const inner of value.errors) visit(inner, depth + 1) }
  }
  visit(error, 0)
  return codes
}

/** Codes of a connection the server closed or reset (undici's `other side closed` is `UND_ERR_SOCKET`). */
const closedCodes = new Set(["UND_ERR_SOCKET", "ECONNRESET", "EPIPE"])

/** Whether what undici threw is the connection closed or reset under the request (not a refusal, TLS or timeout). */
export const isClosedConnection = (error: unknown): boolean => errorCodes(error).some((code) => closedCodes.has(code))

const tlsCode =
  /^(ERR_TLS_|ERR_SSL_|ERR_OSSL_|CERT_|UNABLE_TO_|DEPTH_ZERO_SELF_SIGNED_CERT|SELF_SIGNED_CERT_IN_CHAIN|HOSTNAME_MISMATCH|INVALID_CA|INVALID_PURPOSE|PATH_LENGTH_EXCEEDED|ERR_TLS)/
const timeoutCode = /^(UND_ERR_CONNECT_TIMEOUT|ETIMEDOUT)$/

/**
 * Maps what undici or Node threw to our failure. Only error codes are kept:
 * the libraries' messages may contain host names, addresses or header text.
 * undici's headers and body timeouts are backstops set to the exchange's
 * deadline (`Pools.ts`): whichever fires first, it or the deadline's own
 * timer, the failure is `deadline`'s.
 */
export const toFailure = (error: unknown, deadline: () => OutboundFailure): OutboundFailure => {
  const codes = errorCodes(error)
  if (codes.includes("UND_ERR_HEADERS_TIMEOUT") || codes.includes("UND_ERR_BODY_TIMEOUT")) return deadline()
  const tlsFailure = codes.find((code) => tlsCode.test(code))
  if (tlsFailure !== undefined) {
    return new OutboundFailure({ reason: "tls", message: `TLS verification or handshake failed (${tlsFailure})` })
  }
  const timeout = codes.find((code) => timeoutCode.test(code))
  if (timeout !== undefined) {
    return new OutboundFailure({ reason: "timeout", message: `the exchange timed out (${timeout})` })
  }
  if (codes.includes("UND_ERR_INVALID_ARG")) {
    return new OutboundFailure({
      reason: "network",
      message: "the request was refused before sending (invalid method, header or body)"
    })
  }
  return new OutboundFailure({
    reason: "network",
    message: `the connection failed (${codes[0] ?? "unknown error"})`
  })
}
