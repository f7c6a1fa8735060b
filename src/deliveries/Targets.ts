/**
 * Target health and a target's end: failing what a removed or deactivated
 * target still had to deliver, dropping its health record, and reading its
 * cooldown. Statements that change both deliveries and target rows take
 * the target rows first (`targetsFirst`). Spans are opened by
 * `DeliveryQueue`, which wires these.
 */
import type { PgClient } from "@effect/sql-pg"
import { Effect, Option } from "effect"
import type { DatabaseInfo } from "../platform/Database.ts"
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
const targetsFirst = <A, R>(
  sql: PgClient.PgClient,
  info: DatabaseInfo["Service"],
  targetIds: ReadonlyArray<string>,
  effect: Effect.Effect<A, never, R>
) =>
  info.kind !== "server" || targetIds.length === 0
    ? effect
    : sql.withTransaction(Effect.gen(function*() {
      const ordered = [...new Set(targetIds)].sort()
      yield* sql`SELECT id FROM delivery_targets WHERE id IN ${sql.in(ordered)} ORDER BY id FOR UPDATE`
      return yield* effect
    })).pipe(Effect.orDie)

/** The client and what kind of database it speaks to (a server takes the targets' locks first). */
export interface ServerOrEmbedded {
  readonly sql: PgClient.PgClient
  readonly info: DatabaseInfo["Service"]
}

// `sending` rows are failed too: their settle then finds the lease gone
// (a request already in flight may still arrive, as the spec allows).
// The target's undelivered rows as failed with `reason`, answering their
// ids; `except`: the delivery whose handler decided this (it settles itself).
const failTargetUndelivered = (sql: PgClient.PgClient, kind: DeliveryKind, targetId: string, reason: string, except?: string) => sql`
  UPDATE deliveries
  SET status = 'failed', last_error = ${reason}, finished_at = now(), lease_owner = NULL, lease_until = NULL
  WHERE kind = ${kind} AND target_id = ${targetId} AND status IN ${sql.in(UNDELIVERED as Array<string>)}
  ${except === undefined ? sql`` : sql`AND id <> ${except}`}
  RETURNING id
`

export const failUndelivered = Effect.fnUntraced(function*(
  { info, sql }: ServerOrEmbedded,
  kind: DeliveryKind,
  targetId: string,
  reason: string,
  options?: { readonly except?: string | undefined }
) {
  const rows = yield* targetsFirst(
    sql,
    info,
    [targetId],
    sql<{ id: string }>`${failTargetUndelivered(sql, kind, targetId, reason, options?.except)}`.pipe(Effect.orDie)
  )
  return rows.length
})

// One statement: the count trigger then finds the target row gone and
// leaves it gone.
export const removeTarget = Effect.fnUntraced(function*(
  { info, sql }: ServerOrEmbedded,
  kind: DeliveryKind,
  targetId: string,
  reason: string,
  options?: { readonly dropPayloads?: boolean | undefined }
) {
  const [row] = yield* targetsFirst(sql, info, [targetId], sql<{ n: number }>`
    WITH failed AS (${failTargetUndelivered(sql, kind, targetId, reason)}),
    forgotten AS (
      DELETE FROM delivery_targets WHERE id = ${targetId} AND kind = ${kind} RETURNING id
    )
    SELECT (SELECT count(*)::int FROM failed) AS n, (SELECT count(*) FROM forgotten) AS forgotten
  `.pipe(Effect.orDie))
  // Nothing of the target can be sent any more: its payloads go too.
  if (options?.dropPayloads === true) {
    yield* sql`
      UPDATE deliveries SET payload = NULL
      WHERE kind = ${kind} AND target_id = ${targetId} AND payload IS NOT NULL
    `.pipe(Effect.orDie)
  }
  return row!.n
})

export const cooldownUntil = Effect.fnUntraced(function*(sql: PgClient.PgClient, targetId: string) {
  const [row] = yield* sql<{ cooldown_until: Date | null }>`
    SELECT cooldown_until FROM delivery_targets WHERE id = ${targetId} AND cooldown_until > now()
  `.pipe(Effect.orDie)
  return Option.fromNullishOr(row?.cooldown_until ?? null)
})

/**
 * Whether the target's deliveries go one at a time in the order they were
 * enqueued (`strict`) or several at once in no promised order. Kept on the
 * target's row (created here when it has none yet), which the claim reads.
 */
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
})
