/**
 * Target health and a target's end: failing what a removed or deactivated
 * target still had to deliver, dropping its health record, and reading its
 * cooldown; its ordering and rate limit; the lock order of every statement on targets (`targetsFirst`).
 */
import type { PgClient } from "@effect/sql-pg"
import { Effect, Option } from "effect"
import type { Statement } from "effect/sql"
import type { DatabaseInfo } from "../database/Database.ts"
import { heldByOutcome } from "./log/OutcomeHeld.ts"
import * as Rows from "./Rows.ts"
import { type DeliveryKind, UNDELIVERED } from "./Types.ts"

// Lock order. A statement that changes both deliveries and their
// targets' rows (health, and the count the triggers keep) takes the
// target rows first, in id order, then the deliveries: otherwise two
// processes settling overlapping targets, or a settle beside an
// endpoint's deletion, can deadlock, and an aborted settle means the
// deliveries are sent again once their leases run out. Enqueueing
// locks no existing delivery and its trigger takes targets in id
// order; claims and releases leave the counts alone. PGlite is one
// session, where nothing waits for a lock: there the extra statement
// and transaction are skipped.
const targetsFirst = <A, R>({ info, sql }: ServerOrEmbedded, targetId: string, effect: Effect.Effect<A, never, R>) =>
  info.kind !== "server"
    ? effect
    : sql.withTransaction(
      Effect.andThen(sql`SELECT id FROM delivery_targets WHERE id = ${targetId} FOR UPDATE`, effect)
    ).pipe(Effect.orDie)

/** The client and what kind of database it speaks to (a server takes the targets' locks first). */
export interface ServerOrEmbedded {
  readonly sql: PgClient.PgClient
  readonly info: DatabaseInfo["Service"]
}

// The target's undelivered rows (logged ones included) as failed with
// `reason`. `sending` rows are failed too: their settle finds the lease
// gone (a request in flight may still arrive: deliveries are at least
// once, docs/webhooks.md "Delivery"). The attempt that deactivated a
// target is recorded before this runs (`EndpointHealth.ts`).
const failTargetUndelivered = (sql: PgClient.PgClient, kind: DeliveryKind, targetId: string, reason: string) =>
  sql`
  failed AS (
    UPDATE deliveries d
    SET status = 'failed', last_error = ${reason}, finished_at = now(), lease_owner = NULL, lease_until = NULL
    WHERE d.kind = ${kind} AND d.target_id = ${targetId}
      AND (d.status IN ${sql.in(UNDELIVERED as Array<string>)} OR (d.status = 'logged' AND ${
    loggedUndelivered(sql, targetId)
  }))
    RETURNING d.id
  )
`

/** A logged row `d` of the target not yet settled: past the cursor, and no outcome row holds it. */
export const loggedUndelivered = (sql: PgClient.PgClient, targetId: string) =>
  sql`d.seq > coalesce((SELECT cursor FROM delivery_targets WHERE id = ${targetId}), 0)
      AND NOT ${heldByOutcome(sql, "d")}`

/** The target's log lease ends: nothing is in flight under it any more, and its cursor is past all it handed out. */
const endLease = (sql: PgClient.PgClient, targetId: string) =>
  sql`
    UPDATE delivery_targets
    SET lease_owner = NULL, lease_id = NULL, log_in_flight = 0, cursor = greatest(cursor, leased_to)
    WHERE id = ${targetId} AND lease_id IS NOT NULL
    RETURNING id
  `

/**
 * The target's undelivered deliveries failed with `reason`, and `then`
 * (a statement named `after` on the target), in one statement with the
 * target's row locked first; answers how many failed.
 */
const failThen = (
  { info, sql }: ServerOrEmbedded,
  kind: DeliveryKind,
  targetId: string,
  reason: string,
  then: Statement.Fragment
) =>
  targetsFirst(
    { info, sql },
    targetId,
    Rows.count(sql`
    WITH ${failTargetUndelivered(sql, kind, targetId, reason)}, after AS (${then})
    SELECT (SELECT count(*)::int FROM failed) AS n, (SELECT count(*) FROM after) AS after
  `).pipe(Effect.orDie)
  ).pipe(Effect.map((rows) => rows[0]!.n))

export const failUndelivered = (ctx: ServerOrEmbedded, kind: DeliveryKind, targetId: string, reason: string) =>
  failThen(ctx, kind, targetId, reason, endLease(ctx.sql, targetId))

// One statement: the count trigger then finds the target row gone and
// leaves it gone.
export const removeTarget = Effect.fnUntraced(function*(
  ctx: ServerOrEmbedded,
  kind: DeliveryKind,
  targetId: string,
  reason: string,
  options?: { readonly dropPayloads?: boolean | undefined }
) {
  const { sql } = ctx
  const n = yield* failThen(
    ctx,
    kind,
    targetId,
    reason,
    sql`
    DELETE FROM delivery_targets WHERE id = ${targetId} AND kind = ${kind} RETURNING id
  `
  )
  // Nothing of the target can be sent any more: its payloads go too.
  if (options?.dropPayloads === true) {
    yield* sql`
      UPDATE deliveries SET payload = NULL
      WHERE kind = ${kind} AND target_id = ${targetId} AND payload IS NOT NULL
    `.pipe(Effect.orDie)
  }
  return n
})

