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
 *   `maxResponseBytes`.
 *
 * Address classes: `AddressPolicy.ts`. URL rules and names: `TargetUrl.ts`.
 * Name resolution (replaceable in tests): `Resolver.ts`.
 */
import { Clock, Context, Data, Duration, Effect, Layer, type Tracer } from "effect"
import { readFileSync } from "node:fs"
import * as tls from "node:tls"
import { buildConnector, Pool } from "undici"
import { SvcConfig } from "../platform/Config.ts"
import { type Address, type Cidr, judge, parseAddress, parseCidrs, unmap } from "./AddressPolicy.ts"
import { Resolver as DnsResolver } from "node:dns/promises"
import { networkResolver, Resolver, type ResolverShape } from "./Resolver.ts"
import { directExchange } from "./DirectExchange.ts"
import { startExchange } from "./Exchange.ts"
import { requestHeaders } from "./RequestHeaders.ts"
import { parseTarget, type Target } from "./TargetUrl.ts"

export interface CheckedUrl {
  /** The URL as the WHATWG parser normalised it (fragment removed). Store this one. */
  readonly url: string
  /** Safe to show: `https://hooks.example.com/…/abcd` style, never credentials, the query or the full path. */
  readonly urlHint: string
}

/** Why a URL is refused; `message` never echoes the URL or its credentials. */
export class UnsafeUrl extends Data.TaggedError("UnsafeUrl")<{ readonly message: string }> {}

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

export const DEFAULT_MAX_RESPONSE_BYTES = 4096

/** How long an idle connection pool for one (origin, checked addresses) pair is kept. */
const POOL_IDLE_TTL = Duration.minutes(1)
/** Connections per pool; the callers (delivery workers) bound their own concurrency. */
const POOL_CONNECTIONS = 32
const PARSED_URLS_KEPT = 1_024
/** How long `check` waits for DNS before refusing the URL as unresolvable. */
const CHECK_RESOLVE_TIMEOUT = Duration.seconds(5)

// ---------------------------------------------------------------------------
// Resolving and judging a target

export type Refusal = { readonly _tag: "Refused"; readonly message: string }
type Unresolved = { readonly _tag: "Unresolved"; readonly code: string }

/** The address to connect to for an IP literal host, checked; or why not. */
export const checkLiteral = (address: Address, allowed: ReadonlyArray<Cidr>): ReadonlyArray<Address> | Refusal => {
  const verdict = judge(address, allowed)
  return verdict.public ? [unmap(address)] : { _tag: "Refused", message: `the host is a non-public address (${verdict.range})` }
}

/**
 * The addresses to connect to, every one of them checked; or why not.
 * One resolution, never more: the caller connects to exactly these.
 */
const resolveTarget = (
  target: Target,
  allowed: ReadonlyArray<Cidr>,
  resolver: ResolverShape,
  orgId: string | undefined
): Effect.Effect<ReadonlyArray<Address>, Refusal | Unresolved> => {
  const host = target.host
  if (host._tag === "Ip") {
    const checked = checkLiteral(host.address, allowed)
    return "_tag" in checked ? Effect.fail(checked) : Effect.succeed(checked)
  }
  return resolver.resolve(host.name, orgId).pipe(
    Effect.mapError((failure): Unresolved => ({ _tag: "Unresolved", code: failure.code })),
    Effect.flatMap((answers): Effect.Effect<ReadonlyArray<Address>, Refusal | Unresolved> => {
      const addresses: Array<Address> = []
      for (const answer of answers) {
        const address = parseAddress(answer)
        // Every answer must be public: connecting to "one of them" would let a
        // name with one public and one private address reach the private one.
        if (address === undefined || !judge(address, allowed).public) {
          return Effect.fail({ _tag: "Refused", message: "the host resolves to a non-public address" })
        }
        addresses.push(unmap(address))
      }
      return addresses.length === 0
        ? Effect.fail({ _tag: "Unresolved", code: "ENODATA" })
        : Effect.succeed(addresses)
    })
  )
}

