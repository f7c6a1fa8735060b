/**
 * The one guarded client for every outbound request of `svc` (webhook
 * deliveries, telemetry export, collector tests). Nothing else in `svc`
 * opens an outbound connection.
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
 *   (resolution, connect, TLS, headers, body), response body read up to
 *   `maxResponseBytes`. A `repeatable` request whose connection is closed
 *   or reset before any answer is sent once more on a new connection.
 *
 * Address classes: `AddressPolicy.ts`. URL rules and names: `TargetUrl.ts`.
 * Name resolution (replaceable in tests): `Resolver.ts`.
 */
import { Clock, Context, Duration, Effect, Layer, type Tracer } from "effect"
import { Resolver as DnsResolver } from "node:dns/promises"
import { SvcConfig } from "../platform/Config.ts"
import { type Address, type Cidr, judge, parseAddress, parseCidrs, unmap } from "./AddressPolicy.ts"
import { directExchange } from "./DirectExchange.ts"
import { makePools, trustedCas } from "./Pools.ts"
import {
  type CheckedUrl,
  makePrepare,
  OutboundFailure,
  type OutboundRequest,
  type OutboundResponse,
  UnsafeUrl
} from "./Request.ts"
import { networkResolver, Resolver } from "./Resolver.ts"
import { type Parsed, parseTarget, type Target } from "./TargetUrl.ts"

export { type CheckedUrl, OutboundFailure, type OutboundRequest, type OutboundResponse, UnsafeUrl } from "./Request.ts"

/** How long `check` waits for DNS before refusing the URL as unresolvable. */
const CHECK_RESOLVE_TIMEOUT = Duration.seconds(5)

const unsafe = (message: string) => new OutboundFailure({ reason: "unsafe_target", message })

/** The address to connect to for an IP literal host, checked; or why not. */
const checkLiteral = (address: Address, allowed: ReadonlyArray<Cidr>): ReadonlyArray<Address> | OutboundFailure => {
  const verdict = judge(address, allowed)
  return verdict.public ? [unmap(address)] : unsafe(`the host is a non-public address (${verdict.range})`)
}

/** What a failed resolution says: the code, and for our own limits which setting it was. */
const unresolvedMessage = (code: string) =>
  `the host name does not resolve (${
    code === "EBUSY"
      ? "DNS busy: this organization has too many lookups in flight, SVC_DNS_LOOKUPS_PER_ORG"
      : code === "ETIMEOUT"
      ? "DNS timeout: no answer from the DNS servers within SVC_DNS_TIMEOUT x SVC_DNS_TRIES"
      : code
  })`

