/**
 * The mirror of what the send targets' lookups found (`SendTargets.ts`),
 * readable without an effect: every send reads its endpoint here (and the
 * webhook sends that run without a fiber of their own, `DirectSend.ts`,
 * only here). An entry is trusted for `SEND_TARGET_TTL_MS` from the lookup
 * that found it, or from the last sweep that found its endpoint unchanged
 * (the sweep, below); a change made through this process drops its
 * endpoint's entry at once, and a lookup that began before the change does
 * not leave its answer here.
 *
 * Speeds up: the send's endpoint lookup, a map read instead of `Cache.get`
 * in a fiber; with the direct start, the Effect runtime's share of svc's
 * samples in the sends went from 10 % to 1 % (`bench/notes/delivery-log.md`,
 * "What was cut").
 */
import type { PgClient } from "@effect/sql-pg"
import { Clock, Deferred, Effect, Schema } from "effect"
import { rowsOf } from "../../platform/Rows.ts"

/**
 * How stale the sender's view of an endpoint changed by another process may
 * be: a rotation reaches other processes' signatures, and a deletion or
 * deactivation their sends, within this (the old secret keeps signing
 * during the overlap anyway; deletion also fails pending deliveries at once).
 */
export const SEND_TARGET_TTL_MS = 1_000

/** Entries kept; past this the mirror starts afresh. */
const KEPT = 10_000
/**
 * An entry nobody read for this long is dropped by the next sweep rather
 * than checked. A check costs PostgreSQL about 30 µs per endpoint, two a
 * second; a lookup again about 50 µs there and 250 in svc (three
 * statements, three decryptions): past a few seconds between sends the
 * lookup is the cheaper, and the receiver's idle connection is likely gone
 * by then too (Node closes one after 5 s).
 */
export const SEND_TARGET_IDLE_MS = 5_000

interface Entry<T> {
  readonly target: T
  /** What the lookup read, as the sweep reads it again: equal while nothing the target is made of changed. */
  readonly stamp: string
  until: number
  /** When a send last read it (epoch ms): one idle for `SEND_TARGET_IDLE_MS` is dropped rather than checked. */
  readAt: number
}

/** One lookup in flight: made stale by a change to its endpoint after it began. */
export interface Lookup<T> {
  stale: boolean
  /** What it found, for the sends that joined it. */
  readonly answer: Deferred.Deferred<T | undefined>
}

export const makeSendTargetMirror = <T>(clock: Clock.Clock, ttlMs: number) => {
  const known = new Map<string, Entry<T>>()
  // The lookup in flight per endpoint, one at most (a send joins it rather
  // than start another): nothing is kept for an endpoint once it has ended.
  const inFlight = new Map<string, Lookup<T>>()
  const changed = (key: string) => {
    known.delete(key)
    const lookup = inFlight.get(key)
    if (lookup !== undefined) lookup.stale = true
    inFlight.delete(key)
  }
  return {
    /** A lookup of `key` begins (none is `running`); give the answer to `found` and call `ended` however it ends. */
    began: (key: string): Lookup<T> => {
      const lookup: Lookup<T> = { stale: false, answer: Deferred.makeUnsafe() }
      inFlight.set(key, lookup)
      return lookup
    },
    /** The lookup found `target` (read as `stamp`): kept unless the endpoint changed since it began. */
    found: (key: string, lookup: Lookup<T>, target: T, stamp: string) => {
      if (lookup.stale) return
      if (known.size >= KEPT) known.clear()
      const now = clock.currentTimeMillisUnsafe()
      known.set(key, { target, stamp, until: now + ttlMs, readAt: now })
    },
    ended: (key: string, lookup: Lookup<T>) => {
      if (inFlight.get(key) === lookup) inFlight.delete(key)
    },
    /** A lookup of `key` in flight that no change made stale, for a send to join rather than start another. */
    running: (key: string): Lookup<T> | undefined => inFlight.get(key),
    /** The endpoint changed through this process: its entry goes, and so does what lookups in flight would leave. */
    changed,
    /** What a lookup found, trusted for `ttlMs` from the lookup or the last sweep that confirmed it; else `undefined`. */
    now: (key: string) => {
      const entry = known.get(key)
      const now = clock.currentTimeMillisUnsafe()
      if (entry === undefined || now >= entry.until) return undefined
      entry.readAt = now
      return entry.target
    },
    /**
     * The entries a sweep checks, by key with their stamps: those read in the
     * last `SEND_TARGET_IDLE_MS`. The others are dropped (an endpoint nobody
     * sends to is looked up again when somebody does).
     */
    toCheck: (): Array<readonly [string, string]> => {
      const out: Array<readonly [string, string]> = []
      const now = clock.currentTimeMillisUnsafe()
      for (const [key, entry] of known) {
        if (now - entry.readAt > SEND_TARGET_IDLE_MS) known.delete(key)
        else out.push([key, entry.stamp])
      }
      return out
    },
    /**
     * A sweep that began at `startedAt` read `stamp` for `key` (`undefined`:
     * no such endpoint any more). The entry holding that stamp is trusted for
     * `ttlMs` from then; one holding another is dropped, and so is what
     * lookups in flight would leave. Answers whether it was kept.
     */
    confirm: (key: string, stamp: string | undefined, startedAt: number): boolean => {
      const entry = known.get(key)
      if (entry !== undefined && stamp === entry.stamp) {
        entry.until = Math.max(entry.until, startedAt + ttlMs)
        return true
      }
      changed(key)
      return false
    },
    /** Endpoints with lookups in flight (for tests: this never grows past them). */
    watched: () => inFlight.size
  }
}

