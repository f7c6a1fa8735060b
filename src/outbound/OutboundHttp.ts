/**
 * CONTRACT (implementation pending in this folder): the one guarded client
 * for every outbound request of `svc` (webhook deliveries, telemetry
 * export, collector tests).
 *
 * - `check(url)` on create: `https` only, no credentials, host (after WHATWG
 *   URL normalisation: decimal/octal/hex/short IPv4, IDN) not a metadata
 *   name and not resolving to any non-public address class, unless inside
 *   `SVC_ALLOWED_TARGET_CIDRS`. Answers the normalised URL and a `url_hint`
 *   (scheme + host + masked path) safe to show.
 * - `send(request)` at every send: the same checks again on a fresh
 *   resolution, then the connection goes to the checked address (no second
 *   DNS lookup), TLS verified against the system store plus
 *   `SVC_EXTRA_CA_FILE` with SNI/hostname of the URL, redirects never
 *   followed (a 3xx is just a status), one deadline over the whole exchange
 *   (connect, headers, body), response body read up to `maxResponseBytes`.
 */
import { Context, Data, type Duration, type Effect } from "effect"

export interface CheckedUrl {
  /** The URL as the WHATWG parser normalised it. */
  readonly url: string
  /** Safe to show: `https://hooks.example.com/…/abcd` style, never credentials or the full path. */
  readonly urlHint: string
}

/** Why a URL is refused; `message` never echoes credentials. */
export class UnsafeUrl extends Data.TaggedError("UnsafeUrl")<{ readonly message: string }> {}

export interface OutboundRequest {
  readonly url: string
  readonly method: "POST" | "GET"
  readonly headers: Readonly<Record<string, string>>
  readonly body?: Uint8Array | string | undefined
  /** Deadline for the whole exchange. */
  readonly timeout: Duration.Input
  /** How much of the response body to keep (default 4 KiB). */
  readonly maxResponseBytes?: number | undefined
}

export interface OutboundResponse {
  readonly status: number
  readonly headers: Readonly<Record<string, string>>
  /** The first `maxResponseBytes` of the body. */
  readonly body: Uint8Array
  readonly elapsedMs: number
}

/** A request that got no HTTP answer: refused target, timeout, network or TLS failure. */
export class OutboundFailure extends Data.TaggedError("OutboundFailure")<{
  readonly reason: "unsafe_target" | "timeout" | "network" | "tls"
  readonly message: string
}> {}

export class OutboundHttp extends Context.Service<OutboundHttp, {
  readonly check: (url: string) => Effect.Effect<CheckedUrl, UnsafeUrl>
  readonly send: (request: OutboundRequest) => Effect.Effect<OutboundResponse, OutboundFailure>
}>()("svc/outbound/OutboundHttp") {}