const refused = (refusal: Refusal) => new OutboundFailure({ reason: "unsafe_target", message: refusal.message })

/** What a send needs before it resolves anything: its deadline, its parsed target, and where it reads to. */
export interface Prepared {
  /** `performance.now()` when the send began. */
  readonly started: number
  readonly timeoutMs: number
  readonly target: Target
  readonly maxBytes: number
}

// ---------------------------------------------------------------------------
// Connection pools pinned to checked addresses

interface PoolKey {
  /** `https://host[:port]`, what the Host header and SNI come from. */
  readonly origin: string
  /** The checked addresses, the only ones this pool's sockets connect to. */
  readonly addresses: ReadonlyArray<string>
  readonly partition: string
  readonly connections: number
}

const familyOf = (address: string) => (address.includes(":") ? 6 : 4)

/**
 * A `lookup` for `net.connect` that answers the checked addresses instead of
 * asking DNS again. Node calls it with `all: true` when it races address
 * families (happy eyeballs), with a single answer expected otherwise.
 */
const pinnedLookup = (addresses: ReadonlyArray<string>) =>
(
  _hostname: string,
  options: unknown,
  callback: (error: Error | null, address: string | Array<{ address: string; family: number }>, family?: number) => void
) => {
  const all = typeof options === "object" && options !== null && "all" in options && options.all === true
  if (all) {
    callback(null, addresses.map((address) => ({ address, family: familyOf(address) })))
  } else {
    callback(null, addresses[0], familyOf(addresses[0]))
  }
}

const makePool = (key: PoolKey, trust: tls.SecureContext) => {
  const url = new URL(key.origin)
  const literal = parseAddress(url.hostname)
  const connector = buildConnector({
    // Built once from the trusted CAs: given `ca` instead, every new
    // connection would parse the whole root store again (~15 ms each).
    secureContext: trust,
    rejectUnauthorized: true,
    // HTTP/1.1 only: one well-understood framing, no h2 stream multiplexing
    // surprises across deliveries.
    allowH2: false,
    lookup: pinnedLookup(key.addresses)
  })
  return new Pool(key.origin, {
    connections: key.connections,
    allowH2: false,
    keepAliveTimeout: 10_000,
    keepAliveMaxTimeout: 60_000,
    connect: (options, callback) =>
      // An IP literal is never looked up by Node, so the pinned lookup does not
      // apply: connect to the checked form of it (an IPv4-mapped literal to
      // its IPv4 address). A name keeps its hostname (SNI and certificate
      // hostname come from it) and reaches the address through the lookup.
      connector(literal === undefined ? options : { ...options, hostname: key.addresses[0] }, callback)
  })
}

interface PoolEntry {
  readonly pool: Pool
  /** Exchanges in flight through it. */
  active: number
  /** `performance.now()` when its last exchange ended. */
  idleSince: number
}

// ---------------------------------------------------------------------------
// Failures

const errorCodes = (error: unknown): ReadonlyArray<string> => {
  const codes: Array<string> = []
  const seen = new Set<unknown>()
  const visit = (value: unknown, depth: number) => {
    if (depth > 5 || typeof value !== "object" || value === null || seen.has(value)) return
    seen.add(value)
    if ("code" in value && typeof value.code === "string") codes.push(value.code)
    if ("cause" in value) visit(value.cause, depth + 1)
    if (value instanceof AggregateError) for (const inner of value.errors) visit(inner, depth + 1)
  }
  visit(error, 0)
  return codes
}