/**
 * A target's failing streak (`failing_since`), kept beside the failures and
 * cooldown the settle writes. Statements for a caller's CTE or transaction:
 * `start` answers `id, failing_since` when it began a streak (none running,
 * and `when` holds over the row `t`); `end` ends one where `when` holds.
 */
export const failingStreak = {
  start: (sql: PgClient.PgClient, targetId: string, when: Statement.Fragment) =>
    sql`UPDATE delivery_targets t SET failing_since = now()
        WHERE t.id = ${targetId} AND t.failing_since IS NULL AND ${when} RETURNING t.id, t.failing_since`,
  end: (sql: PgClient.PgClient, targetId: string, when: Statement.Fragment = sql`true`) =>
    sql`UPDATE delivery_targets t SET failing_since = NULL WHERE t.id = ${targetId} AND t.failing_since IS NOT NULL AND ${when}`
}

export const cooldownUntil = Effect.fnUntraced(function*(sql: PgClient.PgClient, targetId: string) {
  const [row] = yield* Rows.cooldown(sql`
    SELECT cooldown_until FROM delivery_targets WHERE id = ${targetId} AND cooldown_until > now()
  `).pipe(Effect.orDie)
  return Option.fromNullishOr(row?.cooldown_until ?? null)
})

/** Kept on the target's row (created here when it has none yet), which the claim reads. */
export const setStrict = Effect.fnUntraced(function*(
  sql: PgClient.PgClient,
  kind: DeliveryKind,
  orgId: string,
  targetId: string,
  strict: boolean
) {
  yield* sql`
    INSERT INTO delivery_targets AS t (id, org_id, kind, strict) VALUES (${targetId}, ${orgId}, ${kind}, ${strict})
    ON CONFLICT (id) DO UPDATE SET strict = EXCLUDED.strict WHERE t.strict <> EXCLUDED.strict
  `.pipe(Effect.orDie)
  // A strict target is claimed per row, head first: what waits in its log
  // is written `queued` (in seq order, as it waits), and its log lease
  // ends (what is in flight under it may be sent again).
  if (strict) {
    yield* sql`
      WITH ended AS (${endLease(sql, targetId)})
      UPDATE deliveries d SET status = 'queued', next_attempt_at = now()
      WHERE d.target_id = ${targetId} AND d.status = 'logged' AND ${loggedUndelivered(sql, targetId)}
        AND (SELECT count(*) FROM ended) >= 0
    `.pipe(Effect.orDie)
  }
})

/**
 * The bound the target shares with others (`share_group`; null: none),
 * answered with every delivery a claim hands out (`Claimed.targetGroup`).
 */
export const setGroup = Effect.fnUntraced(function*(
  sql: PgClient.PgClient,
  kind: DeliveryKind,
  orgId: string,
  targetId: string,
  group: string | null
) {
  yield* sql`
    INSERT INTO delivery_targets AS t (id, org_id, kind, share_group) VALUES (${targetId}, ${orgId}, ${kind}, ${group})
    ON CONFLICT (id) DO UPDATE SET share_group = EXCLUDED.share_group WHERE t.share_group IS DISTINCT FROM EXCLUDED.share_group
  `.pipe(Effect.orDie)
})

/**
 * Kept on the target's row (created here when it has none yet), which the
 * claims read: `rate_limit` deliveries per second, a burst of one second's
 * worth, `rate_tat` the bucket's theoretical arrival time (GCRA, as
 * `org_rate_limits` in `src/feedback/Promotion.ts`). A lifted limit
 * forgets the bucket; a changed one keeps it.
 */
export const setRateLimit = Effect.fnUntraced(function*(
  sql: PgClient.PgClient,
  kind: DeliveryKind,
  orgId: string,
  targetId: string,
  perSecond: number | null
) {
  yield* sql`
    INSERT INTO delivery_targets AS t (id, org_id, kind, rate_limit) VALUES (${targetId}, ${orgId}, ${kind}, ${perSecond})
    ON CONFLICT (id) DO UPDATE SET rate_limit = EXCLUDED.rate_limit,
      rate_tat = CASE WHEN EXCLUDED.rate_limit IS NULL THEN NULL ELSE t.rate_tat END
  `.pipe(Effect.orDie)
})

/**
 * SQL over a `delivery_targets` row `t`: how many deliveries its rate limit
 * lets a claim hand out now (the bucket's tokens; a large number when
 * unlimited), read under the row's lock.
 */
export const RATE_TOKENS = `CASE WHEN t.rate_limit IS NULL THEN 2147483647
  ELSE floor(t.rate_limit - extract(epoch FROM greatest(t.rate_tat, now()) - now()) * t.rate_limit)::int END`

/** SQL: the row's `rate_tat` after handing out `n` (an SQL expression) deliveries. */
export const rateCharged = (n: string) =>
  `CASE WHEN t.rate_limit IS NULL OR ${n} <= 0 THEN t.rate_tat
   ELSE greatest(t.rate_tat, now()) + make_interval(secs => (${n})::float8 / t.rate_limit) END`

/** SQL: when the row's bucket next has a token (NULL when unlimited or full), 1 ms late rather than early. */
export const RATE_READY = `t.rate_tat - make_interval(secs => (t.rate_limit - 1)::float8 / t.rate_limit - 0.001)`
