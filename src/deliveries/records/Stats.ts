/**
 * A target's delivery health over a recent window: its deliveries created
 * since then by status, and the durations of their attempts (p50, p95).
 * Reads only; reaches the rows through `deliveries_target_seq_idx`, and the
 * log's successes through one range scan of the target's outcome rows.
 */
import type { PgClient } from "@effect/sql-pg"
import { Effect, Schema } from "effect"
import { Instant } from "../../platform/Rows.ts"
import { decodeRows } from "../Rows.ts"
import type { TargetRef } from "../Types.ts"

export interface TargetStats {
  readonly since: Date
  readonly delivered: number
  readonly failed: number
  readonly pending: number
  readonly durationP50: number | null
  readonly durationP95: number | null
}

/** Percentiles come back as \`double precision\`, a number or NULL. */
const StatsRows = decodeRows(
  "deliveries",
  Schema.Struct({
    since: Instant,
    delivered: Schema.Number,
    failed: Schema.Number,
    pending: Schema.Number,
    p50: Schema.NullOr(Schema.Union([Schema.Number, Schema.String])),
    p95: Schema.NullOr(Schema.Union([Schema.Number, Schema.String]))
  })
)

export const targetStats = Effect.fnUntraced(function*(
  sql: PgClient.PgClient,
  input: TargetRef & {
    readonly hours: number
    /** Deliveries whose `meta` has this key are not counted (e.g. test deliveries). */
    readonly excludeMetaKey?: string | undefined
  }
) {
  const excluded = input.excludeMetaKey === undefined ? sql`` : sql`AND NOT (d.meta ? ${input.excludeMetaKey})`
  const [row] = yield* StatsRows(sql`
    WITH window_start AS (SELECT now() - make_interval(hours => ${input.hours}) AS at),
    recent AS (
      SELECT d.id, d.seq, d.status FROM deliveries d
      WHERE d.target_id = ${input.targetId} AND d.org_id = ${input.orgId} AND d.kind = ${input.kind}
        AND d.created_at >= (SELECT at FROM window_start) ${excluded}
    ),
    -- The log's successes in the window: the entries of the outcome rows
    -- from the window's first logged row on, read once (one range scan),
    -- not looked up per row.
    held AS (
      SELECT u.seq, x.durations_ms[u.i] AS duration_ms
      FROM delivery_outcomes x
      CROSS JOIN LATERAL unnest(x.seqs) WITH ORDINALITY AS u(seq, i)
      WHERE x.target_id = ${input.targetId}
        AND x.to_seq >= (SELECT min(seq) FROM recent WHERE status = 'logged')
    ),
    classified AS (
      SELECT r.id, r.status AS stored,
             CASE WHEN r.status <> 'logged' THEN r.status WHEN h.seq IS NOT NULL THEN 'delivered' ELSE 'queued' END AS status,
             h.duration_ms
      FROM recent r LEFT JOIN held h ON r.status = 'logged' AND h.seq = r.seq
    ),
    durations AS (
      SELECT a.duration_ms FROM delivery_attempts a JOIN classified c ON c.id = a.delivery_id AND c.stored <> 'logged'
      UNION ALL
      SELECT duration_ms FROM classified WHERE stored = 'logged' AND duration_ms IS NOT NULL
    )
    SELECT (SELECT at FROM window_start) AS since,
           count(*) FILTER (WHERE status IN ('delivered', 'partial'))::int AS delivered,
           count(*) FILTER (WHERE status = 'failed')::int AS failed,
           count(*) FILTER (WHERE status IN ('queued', 'sending', 'retrying'))::int AS pending,
           (SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY duration_ms) FROM durations) AS p50,
           (SELECT percentile_cont(0.95) WITHIN GROUP (ORDER BY duration_ms) FROM durations) AS p95
    FROM classified
  `).pipe(Effect.orDie)
  return {
    since: row!.since,
    delivered: row!.delivered,
    failed: row!.failed,
    pending: row!.pending,
    durationP50: row!.p50 === null ? null : Math.round(Number(row!.p50)),
    durationP95: row!.p95 === null ? null : Math.round(Number(row!.p95))
  } satisfies TargetStats
})
