/**
 * Connection pools pinned to checked addresses, and one exchange through
 * them under what is left of the send's deadline, with the headers as
 * sent; the CA certificates outbound TLS trusts. Pools live as long as the scope that made them.
 */
import { Duration, Effect } from "effect"
import { readFileSync } from "node:fs"
import * as tls from "node:tls"
import { buildConnector, Client, Pool } from "undici"
import { VERSION } from "../api/Version.ts"
import { type Address, parseAddress } from "./AddressPolicy.ts"
import { type ExchangeCallback, startExchange } from "./Exchange.ts"
import {
  type ClientCertificate,
  isClosedConnection,
  OutboundFailure,
  type OutboundRequest,
  type OutboundResponse,
  type Prepared,
  toFailure
} from "./Request.ts"

/** How long an idle connection pool for one (origin, checked addresses) pair is kept. */
const POOL_IDLE_TTL = Duration.minutes(1)
/** Connections per pool; the callers (delivery workers) bound their own concurrency. */
const POOL_CONNECTIONS = 32
/** How long an idle connection is kept when the server names no keep-alive time (below servers' common 5 s). */
const IDLE_KEEP_ALIVE_MS = 4_000

const USER_AGENT = `svc/${VERSION}`

/**
 * The headers as sent: the caller's, lower-cased (of two names that differ
 * only in case, the later wins), our `user-agent` unless the caller gave
 * one, and always `accept-encoding: identity`. As undici's flat
 * `[name, value, ...]` list, which it reads without listing an object's
 * keys. A webhook's headers (names already lower-case, neither of ours
 * among them) go straight into the list without a `Map` (0.6 % → 0.14 % of
 * svc's busy CPU in the drain, `bench/notes/webhook-sender.md`); any other
 * case takes the map.
 */
const requestHeaders = (headers: Readonly<Record<string, string>>): Array<string> => {
  // The names of an object are distinct: when all are lower-case and none is
  // ours, nothing needs folding or replacing.
  const out: Array<string> = ["user-agent", USER_AGENT]
  for (const name in headers) {
    if (name !== name.toLowerCase() || name === "user-agent" || name === "accept-encoding") {
      return mergedHeaders(headers)
    }
    out.push(name, headers[name]!)
  }
  // We never decompress, so a compressed answer can never expand beyond what
  // we read; asking for identity keeps the kept snippet readable.
  out.push("accept-encoding", "identity")
  return out
}

/** `requestHeaders` when names need folding or replace ours. */
const mergedHeaders = (headers: Readonly<Record<string, string>>): Array<string> => {
  const byName = new Map<string, string>([["user-agent", USER_AGENT]])
  for (const name in headers) byName.set(name.toLowerCase(), headers[name]!)
  byName.set("accept-encoding", "identity")
  const out: Array<string> = []
  for (const [name, value] of byName) out.push(name, value)
  return out
}

