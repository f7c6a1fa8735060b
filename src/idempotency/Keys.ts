/**
 * The statements of `idempotency_keys`, the one table this folder owns (the
 * retention sweep prunes it through `pruneExpired`). Every instant is the
 * database's: leases and expiry compare with `now()`, so processes sharing
 * the database agree on them.
 */
import type { PgClient } from "@effect/sql-pg"
import { Effect, Schema } from "effect"
import { rowsOf } from "../platform/Rows.ts"

/** A key's row as a repeat reads it. */
const KeyRow = Schema.Struct({
  fingerprint: Schema.String,
  state: Schema.Literals(["running", "done"]),
  /** Whether the running request's process still renews its lease. */
  leased: Schema.Boolean,
  status: Schema.NullOr(Schema.Int),
  content_type: Schema.NullOr(Schema.String),
  answer: Schema.NullOr(Schema.String),
  kept: Schema.Boolean
})
export type KeyRow = typeof KeyRow.Type

const keyRows = rowsOf("idempotency_keys", KeyRow)
const reservedRows = rowsOf("idempotency_keys", Schema.Struct({ reserved: Schema.Boolean }))
const secondsRows = rowsOf("idempotency_keys", Schema.Struct({ seconds: Schema.NullOr(Schema.Int) }))

export interface Reservation {
  readonly orgId: string
  readonly key: string
  readonly fingerprint: string
}

/**
 * Reserves the key for a request about to run: a new row, or an expired one
 * the sweep has not removed yet taken over. Nothing when the key is held
 * (read it with `read`) or when the organization holds `maxKeys` keys.
 * The count stops at `maxKeys` (an index-only walk of at most that many
 * entries of the organization).
 */
export const reserve = (
  sql: PgClient.PgClient,
  r: Reservation,
  options: { readonly ttlSeconds: number; readonly leaseSeconds: number; readonly maxKeys: number }
) =>
  reservedRows.all(sql`
    INSERT INTO idempotency_keys AS k (org_id, key, fingerprint, state, lease_until, expires_at)
    SELECT ${r.orgId}, ${r.key}, ${r.fingerprint}, 'running',
      now() + make_interval(secs => ${options.leaseSeconds}), now() + make_interval(secs => ${options.ttlSeconds})
    WHERE (
      SELECT count(*) FROM (SELECT 1 FROM idempotency_keys WHERE org_id = ${r.orgId} LIMIT ${options.maxKeys}) held
    ) < ${options.maxKeys}
    ON CONFLICT (org_id, key) DO UPDATE SET
      fingerprint = EXCLUDED.fingerprint, state = 'running', lease_until = EXCLUDED.lease_until, status = NULL,
      content_type = NULL, answer = NULL, kept = true, created_at = now(), expires_at = EXCLUDED.expires_at
    WHERE k.expires_at <= now()
    RETURNING true AS reserved
  `).pipe(Effect.map((rows) => rows.length > 0))

/** The key's row, unless it expired. */
export const read = (sql: PgClient.PgClient, orgId: string, key: string) =>
  keyRows.one(sql`
    SELECT fingerprint, state, lease_until > now() AS leased, status, content_type, answer, kept
    FROM idempotency_keys WHERE org_id = ${orgId} AND key = ${key} AND expires_at > now()
  `)

/** Seconds until the organization's oldest key expires (when it holds as many as it may). */
export const secondsUntilOldestExpires = (sql: PgClient.PgClient, orgId: string) =>
  secondsRows.one(sql`
    SELECT ceil(extract(epoch FROM min(expires_at) - now()))::int AS seconds
    FROM idempotency_keys WHERE org_id = ${orgId}
  `).pipe(Effect.map((row) => Math.max(1, row?.seconds ?? 1)))

/** The running request's process is alive: its lease goes on. */
export const renew = (sql: PgClient.PgClient, r: Reservation, leaseSeconds: number) =>
  sql`
    UPDATE idempotency_keys SET lease_until = now() + make_interval(secs => ${leaseSeconds})
    WHERE org_id = ${r.orgId} AND key = ${r.key} AND fingerprint = ${r.fingerprint} AND state = 'running'
  `.pipe(Effect.orDie, Effect.asVoid)

/** The answer of the request that reserved the key. */
export const complete = (
  sql: PgClient.PgClient,
  r: Reservation,
  answer: {
    readonly status: number
    readonly contentType: string | null
    readonly sealed: string | null
    readonly kept: boolean
  }
) =>
  sql`
    UPDATE idempotency_keys SET state = 'done', lease_until = now(), status = ${answer.status},
      content_type = ${answer.contentType}, answer = ${answer.sealed}, kept = ${answer.kept}
    WHERE org_id = ${r.orgId} AND key = ${r.key} AND fingerprint = ${r.fingerprint} AND state = 'running'
  `.pipe(Effect.orDie, Effect.asVoid)

/** The request failed in a way that is not kept (5xx, a refused body): the key is free again. */
export const release = (sql: PgClient.PgClient, r: Reservation) =>
  sql`
    DELETE FROM idempotency_keys
    WHERE org_id = ${r.orgId} AND key = ${r.key} AND fingerprint = ${r.fingerprint} AND state = 'running'
  `.pipe(Effect.orDie, Effect.asVoid)

/** Deletes at most `batch` expired keys (retention); answers how many. */
export const pruneExpired = (sql: PgClient.PgClient, batch: number) =>
  sql`
    DELETE FROM idempotency_keys WHERE ctid IN (
      SELECT ctid FROM idempotency_keys WHERE expires_at <= now() LIMIT ${batch} FOR UPDATE SKIP LOCKED
    )
    RETURNING 1 AS deleted
  `.pipe(Effect.map((rows) => rows.length), Effect.orDie)
