/**
 * Name resolution for outbound requests, as a replaceable service.
 *
 * `OutboundHttp` resolves a host exactly once per check or send through
 * this service and then connects only to the addresses it checked, so the
 * resolver is the one place a test can make DNS answer differently from one
 * call to the next (a rebinding attack) or map a made-up name to loopback.
 *
 * It is a `Context.Reference`: the network resolver with default settings is
 * used unless a layer provides another (`OutboundHttp.layer` builds one from
 * `SvcConfig`; tests may provide their own).
 *
 * Why not `dns.lookup` (`getaddrinfo`): it runs on libuv's thread pool (4
 * threads by default, shared with zlib, file system and crypto work), and a
 * timeout abandons the lookup without freeing its thread. One organization
 * whose receiver's name never answers would occupy every thread, and other
 * organizations' deliveries, telemetry gzip and file work would wait. The
 * network resolver asks DNS servers directly with c-ares (`dns.Resolver`),
 * on the event loop's own sockets, with a per-query timeout and a bounded
 * number of tries after which the query really ends (a backstop cancels
 * whatever outlives them). Lookups in flight are bounded per organization
 * (`SVC_DNS_LOOKUPS_PER_ORG`); concurrent asks for one name share one
 * lookup, and a lookup that finds no free slot within a quarter second
 * fails with `EBUSY` (retried like any network failure) instead of
 * queueing behind names that never answer.
 *
 * What `getaddrinfo` did and c-ares does not, done here: IP literals answer
 * themselves; `/etc/hosts` is read first (re-read when it changes);
 * `localhost` and `*.localhost` are loopback (RFC 6761). Names are looked up
 * as given (absolute): `search` domains of /etc/resolv.conf are not applied.
 */
import { Clock, Context, Data, Effect } from "effect"
import { Resolver as DnsResolver } from "node:dns/promises"
import { readFileSync, statSync } from "node:fs"
import { isIP } from "node:net"

/** The name did not resolve (no such name, no address, the resolver failed, timed out or was busy). */
export class ResolveFailure extends Data.TaggedError("ResolveFailure")<{
  /** e.g. `ENOTFOUND`, `ENODATA`, `ETIMEOUT`, `EBUSY` (too many lookups of the organization in flight). */
  readonly code: string
}> {}

export interface ResolverShape {
  /**
   * Every address `hostname` resolves to, canonical text (`1.2.3.4`,
   * `2001:db8::1`). `orgId` is whose request needs it: lookups in flight
   * are bounded per organization.
   */
  readonly resolve: (hostname: string, orgId?: string) => Effect.Effect<ReadonlyArray<string>, ResolveFailure>
}

export interface NetworkResolverOptions {
  /** `host` or `host:port` (`[v6]:port`); empty: the servers of /etc/resolv.conf. */
  readonly servers: ReadonlyArray<string>
  /** Deadline of one query to one server. */
  readonly timeoutMs: number
  /** Times each query is sent before it fails. */
  readonly tries: number
  /** Lookups one organization may have in flight. */
  readonly lookupsPerOrg: number
  /** The hosts file (default `/etc/hosts`). */
  readonly hostsFile?: string
  /** The clock that spaces the hosts file's checks (default: Effect's). */
  readonly clock?: Clock.Clock
}

