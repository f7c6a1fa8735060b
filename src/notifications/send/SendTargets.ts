/**
 * What the sender needs of one endpoint (URL, state, signing secrets, custom headers),
 * looked up once for all the sends that want it meanwhile, and the mirror
 * of what the lookups found, readable without an effect: every send reads
 * its endpoint there (`NotificationEndpoints.sendTarget`, and
 * `sendTargetNow` for the webhook sends that run without a fiber of their
 * own, `DirectSend.ts`). An entry is trusted for `SEND_TARGET_TTL_MS` from
 * the lookup that found it, or from the last sweep that found its endpoint
 * unchanged (`TargetSweep.ts`); a change made through this process
 * drops its endpoint's entry at once, and a lookup that began before the
 * change does not leave its answer here.
 *
 * Speeds up: the send's endpoint lookup, a map read instead of `Cache.get`
 * in a fiber; with the direct start, the Effect runtime's share of svc's
 * samples in the sends went from 10 % to 1 % (`bench/notes/delivery-log.md`,
 * "What was cut").
 */
import { PgClient } from "@effect/sql-pg"
import { Clock, Deferred, Effect, Redacted, Schema } from "effect"
import { JsonColumn, rowsOf } from "../../platform/Rows.ts"
import { endpointUrlOwner, readReceiverUrl } from "../../secrets/ReceiverUrls.ts"
import { type SecretOwner, SecretStore } from "../../secrets/SecretStore.ts"
import { keepSweeping, STAMP } from "./TargetSweep.ts"

export interface SendTarget {
  readonly url: string
  readonly active: boolean
  readonly deactivatedReason: string | null
  readonly secrets: ReadonlyArray<string>
  /** The endpoint's custom headers, names lower-case (docs/webhooks.md, "Custom headers"). */
  readonly headers: ReadonlyArray<readonly [string, string]>
}

/**
 * How stale the sender's view of an endpoint changed by another process may
 * be: a rotation reaches other processes' signatures, and a deletion or
 * deactivation their sends, within this (the old secret keeps signing
 * during the overlap anyway; deletion also fails pending deliveries at once).
 */
export const SEND_TARGET_TTL_MS = 1_000

export const endpointOwner = (orgId: string, id: string): SecretOwner => ({ orgId, kind: "notification_endpoint", id })
/** The owner of an endpoint's custom header values, one secret per header, named as given. */
export const endpointHeaderOwner = (orgId: string, id: string): SecretOwner => ({ orgId, kind: "notification_endpoint_header", id })

const TargetRows = rowsOf("notification_endpoints", Schema.Struct({
  url: Schema.String,
  active: Schema.Boolean,
  deactivated_reason: Schema.NullOr(Schema.String),
  header_names: JsonColumn(Schema.Array(Schema.String)),
  stamp: Schema.String
}))

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

interface Entry {
  readonly target: SendTarget
  /** What the lookup read, as `TargetSweep.ts` reads it again: equal while nothing the target is made of changed. */
  readonly stamp: string
  until: number
  /** When a send last read it (epoch ms): one idle for `SEND_TARGET_IDLE_MS` is dropped rather than checked. */
  readAt: number
}

/** One lookup in flight: made stale by a change to its endpoint after it began. */
export interface Lookup {
  stale: boolean
  /** What it found, for the sends that joined it. */
  readonly answer: Deferred.Deferred<SendTarget | undefined>
}

export const makeSendTargetMirror = (clock: Clock.Clock, ttlMs: number) => {
  const known = new Map<string, Entry>()
  // The lookup in flight per endpoint, one at most (a send joins it rather
  // than start another): nothing is kept for an endpoint once it has ended.
  const inFlight = new Map<string, Lookup>()
  const changed = (key: string) => {
    known.delete(key)
    const lookup = inFlight.get(key)
    if (lookup !== undefined) lookup.stale = true
    inFlight.delete(key)
  }
  return {
    /**
     * A lookup of `key` begins, when none is `running`; give the answer to
     * `found` and call `ended` however it ends.
     */
    began: (key: string): Lookup => {
      const lookup: Lookup = { stale: false, answer: Deferred.makeUnsafe() }
      inFlight.set(key, lookup)
      return lookup
    },
    /** The lookup found `target` (read as `stamp`): kept unless the endpoint changed since it began. */
    found: (key: string, lookup: Lookup, target: SendTarget, stamp: string) => {
      if (lookup.stale) return
      if (known.size >= KEPT) known.clear()
      const now = clock.currentTimeMillisUnsafe()
      known.set(key, { target, stamp, until: now + ttlMs, readAt: now })
    },
    ended: (key: string, lookup: Lookup) => {
      if (inFlight.get(key) === lookup) inFlight.delete(key)
    },
    /** A lookup of `key` in flight that no change made stale, for a send to join rather than start another. */
    running: (key: string): Lookup | undefined => inFlight.get(key),
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

/** The lookups behind `NotificationEndpoints.sendTarget` and `sendTargetNow`, and `forget`. */
export const makeSendTargets = Effect.fnUntraced(function*(
  sql: PgClient.PgClient,
  secrets: SecretStore["Service"],
  signingSecrets: (orgId: string, id: string) => Effect.Effect<ReadonlyArray<string>>
) {
  const mirror = makeSendTargetMirror(yield* Clock.Clock, SEND_TARGET_TTL_MS)
  const read = Effect.fnUntraced(function*(key: string, lookup: Lookup) {
    const [orgId, id] = key.split(":") as [string, string]
    const row = yield* TargetRows.one(sql`
      SELECT url, active, deactivated_reason, header_names, ${sql.literal(STAMP)} AS stamp
      FROM notification_endpoints e WHERE id = ${id} AND org_id = ${orgId}
    `)
    const url = row === undefined
      ? undefined
      : yield* readReceiverUrl(endpointUrlOwner(orgId, id), row.url).pipe(Effect.provideService(SecretStore, secrets))
    // No row, or deleted since it was read.
    if (row === undefined || url === undefined) return undefined
    const target: SendTarget = {
      url,
      active: row.active,
      deactivatedReason: row.deactivated_reason,
      secrets: yield* signingSecrets(orgId, id),
      // Read only when it has some: most endpoints pay no lookup for them.
      headers: row.header_names.length === 0
        ? []
        : (yield* secrets.list(endpointHeaderOwner(orgId, id))).map((h) => [h.name.toLowerCase(), Redacted.value(h.value)] as const)
    }
    mirror.found(key, lookup, target, row.stamp)
    return target
  })
  // Concurrent sends to one endpoint share one lookup (no stampede when its entry lapses).
  const lookUp = (key: string): Effect.Effect<SendTarget | undefined> =>
    Effect.suspend(() => {
      const running = mirror.running(key)
      if (running !== undefined) return Deferred.await(running.answer)
      const lookup = mirror.began(key)
      return read(key, lookup).pipe(Effect.onExit((exit) =>
        Effect.andThen(Deferred.done(lookup.answer, exit), Effect.sync(() => mirror.ended(key, lookup)))
      ))
    })
  yield* keepSweeping(sql, mirror, SEND_TARGET_TTL_MS / 2)
  return {
    sendTarget: (orgId: string, id: string) => {
      const key = `${orgId}:${id}`
      const known = mirror.now(key)
      return known !== undefined ? Effect.succeed(known) : lookUp(key)
    },
    sendTargetNow: (orgId: string, id: string) => mirror.now(`${orgId}:${id}`),
    /** A change made through this process drops the endpoint's entry at once. */
    forget: (orgId: string, id: string) => Effect.sync(() => mirror.changed(`${orgId}:${id}`))
  }
})