const tlsCode = /^(ERR_TLS_|ERR_SSL_|ERR_OSSL_|CERT_|UNABLE_TO_|DEPTH_ZERO_SELF_SIGNED_CERT|SELF_SIGNED_CERT_IN_CHAIN|HOSTNAME_MISMATCH|INVALID_CA|INVALID_PURPOSE|PATH_LENGTH_EXCEEDED|ERR_TLS)/
const timeoutCode = /^(UND_ERR_CONNECT_TIMEOUT|UND_ERR_HEADERS_TIMEOUT|UND_ERR_BODY_TIMEOUT|ETIMEDOUT)$/

/**
 * Maps what undici or Node threw to our failure. Only error codes are kept:
 * the libraries' messages may contain host names, addresses or header text.
 */
const toFailure = (error: unknown): OutboundFailure => {
  const codes = errorCodes(error)
  const tlsFailure = codes.find((code) => tlsCode.test(code))
  if (tlsFailure !== undefined) {
    return new OutboundFailure({ reason: "tls", message: `TLS verification or handshake failed (${tlsFailure})` })
  }
  const timeout = codes.find((code) => timeoutCode.test(code))
  if (timeout !== undefined) {
    return new OutboundFailure({ reason: "timeout", message: `the exchange timed out (${timeout})` })
  }
  if (codes.includes("UND_ERR_INVALID_ARG")) {
    return new OutboundFailure({ reason: "network", message: "the request was refused before sending (invalid method, header or body)" })
  }
  return new OutboundFailure({
    reason: "network",
    message: `the connection failed (${codes[0] ?? "unknown error"})`
  })
}

// ---------------------------------------------------------------------------
// Trust

/** The CA certificates outbound TLS trusts: Node's default store plus the extra PEM bundle (exported for tests). */
export const trustedCas = (extraCaFile: string | undefined): Effect.Effect<ReadonlyArray<string>> =>
  Effect.gen(function*() {
    // `getCACertificates("default")` is what Node itself trusts (bundled
    // Mozilla roots, plus NODE_EXTRA_CA_CERTS and the OS store when Node is
    // told to use them); `rootCertificates` is the bundled set alone.
    const base = typeof tls.getCACertificates === "function"
      ? tls.getCACertificates("default")
      : [...tls.rootCertificates]
    if (extraCaFile === undefined) return base
    const pem = yield* Effect.try({
      try: () => readFileSync(extraCaFile, "utf8"),
      catch: () => new Error(`SVC_EXTRA_CA_FILE: cannot read ${extraCaFile}`)
    }).pipe(Effect.orDie)
    const certificates = pem.match(/-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g) ?? []
    if (certificates.length === 0) {
      return yield* Effect.die(new Error(`SVC_EXTRA_CA_FILE: ${extraCaFile} holds no PEM certificate`))
    }
    return [...base, ...certificates]
  })

