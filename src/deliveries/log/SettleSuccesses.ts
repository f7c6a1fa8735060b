/**
 * The settle of a batch that holds only successes of rows handed out of
 * the log under leases this process knows: the common batch of a busy
 * endpoint. One outcome row and one update of the target row per target,
 * from arrays, instead of the general settle (`Statements.ts`), whose
 * every part (rows written, attempts, health rounds over failures, the
 * JSON input) is planned and run for any batch.
 *
 * Speeds up: the server's CPU per batch of 14 in the drain study
 * (`bench/sql/drain-study.ts`) went from 573-847 µs to 251-477 µs
 * (`bench/notes/delivery-log.md`, "What was cut").
 *
 * It writes what the general settle writes for such a batch, and nothing
 * else: per target whose lease is still the one the items were handed out
 * under, the outcome row (`seqs` in order, their status codes and
 * durations), the target's counts less the batch, its failures reset and
 * any cooldown ended, its cursor moved to where this process knows every
 * row below is settled, and its lease extended while rows are still in
 * flight under it or ended with the last. A target whose lease changed
 * records nothing (its items are not held). The targets are locked in id
 * order before anything is written, as every statement on targets does.
 * It answers, per target, whether rows of the log still wait for it, not
 * handed out, and whether its failures or cooldown ended: the worker's
 * next claim asks the log, and the per-row statement, only then
 * (`worker/ClaimSides.ts`).
 */
import type { PgClient } from "@effect/sql-pg"
import { Duration, Effect } from "effect"
import type { Settled, SettleItem } from "../Types.ts"

/** One target's part of the batch: its lease, where its cursor may move, and the seqs delivered. */
interface TargetPart {
  readonly targetId: string
  readonly leaseId: string
  readonly orgId: string
  readonly cursor: bigint
  readonly leaseSeconds: number
  /** `[seq, status code, duration ms]`, sorted by seq once complete. */
  readonly rows: Array<readonly [bigint, number | null, number]>
}

/**
 * The batch by target, when it is one this statement can settle: every
 * item delivered, handed out of the log, under the one lease per target
 * that `log` (what `LogLeases.settle` answered) knows. Otherwise undefined:
 * the general settle takes it.
 */
export const logSuccesses = (
  items: ReadonlyArray<SettleItem>,
  log: ReadonlyMap<string, { readonly cursor: bigint; readonly leaseSeconds: number }>
): ReadonlyArray<TargetPart> | undefined => {
  const parts = new Map<string, TargetPart>()
  for (const { attempt, claimed, outcome } of items) {
    if (outcome._tag !== "Delivered" || claimed.claimedFrom !== "logged") return undefined
    let part = parts.get(claimed.targetId)
    if (part === undefined) {
      const lease = log.get(claimed.targetId)
      if (lease === undefined) return undefined
      part = {
        targetId: claimed.targetId,
        leaseId: claimed.leaseOwner,
        orgId: claimed.orgId,
        cursor: lease.cursor,
        leaseSeconds: lease.leaseSeconds,
        rows: []
      }
      parts.set(claimed.targetId, part)
    } else if (part.leaseId !== claimed.leaseOwner) {
      return undefined
    }
    part.rows.push([BigInt(claimed.seq), attempt.statusCode ?? null, Math.max(0, Math.round(attempt.durationMs))])
  }
  const all = [...parts.values()].sort((a, b) => (a.targetId < b.targetId ? -1 : a.targetId > b.targetId ? 1 : 0))
  for (const part of all) part.rows.sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0))
  return all
}

const arrayLiteral = (values: ReadonlyArray<bigint | number | null>) =>
  `{${values.map((value) => (value === null ? "NULL" : String(value))).join(",")}}`

/**
 * Settles `parts` (from `logSuccesses`) in one statement; answers per
 * target whether its lease held, whether it ended, whether rows of the
 * log still wait for it, not handed out, and whether its failures or
 * cooldown ended.
 */