/** `/etc/hosts` as a map from lower-case name to addresses (in file order). */
export const parseHosts = (text: string): ReadonlyMap<string, ReadonlyArray<string>> => {
  const table = new Map<string, Array<string>>()
  for (const line of text.split("\n")) {
    const [address, ...names] = line.replace(/#.*/, "").trim().split(/\s+/)
    if (address === undefined || isIP(address) === 0) continue
    const canonical = address.replace(/%.*$/, "")
    for (const name of names) {
      const key = name.toLowerCase().replace(/\.+$/, "")
      const list = table.get(key) ?? []
      if (!list.includes(canonical)) list.push(canonical)
      table.set(key, list)
    }
  }
  return table
}

const HOSTS_RECHECK_MS = 5_000

/** The hosts file, re-read when its modification time changes (checked at most every few seconds). */
const hostsTable = (path: string, clock: Clock.Clock) => {
  let table: ReadonlyMap<string, ReadonlyArray<string>> = new Map()
  let mtimeMs = -1
  let checkedAt = -Infinity
  return (): ReadonlyMap<string, ReadonlyArray<string>> => {
    const now = clock.currentTimeMillisUnsafe()
    if (now - checkedAt < HOSTS_RECHECK_MS) return table
    checkedAt = now
    try {
      // Synchronous on purpose: a stat and a read of a small local file cost
      // microseconds, and going through the thread pool is what this module
      // exists to avoid.
      const stat = statSync(path, { throwIfNoEntry: false })
      if (stat === undefined) {
        table = new Map()
        mtimeMs = -1
      } else if (stat.mtimeMs !== mtimeMs) {
        table = parseHosts(readFileSync(path, "utf8"))
        mtimeMs = stat.mtimeMs
      }
    } catch {
      // Unreadable: resolve through DNS alone, as getaddrinfo would.
      table = new Map()
    }
    return table
  }
}

const codeOf = (cause: unknown): string =>
  typeof cause === "object" && cause !== null && "code" in cause && typeof cause.code === "string"
    ? cause.code
    : "EFAIL"

/** How long a lookup waits for its organization's free slot before failing with `EBUSY`. */
const SLOT_WAIT_MS = 250

export const networkResolver = (options: NetworkResolverOptions): ResolverShape => {
  const hosts = hostsTable(options.hostsFile ?? "/etc/hosts", options.clock ?? Clock.Clock.defaultValue())
  /** Lookups in flight per organization, and who waits for a slot. */
  const inFlight = new Map<string, { count: number; readonly waiters: Array<() => void> }>()
  /** Lookups in flight by organization and name: concurrent asks for one name share one lookup. */
  const shared = new Map<string, Promise<ReadonlyArray<string>>>()
  // The whole of one lookup: every try of both address families.
  const lookupDeadlineMs = options.timeoutMs * options.tries + 250

  const acquire = (orgId: string): Promise<boolean> => {
    const entry = inFlight.get(orgId) ?? { count: 0, waiters: [] }
    inFlight.set(orgId, entry)
    if (entry.count < options.lookupsPerOrg) {
      entry.count += 1
      return Promise.resolve(true)
    }
    return new Promise((resolve) => {
      const grant = () => {
        clearTimeout(timer)
        entry.count += 1
        resolve(true)
      }
      const timer = setTimeout(() => {
        const at = entry.waiters.indexOf(grant)
        if (at >= 0) entry.waiters.splice(at, 1)
        resolve(false)
      }, SLOT_WAIT_MS)
      entry.waiters.push(grant)
    })
  }

  const release = (orgId: string) => {
    const entry = inFlight.get(orgId)
    if (entry === undefined) return
    entry.count -= 1
    const next = entry.waiters.shift()
    if (next !== undefined) next()
    else if (entry.count === 0) inFlight.delete(orgId)
  }

  const query = async (name: string): Promise<ReadonlyArray<string>> => {
    const resolver = new DnsResolver({
      timeout: options.timeoutMs,
      tries: options.tries,
      maxTimeout: options.timeoutMs
    })
    if (options.servers.length > 0) resolver.setServers([...options.servers])
    // c-ares ends each query after its tries; this is a backstop that
    // cancels whatever is still outstanding.
    const backstop = setTimeout(() => resolver.cancel(), lookupDeadlineMs)
    try {
      const [v4, v6] = await Promise.allSettled([resolver.resolve4(name), resolver.resolve6(name)])
      const addresses = [
        ...(v4.status === "fulfilled" ? v4.value : []),
        ...(v6.status === "fulfilled" ? v6.value : [])
      ]
      if (addresses.length > 0) return addresses
      const failures = [v4, v6].flatMap((r) => r.status === "rejected" ? [codeOf(r.reason)] : [])
      // "No such name" or "no address" for one family says little when the
      // other failed otherwise: report the more telling failure.
      const code = failures.find((c) => c !== "ENODATA" && c !== "ENOTFOUND") ?? failures[0] ?? "ENODATA"
      throw new ResolveFailure({ code: code === "ECANCELLED" ? "ETIMEOUT" : code })
    } finally {
      clearTimeout(backstop)
    }
  }

  const lookup = (orgId: string, name: string): Promise<ReadonlyArray<string>> => {
    const key = `${orgId}\u0000${name}`
    const running = shared.get(key)
    if (running !== undefined) return running
    const started = (async () => {
      if (!(await acquire(orgId))) throw new ResolveFailure({ code: "EBUSY" })
      try {
        return await query(name)
      } finally {
        release(orgId)
      }
    })()
    shared.set(key, started)
    const forget = () => {
      if (shared.get(key) === started) shared.delete(key)
    }
    started.then(forget, forget)
    return started
  }

  return {
    resolve: (hostname, orgId = "") => {
      const name = hostname.toLowerCase().replace(/\.+$/, "")
      const bare = name.startsWith("[") && name.endsWith("]") ? name.slice(1, -1) : name
      if (isIP(bare) !== 0) return Effect.succeed([bare])
      const listed = hosts().get(name)
      if (listed !== undefined && listed.length > 0) return Effect.succeed(listed)
      if (name === "localhost" || name.endsWith(".localhost")) return Effect.succeed(["127.0.0.1", "::1"])
      if (name === "") return Effect.fail(new ResolveFailure({ code: "ENOTFOUND" }))
      return Effect.tryPromise({
        try: () => lookup(orgId, name),
        catch: (cause) => cause instanceof ResolveFailure ? cause : new ResolveFailure({ code: codeOf(cause) })
      })
    }
  }
}

/**
 * The resolver `OutboundHttp` uses. Unset, `OutboundHttp.layer` builds the
 * network resolver from `SvcConfig` (`SVC_DNS_*`); a test may provide one.
 */
export const Resolver = Context.Reference<ResolverShape | undefined>("svc/outbound/Resolver", {
  defaultValue: () => undefined
})