/**
 * The sweep, the send targets' faster path: one statement every half second
 * keeps the mirror fresh for all its endpoints, instead of each
 * endpoint's lookup again once its entry is a second old.
 *
 * Every `SEND_TARGET_TTL_MS / 2` the sweep reads the stamp of every
 * endpoint whose entry a send read in the last `SEND_TARGET_IDLE_MS` (at
 * most 1 000 per statement), the same stamp its lookup read: its URL
 * column, state and header names, and the ids of its live secrets (signing
 * secrets, the sealed URL, header values; a secret is live until its
 * `expires_at` on the database's clock, so one expiring leaves the
 * stamp). An entry whose stamp is unchanged is trusted for
 * `SEND_TARGET_TTL_MS` from the sweep's start; any other is dropped, and
 * the next send looks its endpoint up. So a change made anywhere (another
 * process, direct SQL, a secret reaching its expiry) reaches sends within
 * `SEND_TARGET_TTL_MS`, as before; a sweep that fails confirms nothing,
 * and the entries lapse.
 *
 * What the sweep speeds up: a lookup is three statements and three decryptions (the
 * endpoint, its URL, its signing secrets). An endpoint receiving less often
 * than once a second was looked up for nearly every delivery: 1 000
 * endpoints over 200 organizations, 20 000 deliveries taking them in turn,
 * made 11 000 lookups (34 000 statements). With the sweep, 1 000 lookups and
 * about 15 sweeps: svc's CPU per delivery 2 641 -> 345 µs (one endpoint:
 * 324), PostgreSQL's 389 -> 254 (one endpoint: 120), 371 -> 2 666
 * deliveries/s on the PostgreSQL server (`webhooks-scale`,
 * bench/notes/delivery-log.md, "A handshake per delivery"). Without it
 * each delivery also paid a TLS handshake: svc was too slow to come back
 * to an endpoint before the receiver closed its idle connection (5 s,
 * Node's default).
 */

/** The secret kinds an endpoint's send target is made of. */
const KINDS =
  "'notification_endpoint', 'notification_endpoint_url', 'notification_endpoint_header', 'notification_endpoint_auth', 'notification_endpoint_certificate'"

/**
 * The stamp of endpoint row `e`: equal while nothing its send target is
 * read from changed. Expired secrets (they stay in the table) are
 * left out, so the stamp's length follows the secrets in use, not the
 * endpoint's rotations. Read in the lookup's first statement, before its
 * secrets: a secret changed in between makes the sweep's stamp differ, and
 * the entry is looked up again.
 */
export const STAMP =
  `md5(concat_ws('|', e.url, e.active::text, coalesce(e.deactivated_reason, '-'), e.header_names::text,
  (SELECT string_agg(s.id::text, ',' ORDER BY s.id) FROM org_secrets s
   WHERE s.owner_kind IN (${KINDS}) AND s.owner_id = e.id AND s.org_id = e.org_id
     AND (s.expires_at IS NULL OR s.expires_at > now()))))`

const StampRows = rowsOf("notification_endpoints", Schema.Struct({ key: Schema.String, stamp: Schema.String }))

/** Endpoints per statement. */
const CHUNK = 1_000

/** One sweep of `mirror`: answers the keys whose entries went. */
export const sweepOnce = Effect.fnUntraced(function*(
  sql: PgClient.PgClient,
  mirror: Pick<ReturnType<typeof makeSendTargetMirror>, "toCheck" | "confirm">
) {
  const dropped: Array<string> = []
  const entries = mirror.toCheck()
  for (let i = 0; i < entries.length; i += CHUNK) {
    const chunk = entries.slice(i, i + CHUNK)
    // Before the statement: what it reads is at least as new as this.
    const startedAt = yield* Clock.currentTimeMillis
    const rows = yield* StampRows.all(sql`
      SELECT e.org_id::text || ':' || e.id::text AS key, ${sql.literal(STAMP)} AS stamp
      FROM notification_endpoints e
      WHERE e.id IN ${sql.in(chunk.map(([key]) => key.slice(key.indexOf(":") + 1)))}
    `)
    const current = new Map(rows.map((row) => [row.key, row.stamp]))
    for (const [key] of chunk) {
      if (!mirror.confirm(key, current.get(key), startedAt)) dropped.push(key)
    }
  }
  return dropped
})
