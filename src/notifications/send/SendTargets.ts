/**
 * What the sender needs of one endpoint (URL, state, signing secrets, custom headers),
 * looked up once for all the sends that want it meanwhile, and the mirror
 * of what the lookups found, readable without an effect: every send reads
 * its endpoint there (`NotificationEndpoints.sendTarget`, and
 * `sendTargetNow` for the webhook sends that run without a fiber of their
 * own, `DirectSend.ts`). An entry is trusted for `SEND_TARGET_TTL_MS` from
 * the lookup that found it, or from the last sweep that found its endpoint
 * unchanged (the sweep, below); a change made through this process
 * drops its endpoint's entry at once, and a lookup that began before the
 * change does not leave its answer here.
 *
 * Speeds up: the send's endpoint lookup, a map read instead of `Cache.get`
 * in a fiber; with the direct start, the Effect runtime's share of svc's
 * samples in the sends went from 10 % to 1 % (`bench/notes/delivery-log.md`,
 * "What was cut").
 */
import { PgClient } from "@effect/sql-pg"
import { Cause, Clock, Deferred, Effect, Redacted, Schema } from "effect"
import { JsonColumn, rowsOf } from "../../platform/Rows.ts"
import { endpointUrlOwner, readReceiverUrl } from "../../secrets/ReceiverUrls.ts"
import { type SecretOwner, SecretStore } from "../../secrets/SecretStore.ts"
import type { ClientCertificate } from "../../outbound/Request.ts"
import type { EndpointAuthView } from "../../api/EndpointAuth.ts"
import { authOwner, CERTIFICATE, certificateOwner, CLIENT_SECRET, PRIVATE_KEY, TOKEN_URL } from "../auth/StoredAuth.ts"
import type { OAuthTarget } from "../auth/Tokens.ts"

export interface SendTarget {
  readonly url: string
  readonly active: boolean
  readonly deactivatedReason: string | null
  readonly secrets: ReadonlyArray<string>
  /** The endpoint's custom headers, names lower-case (docs/webhooks.md, "Custom headers"). */
  readonly headers: ReadonlyArray<readonly [string, string]>
  /** OAuth 2.0 client credentials: a bearer token is fetched for each send (`auth/Tokens.ts`). */
  readonly oauth?: OAuthTarget | undefined
  /** The client certificate presented for mutual TLS. */
  readonly clientCertificate?: ClientCertificate | undefined
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
  auth: JsonColumn(Schema.NullOr(Schema.Any)),
  has_certificate: Schema.Boolean,
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
  /** What the lookup read, as the sweep reads it again: equal while nothing the target is made of changed. */
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
    /** A lookup of `key` begins (none is `running`); give the answer to `found` and call `ended` however it ends. */
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
export const STAMP = `md5(concat_ws('|', e.url, e.active::text, coalesce(e.deactivated_reason, '-'), e.header_names::text,
  (SELECT string_agg(s.id::text, ',' ORDER BY s.id) FROM org_secrets s
   WHERE s.owner_kind IN (${KINDS}) AND s.owner_id = e.id AND s.org_id = e.org_id
     AND (s.expires_at IS NULL OR s.expires_at > now()))))`

const StampRows = rowsOf("notification_endpoints", Schema.Struct({ key: Schema.String, stamp: Schema.String }))

/** Endpoints per statement. */
const CHUNK = 1_000

/** One sweep of `mirror`: answers the keys whose entries went. */
export const sweepOnce = Effect.fnUntraced(function*(
  sql: PgClient.PgClient,
  mirror: ReturnType<typeof makeSendTargetMirror>
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

type Stored = ReadonlyArray<{ readonly id: string; readonly name: string; readonly value: Redacted.Redacted<string> }>

const named = (stored: Stored, name: string) => stored.find((secret) => secret.name === name)

/**
 * The OAuth credentials of an endpoint: its `auth` column and its secrets
 * (the token cache's key holds the client secret's id).
 */
const oauthTarget = (key: string, column: NonNullable<EndpointAuthView>, stored: Stored): OAuthTarget | undefined => {
  const tokenUrl = named(stored, TOKEN_URL)
  const secret = named(stored, CLIENT_SECRET)
  if (tokenUrl === undefined || secret === undefined) return undefined
  return {
    key: `${key}:${secret.id}`,
    tokenUrl: Redacted.value(tokenUrl.value),
    clientId: column.client_id,
    clientSecret: Redacted.value(secret.value),
    scope: column.scope,
    audience: column.audience,
    method: column.auth_method
  }
}

const clientCertificate = (stored: Stored): ClientCertificate | undefined => {
  const certificate = named(stored, CERTIFICATE)
  const key = named(stored, PRIVATE_KEY)
  if (certificate === undefined || key === undefined) return undefined
  return { id: key.id, certificate: Redacted.value(certificate.value), privateKey: Redacted.value(key.value) }
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
      SELECT url, active, deactivated_reason, header_names, auth, client_certificate IS NOT NULL AS has_certificate,
             ${sql.literal(STAMP)} AS stamp
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
        : (yield* secrets.list(endpointHeaderOwner(orgId, id))).map((h) => [h.name.toLowerCase(), Redacted.value(h.value)] as const),
      // Likewise credentials and certificates.
      oauth: row.auth === null ? undefined : oauthTarget(key, row.auth, yield* secrets.list(authOwner(orgId, id))),
      clientCertificate: row.has_certificate
        ? clientCertificate(yield* secrets.list(certificateOwner(orgId, id)))
        : undefined
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
  // Sweeps while the scope lasts; a failed sweep is logged and the next one tries again.
  yield* Effect.forkScoped(
    Effect.forever(
      Effect.andThen(
        Effect.sleep(SEND_TARGET_TTL_MS / 2),
        sweepOnce(sql, mirror).pipe(
          Effect.catchCause((cause) =>
            Cause.hasInterruptsOnly(cause)
              ? Effect.failCause(cause)
              : Effect.logWarning("the send-target sweep failed; entries lapse until the next one", Cause.squash(cause))
          ),
          Effect.withTracerEnabled(false)
        )
      )
    )
  )
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