interface PoolKey {
  /** `https://host[:port]`, what the Host header and SNI come from. */
  readonly origin: string
  /** The checked addresses, the only ones this pool's sockets connect to. */
  readonly addresses: ReadonlyArray<string>
  readonly partition: string
  readonly connections: number
  /** Presented on every connection of the pool (mutual TLS). */
  readonly clientCertificate: ClientCertificate | undefined
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

const makePool = (key: PoolKey, trust: tls.SecureContext, ca: ReadonlyArray<string>) => {
  const url = new URL(key.origin)
  const literal = parseAddress(url.hostname)
  const certificate = key.clientCertificate
  const connector = buildConnector({
    // Built once from the trusted CAs: given `ca` instead, every new
    // connection would parse the whole root store again (~15 ms each). A
    // pool with a client certificate builds its own context once, with the
    // same CAs and the certificate and key.
    secureContext: certificate === undefined
      ? trust
      : tls.createSecureContext({ ca: [...ca], cert: certificate.certificate, key: certificate.privateKey }),
    rejectUnauthorized: true,
    // HTTP/1.1 only: one well-understood framing, no h2 stream multiplexing
    // surprises across deliveries.
    allowH2: false,
    lookup: pinnedLookup(key.addresses)
  })
  const settings = {
    allowH2: false,
    // An idle connection is given up before a server that names no
    // keep-alive time may close its side (at 5 s for Node's and Apache's
    // servers; Node names none when the answer sets `Connection` itself, as
    // the MCP SDK's server does): a request sent on a connection the server
    // is closing is answered with a reset, and a POST is sent again only
    // when its caller says it is `repeatable`.
    // A server that names its time is believed, less 2 s (undici's rule).
    keepAliveTimeout: IDLE_KEEP_ALIVE_MS,
    keepAliveMaxTimeout: 60_000,
    connect: (options, callback) =>
      // An IP literal is never looked up by Node, so the pinned lookup does not
      // apply: connect to the checked form of it (an IPv4-mapped literal to
      // its IPv4 address). A name keeps its hostname (SNI and certificate
      // hostname come from it) and reaches the address through the lookup.
      connector(literal === undefined ? options : { ...options, hostname: key.addresses[0] }, callback)
  } satisfies Client.Options
  return {
    pool: new Pool(key.origin, { ...settings, connections: key.connections }),
    /** A client of one new connection with the pool's settings, outside the pool. */
    fresh: () => new Client(key.origin, settings)
  }
}

interface PoolEntry {
  readonly pool: Pool
  readonly fresh: () => Client
  /** Exchanges in flight through it. */
  active: number
  /** `performance.now()` when its last exchange ended. */
  idleSince: number
}

/** The CA certificates outbound TLS trusts: Node's default store plus the extra PEM bundle (exported for tests). */
export const trustedCas = Effect.fnUntraced(function*(extraCaFile: string | undefined) {
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

/** The pools of one `OutboundHttp` layer: swept when idle, destroyed with the scope. */
export const makePools = Effect.fnUntraced(function*(ca: ReadonlyArray<string>) {
  const trust = tls.createSecureContext({ ca: [...ca] })
  // Pools by key, each with its exchanges in flight; one idle for
  // POOL_IDLE_TTL is destroyed by the sweep. A plain map, not a scoped
  // resource per send: looking a pool up costs a string key and a get.
  const pools = new Map<string, PoolEntry>()
  const poolFor = (key: PoolKey) => {
    const id = `${key.origin} ${key.addresses.join(",")} ${key.partition} ${key.connections} ${
      key.clientCertificate?.id ?? ""
    }`
    let entry = pools.get(id)
    if (entry === undefined) {
      entry = { ...makePool(key, trust, ca), active: 0, idleSince: performance.now() }
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
  ): () => void => {
    const { maxBytes, started, target, timeoutMs } = prepared
    const remainingMs = timeoutMs - (performance.now() - started)
    const timedOut = () =>
      new OutboundFailure({ reason: "timeout", message: `no complete answer within ${timeoutMs} ms` })
    if (!(remainingMs > 0)) {
      done(timedOut())
      return () => {}
    }
    const entry = poolFor({
      origin: target.url.origin,
      addresses: addresses.map((address) => address.toString()),
      partition: request.partition ?? "",
      connections: request.connections ?? POOL_CONNECTIONS,
      clientCertificate: request.clientCertificate
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
    const exchangeRequest = {
      path: `${target.url.pathname}${target.url.search}`,
      method: request.method,
      headers: requestHeaders(request.headers),
      body: request.body ?? null,
      maxBytes,
      // Backstops only: the deadline over the whole exchange is the
      // timer below, which ends the exchange.
      headersTimeout: Number.isFinite(remainingMs) ? remainingMs : 0,
      bodyTimeout: Number.isFinite(remainingMs) ? remainingMs : 0
    }
    let repeats = request.repeatable === true ? 1 : 0
    let running: { readonly abort: () => void } | undefined
    const answered: ExchangeCallback = (error, exchanged, answering) => {
      if (ended) return
      if (exchanged !== undefined) {
        if (over()) {
          done({ ...exchanged, elapsedMs: Math.round(performance.now() - started) } satisfies OutboundResponse)
        }
        return
      }
      const failure = toFailure(error, timedOut)
      // A kept-alive connection the server closed as the request went out
      // (undici sends nothing twice itself): sent once more on a new
      // connection, outside the pool, whose other idle connections the
      // server may be closing too.
      if (repeats > 0 && answering !== true && failure.reason === "network" && isClosedConnection(error)) {
        repeats--
        const client = entry.fresh()
        const again = startExchange(client, exchangeRequest, (error, exchanged, answering) => {
          void client.close().catch(() => undefined)
          answered(error, exchanged, answering)
        })
        running = {
          abort: () => {
            again.abort()
            void client.destroy().catch(() => undefined)
          }
        }
        return
      }
      if (over()) done(failure)
    }
    running = startExchange(entry.pool, exchangeRequest, answered)
    if (!ended && Number.isFinite(remainingMs)) {
      // Whole milliseconds, never later than the deadline: Node keeps
      // one list of timers per distinct duration, and a fractional one
      // made a new list (and a priority-queue insert) for every send:
      // 3 % of the drain's busy CPU in a profile, none now.
      timer = setTimeout(() => {
        running?.abort()
        if (over()) done(timedOut())
      }, Math.max(1, Math.floor(remainingMs)))
    }
    return () => {
      running?.abort()
      over()
    }
  }
  return { exchange }
})
