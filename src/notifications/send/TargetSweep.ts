/**
 * The send targets' faster path: one statement every half second keeps the
 * mirror (`SendTargets.ts`) fresh for all its endpoints, instead of each
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
 * Speeds up: a lookup is three statements and three decryptions (the
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
import type { PgClient } from "@effect/sql-pg"
import { Cause, Clock, Effect, Schema } from "effect"
import { rowsOf } from "../../platform/Rows.ts"

/** The secret kinds an endpoint's send target is made of. */
const KINDS = "'notification_endpoint', 'notification_endpoint_url', 'notification_endpoint_header'"

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

export interface Sweepable {
  readonly toCheck: () => Array<readonly [string, string]>
  readonly confirm: (key: string, stamp: string | undefined, startedAt: number) => boolean
}

/** One sweep of `mirror`: answers the keys whose entries went. */
export const sweepOnce = Effect.fnUntraced(function*(sql: PgClient.PgClient, mirror: Sweepable) {
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

/** Sweeps `mirror` every `everyMs` while the scope lasts; a failed sweep is logged and the next one tries again. */
export const keepSweeping = (sql: PgClient.PgClient, mirror: Sweepable, everyMs: number) =>
  Effect.forkScoped(
    Effect.forever(
      Effect.andThen(
        Effect.sleep(everyMs),
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