export class OutboundHttp extends Context.Service<OutboundHttp, {
  /**
   * `orgId`: whose URL it is (DNS lookups are bounded per organization).
   * `parse`: the URL rules (default `https` only, `parseTarget`).
   */
  readonly check: (url: string, orgId?: string, parse?: (raw: string) => Parsed) => Effect.Effect<CheckedUrl, UnsafeUrl>
  /**
   * The addresses a connection of another protocol (a broker's) may go to:
   * the target's host resolved once, every address checked, within `timeoutMs`.
   */
  readonly addresses: (
    target: Target,
    orgId: string,
    timeoutMs: number
  ) => Effect.Effect<ReadonlyArray<Address>, OutboundFailure>
  readonly send: (request: OutboundRequest) => Effect.Effect<OutboundResponse, OutboundFailure>
  /**
   * `send` without a fiber of its own (`DirectExchange.ts`): the same checks
   * and exchange, the request's attributes put on `span`, `done` called once
   * with the answer or the failure (never synchronously).
   */
  readonly sendDirect: (
    request: OutboundRequest,
    span: Tracer.Span,
    done: (result: OutboundResponse | OutboundFailure) => void
  ) => void
}>()("svc/outbound/OutboundHttp") {
  /**
   * Reads `allowedTargetCidrs` and `extraCaFile` from `SvcConfig` once (an
   * invalid CIDR or an unreadable CA file stops the service from starting).
   * Uses the `Resolver` reference when provided, else the network resolver
   * with `SVC_DNS_*` (an invalid DNS server stops the service from
   * starting). Connection pools live as long as the layer.
   */
  static readonly layer = Layer.effect(
    OutboundHttp,
    Effect.gen(function*() {
      const config = yield* SvcConfig
      if (config.dnsServers.length > 0) {
        yield* Effect.try({
          try: () => new DnsResolver().setServers([...config.dnsServers]),
          catch: () =>
            new Error(`SVC_DNS_SERVERS: not a list of IP addresses with optional ports: ${config.dnsServers.join(",")}`)
        }).pipe(Effect.orDie)
      }
      const resolver = (yield* Resolver) ?? networkResolver({
        servers: config.dnsServers,
        timeoutMs: config.dnsTimeoutMs,
        tries: config.dnsTries,
        lookupsPerOrg: config.dnsLookupsPerOrg,
        clock: yield* Clock.Clock
      })
      const { cidrs: allowed, invalid } = parseCidrs(config.allowedTargetCidrs)
      if (invalid.length > 0) {
        return yield* Effect.die(new Error(`SVC_ALLOWED_TARGET_CIDRS: not a CIDR: ${invalid.join(", ")}`))
      }
      const ca = yield* trustedCas(config.extraCaFile._tag === "Some" ? config.extraCaFile.value : undefined)
      const { exchange } = yield* makePools(ca)
      const prepare = makePrepare()

      /** The attributes a send gives its caller's span, before and after the exchange. */
      const requestAttributes = (request: OutboundRequest, target: Target) => ({
        "http.request.method": request.method,
        "server.address": target.url.hostname,
        "server.port": target.port,
        "svc.url_hint": target.hint
      })

      /**
       * The addresses to connect to, every one of them checked; or why not.
       * One resolution, never more: the caller connects to exactly these. A
       * name resolves within `timeoutMs` (a send's: its deadline over the
       * whole exchange).
       */
      const addresses = (
        target: Target,
        orgId: string | undefined,
        timeoutMs: number
      ): Effect.Effect<ReadonlyArray<Address>, OutboundFailure> => {
        const host = target.host
        if (host._tag === "Ip") {
          const checked = checkLiteral(host.address, allowed)
          return checked instanceof OutboundFailure ? Effect.fail(checked) : Effect.succeed(checked)
        }
        const unresolved = (code: string) =>
          new OutboundFailure({ reason: "network", message: unresolvedMessage(code) })
        return resolver.resolve(host.name, orgId).pipe(
          Effect.mapError((failure) => unresolved(failure.code)),
          Effect.flatMap((answers) => {
            const checked: Array<Address> = []
            for (const answer of answers) {
              const address = parseAddress(answer)
              // Every answer must be public: connecting to "one of them" would let a
              // name with one public and one private address reach the private one.
              if (address === undefined || !judge(address, allowed).public) {
                return Effect.fail(unsafe("the host resolves to a non-public address"))
              }
              checked.push(unmap(address))
            }
            return checked.length === 0 ? Effect.fail(unresolved("ENODATA")) : Effect.succeed(checked)
          }),
          Effect.timeoutOrElse({
            duration: timeoutMs,
            orElse: () =>
              Effect.fail(new OutboundFailure({ reason: "timeout", message: unresolvedMessage("ETIMEOUT") }))
          })
        )
      }

      const check = Effect.fn("OutboundHttp.check")(function*(raw: string, orgId?: string, parse = parseTarget) {
        const parsed = parse(raw)
        if (parsed._tag === "Refused") return yield* new UnsafeUrl({ message: parsed.message })
        yield* addresses(parsed.target, orgId, Duration.toMillis(CHECK_RESOLVE_TIMEOUT)).pipe(
          Effect.mapError((failure) => new UnsafeUrl({ message: failure.message }))
        )
        return { url: parsed.target.url.href, urlHint: parsed.target.hint }
      })

      // Untraced: its attributes go on the caller's span (one span per
      // delivery, not two).
      const send = Effect.fnUntraced(function*(request: OutboundRequest) {
        const prepared = prepare(request)
        if (prepared instanceof OutboundFailure) return yield* prepared
        yield* Effect.annotateCurrentSpan(requestAttributes(request, prepared.target))
        const checked = yield* addresses(prepared.target, request.orgId, prepared.timeoutMs)
        const result = yield* Effect.callback<OutboundResponse, OutboundFailure>((resume) => {
          const abort = exchange(request, prepared, checked, (result) => {
            resume(result instanceof OutboundFailure ? Effect.fail(result) : Effect.succeed(result))
          })
          // Interrupted (the caller gave up): abort the request.
          return Effect.sync(abort)
        })
        yield* Effect.annotateCurrentSpan({ "http.response.status_code": result.status })
        return result
      })

      const sendDirect = directExchange({
        prepare,
        requestAttributes,
        literal: (prepared) => {
          const host = prepared.target.host
          return host._tag === "Ip" ? checkLiteral(host.address, allowed) : undefined
        },
        addresses,
        exchange,
        context: yield* Effect.context<never>()
      })

      return { check, send, sendDirect, addresses }
    })
  )
}
