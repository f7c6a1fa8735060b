/**
 * Bulk replay: a target's `failed` deliveries created in a window, queued
 * again at once, oldest first. Each keeps its row and event id, counts a
 * replay and waits out the target's cooldown, like a single replay
 * (`Replay.ts`). The capacity rule holds: what does not fit the target's
 * queue stays failed and is counted as `notQueued`, never dropped
 * silently. One call takes at most `max` deliveries; `nextSince` says where
 * the rest of the window begins.
 *
 * One statement: the target's row is locked first (the lock order of
 * `Targets.ts`), so two bulk replays of one target, in any processes,
 * cannot together pass its capacity.
 */
import type { PgClient } from "@effect/sql-pg"
import { Effect, Schema } from "effect"
import { InstantOrNull } from "../../platform/Rows.ts"
import { inUtc } from "../../platform/Time.ts"
import { decodeRows } from "../Rows.ts"
import type { TargetRef } from "../Types.ts"

export interface BulkReplayInput extends TargetRef {
  /** RFC 3339, inclusive. */
  readonly since: string
  /** RFC 3339, exclusive; default: the database's now. */
  readonly until?: string | undefined
  readonly dryRun: boolean
  readonly capacity: number
  readonly max: number
  /** Deliveries whose `meta` has this key are never replayed (e.g. test deliveries). */
  readonly excludeMetaKey?: string | undefined
}

export interface BulkReplayResult {
  readonly matched: number
  readonly queued: number
  readonly notQueued: number
  readonly nextSince: Date | null
}

const ReplayedRows = decodeRows(
  "deliveries",
  Schema.Struct({
    matched: Schema.Number,
    queued: Schema.Number,
    taken: Schema.Number,
    next_since: InstantOrNull
  })
)

export const replayWindow = Effect.fnUntraced(function*(sql: PgClient.PgClient, input: BulkReplayInput) {
  const until = input.until === undefined ? sql`now()` : sql`${inUtc(input.until)}::timestamptz`
  const excluded = input.excludeMetaKey === undefined ? sql`` : sql`AND NOT (d.meta ? ${input.excludeMetaKey})`
  const [row] = yield* ReplayedRows(sql`
    WITH target AS (
      SELECT undelivered, cooldown_until FROM delivery_targets WHERE id = ${input.targetId} FOR UPDATE
    ),
    matched AS (
      SELECT d.id, d.seq, d.created_at FROM deliveries d
      WHERE d.target_id = ${input.targetId} AND d.org_id = ${input.orgId} AND d.kind = ${input.kind}
        AND d.status = 'failed' AND d.created_at >= ${inUtc(input.since)}::timestamptz AND d.created_at < ${until}
        ${excluded}
    ),
    taken AS (
      SELECT id, seq, created_at FROM matched ORDER BY created_at, seq LIMIT ${input.max}
    ),
    room AS (
      SELECT greatest(0, ${input.capacity} - coalesce((SELECT undelivered FROM target), 0)) AS n
    ),
    fits AS (
      SELECT id FROM taken ORDER BY created_at, seq LIMIT (SELECT n FROM room)
    ),
    queued AS (
      UPDATE deliveries d
      SET status = 'queued', replays = d.replays + 1, finished_at = NULL, lease_owner = NULL, lease_until = NULL,
          next_attempt_at = greatest(now(), coalesce((SELECT cooldown_until FROM target), now()))
      FROM fits f
      WHERE d.id = f.id AND d.status = 'failed' AND NOT ${input.dryRun}
      RETURNING d.id
    )
    SELECT (SELECT count(*) FROM matched)::int AS matched,
           CASE WHEN ${input.dryRun} THEN (SELECT count(*) FROM fits) ELSE (SELECT count(*) FROM queued) END::int AS queued,
           (SELECT count(*) FROM taken)::int AS taken,
           (SELECT min(m.created_at) FROM matched m
            WHERE (m.created_at, m.seq) > (SELECT t.created_at, t.seq FROM taken t ORDER BY t.created_at DESC, t.seq DESC LIMIT 1)
              AND (SELECT count(*) FROM matched) > ${input.max}) AS next_since
  `).pipe(Effect.orDie)
  const matched = row?.matched ?? 0
  const queued = row?.queued ?? 0
  return { matched, queued, notQueued: matched - queued, nextSince: row?.next_since ?? null } satisfies BulkReplayResult
})
