/**
 * Quiet targets leave the log's index. `delivery_targets_log_idx` lists the
 * targets with `log_listed` (migration 1000: `log_pending > 0 OR
 * log_recent`, and every lease sets `log_recent`), so that a target's
 * counts and lease change with each delivery while the index's predicate
 * does not, and those updates are HOT (no index entries written, the old
 * version pruned on its page). A target with nothing logged whose last
 * lease ran out is quiet: its `log_recent` is cleared here, the one update
 * of a quiet spell that writes index entries; its next logged row lists it
 * again. A take runs this at most every `UNLIST_EVERY_MS` per kind (a
 * target the lease statements read meanwhile costs them a row skipped),
 * not in the lease statement itself, which runs for every claim.
 */
import type { PgClient } from "@effect/sql-pg"
import type { DeliveryKind } from "../Types.ts"

export const UNLIST_EVERY_MS = 10_000

/** Rows another statement holds are left for the next time. */
export const unlistQuiet = (sql: PgClient.PgClient, kind: DeliveryKind) =>
  sql`
    UPDATE delivery_targets t SET log_recent = false
    FROM (
      SELECT x.id FROM delivery_targets x
      WHERE x.kind = ${kind} AND x.log_listed AND x.log_recent AND x.log_pending = 0
        AND NOT coalesce(x.lease_until > now(), false)
      ORDER BY x.id
      FOR UPDATE SKIP LOCKED
    ) q
    WHERE t.id = q.id
  `