// ---------------------------------------------------------------------------
// The service

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
  /** `orgId`: whose URL it is (DNS lookups are bounded per organization). */
  readonly check: (url: string, orgId?: string) => Effect.Effect<CheckedUrl, UnsafeUrl>
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
          catch: () => new Error(`SVC_DNS_SERVERS: not a list of IP addresses with optional ports: ${config.dnsServers.join(",")}`)
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
      const trust = tls.createSecureContext({ ca: [...ca] })

      // Pools by key, each with its exchanges in flight; one idle for
      // POOL_IDLE_TTL is destroyed by the sweep. A plain map, not a scoped
      // resource per send: looking a pool up costs a string key and a get.
      const pools = new Map<string, PoolEntry>()
      const poolFor = (key: PoolKey) => {
        const id = `${key.origin} ${key.addresses.join(",")} ${key.partition} ${key.connections}`
        let entry = pools.get(id)
        if (entry === undefined) {
          entry = { pool: makePool(key, trust), active: 0, idleSince: performance.now() }
          pools.set(id, entry)
        } else {
          // Taken now: not idle, whatever happens before its exchange starts.
          entry.idleSince = performance.now()
        }
        return entry
      }
      const idleTtlMs = Duration.toMillis(POOL_IDLE_TTL)
      const destroy = (entry: PoolEntry) => entry.pool.destroy().catch(() => undefined)
      yield* Effect.sync(() => {
        const now = performance.now()
        for (const [id, entry] of pools) {
          if (entry.active === 0 && now - entry.idleSince > idleTtlMs) {
            pools.delete(id)
            void destroy(entry)
          }
        }
      }).pipe(Effect.delay(Duration.millis(idleTtlMs / 4)), Effect.forever, Effect.forkScoped)
      // Destroy, not close: nothing uses an idle pool, and at shutdown an
      // exchange still in flight must not hold the layer open.
      yield* Effect.addFinalizer(() =>
        Effect.promise(() => {
          const all = [...pools.values()]
          pools.clear()
          return Promise.all(all.map(destroy))
        })
      )

      const check = Effect.fn("OutboundHttp.check")(function*(raw: string, orgId?: string) {
        const parsed = parseTarget(raw)
        if (parsed._tag === "Refused") return yield* new UnsafeUrl({ message: parsed.message })
        yield* resolveTarget(parsed.target, allowed, resolver, orgId).pipe(
          Effect.timeoutOrElse({
            duration: CHECK_RESOLVE_TIMEOUT,
            orElse: () => Effect.fail<Unresolved>({ _tag: "Unresolved", code: "ETIMEOUT" })
          }),
          Effect.mapError((problem) =>
            new UnsafeUrl({
              message: problem._tag === "Refused" ? problem.message : unresolvedMessage(problem.code)
            })
          )
        )
        return { url: parsed.target.url.href, urlHint: parsed.target.hint }
      })

      // Parsing is pure, so a URL sent to again and again is parsed once (the
      // address checks that need DNS still run at every send).
      const parsedUrls = new Map<string, ReturnType<typeof parseTarget>>()
      const parseCached = (url: string) => {
        let parsed = parsedUrls.get(url)
        if (parsed === undefined) {
          if (parsedUrls.size >= PARSED_URLS_KEPT) parsedUrls.clear()
          parsed = parseTarget(url)
          parsedUrls.set(url, parsed)
        }
        return parsed
      }

      const prepare = (request: OutboundRequest): Prepared | OutboundFailure => {
        const started = performance.now()
        const timeoutMs = Duration.toMillis(request.timeout)
        if (!(timeoutMs > 0)) {
          return new OutboundFailure({ reason: "timeout", message: "the deadline had passed before sending" })
        }
        const parsed = parseCached(request.url)
        if (parsed._tag === "Refused") return new OutboundFailure({ reason: "unsafe_target", message: parsed.message })
        return { started, timeoutMs, target: parsed.target, maxBytes: request.maxResponseBytes ?? DEFAULT_MAX_RESPONSE_BYTES }
      }

      /** The attributes a send gives its caller's span, before and after the exchange. */
      const requestAttributes = (request: OutboundRequest, target: Target) => ({
        "http.request.method": request.method,
        "server.address": target.url.hostname,
        "server.port": target.port,
        "svc.url_hint": target.hint
      })

      // A name's resolution runs under the deadline over the whole exchange.
      const resolution = (request: OutboundRequest, prepared: Prepared) => {
        const resolved = resolveTarget(prepared.target, allowed, resolver, request.orgId).pipe(
          Effect.mapError((problem) =>
            problem._tag === "Refused"
              ? refused(problem)
              : new OutboundFailure({ reason: "network", message: unresolvedMessage(problem.code) })
          )
        )
        return prepared.target.host._tag === "Ip" ? resolved : resolved.pipe(
          Effect.timeoutOrElse({
            duration: prepared.timeoutMs,
            orElse: () => Effect.fail(new OutboundFailure({ reason: "timeout", message: unresolvedMessage("ETIMEOUT") }))
          })
        )
      }

      /**
       * The exchange with the checked addresses, under what is left of the
       * deadline, kept by a timer of its own that aborts the request (no
       * racing fibers per send); `done` is called once, unless the returned
       * abort comes first.
       */
      const exchange = (
        request: OutboundRequest,
        prepared: Prepared,
        addresses: ReadonlyArray<Address>,
        done: (result: OutboundResponse | OutboundFailure) => void
      ): (() => void) => {
        const { maxBytes, started, target, timeoutMs } = prepared
        const remainingMs = timeoutMs - (performance.now() - started)
        const timedOut = () => new OutboundFailure({ reason: "timeout", message: `no complete answer within ${timeoutMs} ms` })
        if (!(remainingMs > 0)) {
          done(timedOut())
          return () => {}
        }
        const entry = poolFor({
          origin: target.url.origin,
          addresses: addresses.map((address) => address.toString()),
          partition: request.partition ?? "",
          connections: request.connections ?? POOL_CONNECTIONS
        })
        let timer: ReturnType<typeof setTimeout> | undefined
        let ended = false
        const over = () => {
          clearTimeout(timer)
          if (ended) return false
          ended = true
          entry.active--
          entry.idleSince = performance.now()
          return true
        }
        entry.active++
        const running = startExchange(entry.pool, {
          path: `${target.url.pathname}${target.url.search}`,
          method: request.method,
          headers: requestHeaders(request.headers),
          body: request.body ?? null,
          maxBytes,
          // Backstops only: the deadline over the whole exchange is the
          // timer below, which ends the exchange.
          headersTimeout: Number.isFinite(remainingMs) ? remainingMs : 0,
          bodyTimeout: Number.isFinite(remainingMs) ? remainingMs : 0
        }, (error, exchanged) => {
          if (!over()) return
          done(
            exchanged !== undefined
              ? { ...exchanged, elapsedMs: Math.round(performance.now() - started) } satisfies OutboundResponse
              : toFailure(error)
          )
        })
        if (!ended && Number.isFinite(remainingMs)) {
          // Whole milliseconds, never later than the deadline: Node keeps
          // one list of timers per distinct duration, and a fractional one
          // made a new list (and a priority-queue insert) for every send:
          // 3 % of the drain's busy CPU in a profile, none now.
          timer = setTimeout(() => {
            running.abort()
            if (over()) done(timedOut())
          }, Math.max(1, Math.floor(remainingMs)))
        }
        return () => {
          running.abort()
          over()
        }
      }

      // Untraced: its attributes go on the caller's span (one span per
      // delivery, not two).
      const send = Effect.fnUntraced(function*(request: OutboundRequest) {
        const prepared = prepare(request)
        if (prepared instanceof OutboundFailure) return yield* prepared
        yield* Effect.annotateCurrentSpan(requestAttributes(request, prepared.target))
        const addresses = yield* resolution(request, prepared)
        const result = yield* Effect.callback<OutboundResponse, OutboundFailure>((resume) => {
          const abort = exchange(request, prepared, addresses, (result) => {
            resume(result instanceof OutboundFailure ? Effect.fail(result) : Effect.succeed(result))
          })
          // Interrupted (the caller gave up): abort the request.
          return Effect.sync(abort)
        })
        yield* Effect.annotateCurrentSpan({ "http.response.status_code": result.status })
        return result
      })

      // `send` without a fiber of its own (`DirectExchange.ts`), from the same steps.
      const sendDirect = directExchange({
        prepare,
        requestAttributes,
        literal: (prepared) => {
          const host = prepared.target.host
          if (host._tag !== "Ip") return undefined
          const checked = checkLiteral(host.address, allowed)
          return "_tag" in checked ? refused(checked) : checked
        },
        resolution,
        unresolvable: () => new OutboundFailure({ reason: "network", message: "the host name could not be resolved" }),
        exchange,
        context: yield* Effect.context<never>()
      })

      return { check, send, sendDirect }
    })
  )
}