// Its rows asserted, not decoded: this is the settle of a busy endpoint's
// every batch, and its answer is ours, one row per target.
export const settleLogSuccesses = (sql: PgClient.PgClient, parts: ReadonlyArray<TargetPart>) =>
  sql<{ id: string; log_ended: boolean; log_waiting: boolean; recovered: boolean }>`
    WITH input AS (
      SELECT * FROM unnest(
        ${parts.map((p) => p.targetId)}::uuid[], ${parts.map((p) => p.leaseId)}::uuid[],
        ${parts.map((p) => p.orgId)}::uuid[], ${parts.map((p) => p.cursor.toString())}::bigint[],
        ${parts.map((p) => p.leaseSeconds)}::float8[], ${parts.map((p) => p.rows.length)}::int[],
        ${parts.map((p) => arrayLiteral(p.rows.map((r) => r[0])))}::text[],
        ${parts.map((p) => arrayLiteral(p.rows.map((r) => r[1])))}::text[],
        ${parts.map((p) => arrayLiteral(p.rows.map((r) => r[2])))}::text[]
      ) AS x(target_id, lease_id, org_id, log_cursor, lease_secs, n, seqs, codes, durations)
    ),
    locked AS (
      SELECT t.id, t.lease_id, t.consecutive_failures > 0 OR t.cooldown_until IS NOT NULL AS recovering
      FROM delivery_targets t WHERE t.id IN (SELECT target_id FROM input) ORDER BY t.id FOR UPDATE
    ),
    held AS (
      SELECT i.*, l.recovering FROM input i JOIN locked l ON l.id = i.target_id AND l.lease_id = i.lease_id
    ),
    outcomes AS (
      INSERT INTO delivery_outcomes (target_id, to_seq, from_seq, org_id, seqs, status_codes, durations_ms)
      SELECT h.target_id, s[cardinality(s)], s[1], h.org_id, s, h.codes::int[], h.durations::int[]
      FROM held h CROSS JOIN LATERAL (SELECT h.seqs::bigint[] AS s) q
      RETURNING target_id
    ),
    health AS (
      UPDATE delivery_targets t
      SET consecutive_failures = 0, cooldown_until = NULL,
          undelivered = greatest(0, t.undelivered - h.n),
          log_pending = greatest(0, t.log_pending - h.n),
          log_in_flight = greatest(0, t.log_in_flight - h.n),
          cursor = greatest(t.cursor, h.log_cursor),
          lease_until = CASE WHEN t.log_in_flight > h.n
            THEN greatest(t.lease_until, now() + make_interval(secs => h.lease_secs)) ELSE t.lease_until END,
          lease_owner = CASE WHEN t.log_in_flight <= h.n THEN NULL ELSE t.lease_owner END,
          lease_id = CASE WHEN t.log_in_flight <= h.n THEN NULL ELSE t.lease_id END
      FROM held h
      WHERE t.id = h.target_id AND (SELECT count(*) FROM outcomes) >= 0
      RETURNING t.id, t.lease_id IS NULL AS log_ended, t.log_pending > t.log_in_flight AS log_waiting,
        h.recovering AS recovered
    )
    SELECT id, log_ended, log_waiting, recovered FROM health
  `.pipe(Effect.orDie)

const NONE: ReadonlyMap<string, number> = new Map()

/** `Settled` of the batch `items` from what `settleLogSuccesses` answered. */
export const settledOf = (
  items: ReadonlyArray<SettleItem>,
  parts: ReadonlyArray<TargetPart>,
  rows: ReadonlyArray<{ id: string; log_waiting: boolean; recovered: boolean }>
): Settled => {
  const held = new Set(rows.map((row) => row.id))
  return {
    held: items.map((item) => held.has(item.claimed.targetId)),
    coolingFor: new Map<string, Duration.Duration>(),
    // Nothing failed: no target's failures to apply.
    failures: NONE,
    // A target whose lease changed hands answers nothing here: it may.
    logWaiting: rows.length < parts.length || rows.some((row) => row.log_waiting),
    // A target whose failures or cooldown ended may have rows on their own due sooner.
    rowsChanged: rows.some((row) => row.recovered)
  }
}
