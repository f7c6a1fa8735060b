/**
 * Folder `log/`: the log of deliveries to concurrent targets, from take to
 * settle: `Log.ts` (take, lease, takeover, release), `HeldLeases.ts` (what
 * this process knows of its leases), `Reconcile.ts` (a lost take),
 * `SettleSuccesses.ts` (the settle of a batch of successes alone), and
 * `Unlist.ts` (quiet targets leave the log's index). It never
 * writes a row leased on its own (`rows/`) other than releasing its own
 * rows into one, and knows nothing of the worker or of HTTP. Its states
 * and guarantees: `docs/architecture.md` ("Delivery engine").
 *
 * Rows are handed out in seq order and a target's seqs become visible in
 * that order: every statement that adds logged rows upserts the target's
 * row first and holds its lock until it commits, so no row of the target
 * with a lower seq can appear after a take saw a higher one.
 */
import type { PgClient } from "@effect/sql-pg"
import { Clock, Duration, Effect, Schema } from "effect"
import { BigIntText } from "../../platform/Rows.ts"
import { decodeRows, DeliveryRow } from "../Rows.ts"
import { RATE_TOKENS, rateCharged } from "../Targets.ts"
import type { Claimed, ClaimOptions, DeliveryKind } from "../Types.ts"
import { toDelivery } from "../Types.ts"
import type { LogLeases } from "./HeldLeases.ts"
import { heldByOutcome, MAX_SEQ } from "./OutcomeHeld.ts"
import { reconcile } from "./Reconcile.ts"
import { UNLIST_EVERY_MS, unlistQuiet } from "./Unlist.ts"

/** Most targets one lease statement looks at. */
const LEASE_TARGETS = 256

const Leased = Schema.Struct({ id: Schema.String, lease_id: Schema.String, want: Schema.Number })
export type Leased = typeof Leased.Type
const leasedRows = decodeRows("delivery_targets", Leased)

const seconds = (options: ClaimOptions) => Duration.toMillis(Duration.fromInputUnsafe(options.leaseFor)) / 1000

/**
 * Which targets a lease statement may take: `fresh`, those with no lease
 * and this process's own live ones (nothing can be settled under them but
 * by this process, and nothing past a mark is in an outcome row, so their
 * rows can be handed out in the same statement); `takeover`, those whose
 * lease ran out (its holder may still settle until the lease changes hands,
 * so their rows are read by the next statement).
 */
type LeaseMode = "fresh" | "takeover"

/**
 * The CTEs `candidates`, `shares` and `picked (id, mine, start, want)`:
 * targets with logged rows waiting, not cooling down, locked `SKIP LOCKED`,
 * each its share of the claim's room, at most what its rate limit's bucket
 * holds (read under the lock: the statement that hands rows out charges it) (the room over the targets with rows
 * to give, at least one): many targets with a few rows each are worked
 * side by side, a few at a time each, not one after another with each
 * endpoint's whole bound at once (which opened as many connections to an
 * endpoint as it had rows). `start` is where its rows are read from: its
 * mark if the lease is this process's, else its cursor.
 */
const picked = (sql: PgClient.PgClient, kind: DeliveryKind, options: ClaimOptions, owner: string, mode: LeaseMode) => {
  const perFailing = Math.min(options.perTarget, options.perFailingTarget ?? options.perTarget)
  const skip = options.skipTargets ?? []
  const mine = sql`(t.lease_owner = ${owner} AND t.lease_until > now())`
  return sql`
    candidates AS (
      SELECT t.id, t.lease_until, ${mine} AS mine, CASE WHEN ${mine} THEN t.leased_to ELSE t.cursor END AS start,
        CASE WHEN t.consecutive_failures > 0 THEN ${perFailing} ELSE ${options.perTarget} END
          - CASE WHEN ${mine} THEN t.log_in_flight ELSE 0 END
          - (SELECT count(*)::int FROM deliveries b
             WHERE b.kind = ${kind} AND b.status = 'sending' AND b.lease_until > now() AND b.target_id = t.id) AS room,
        t.log_pending - CASE WHEN ${mine} THEN t.log_in_flight ELSE 0 END AS waiting,
        ${sql.literal(RATE_TOKENS)} AS tokens
      FROM delivery_targets t
      WHERE t.kind = ${kind} AND t.log_listed AND t.log_pending > 0 AND NOT t.strict
        AND (t.cooldown_until IS NULL OR t.cooldown_until <= now())
        AND ${
    mode === "fresh"
      ? sql`(t.lease_id IS NULL OR ${mine})`
      : sql`t.lease_id IS NOT NULL AND t.lease_until <= now()`
  }
        ${skip.length > 0 ? sql`AND t.id NOT IN ${sql.in([...skip])}` : sql``}
      ORDER BY t.lease_until NULLS FIRST, t.id
      LIMIT ${LEASE_TARGETS}
      FOR UPDATE OF t SKIP LOCKED
    ),
    shares AS (
      SELECT c.id, c.mine, c.start, c.lease_until,
             least(c.room, c.waiting, c.tokens, greatest(1, ceil(${options.limit}::float8 / count(*) OVER ())))::int AS want
      FROM candidates c WHERE least(c.room, c.waiting, c.tokens) > 0
    ),
    picked AS (
      SELECT id, mine, start, least(want, ${options.limit} - (upto - want))::int AS want FROM (
        SELECT s.*, sum(s.want) OVER (ORDER BY s.lease_until NULLS FIRST, s.id) AS upto FROM shares s
      ) x
      WHERE upto - want < ${options.limit}
    )
  `
}

/**
 * The CTEs `scanned`, `numbered`, `taken` and `marks (target_id, top, n)`
 * over `targets (id, start, want)`: each target's next rows past `start`,
 * walked in `deliveries_target_seq_idx` order between the row values
 * (target, start) and (target, MAX_SEQ), at most the claim's room and the
 * target's bound, and no other condition: with `seq > y` a planner without
 * statistics read and sorted the target's whole backlog per take (11.7 ms
 * at 19 000 rows; migration 0675), and without the upper bound the scan
 * read on into the next targets' rows. Rows that are not the log's (written
 * on their own, or held by an outcome row after a takeover) are skipped
 * outside the scan. The mark moves past the rows handed out, or past all
 * that was scanned when none of it could be.
 */
const rowsPast = (sql: PgClient.PgClient, targets: string, options: ClaimOptions) =>
  sql`
    scanned AS MATERIALIZED (
      SELECT p.want, r.* FROM ${sql.literal(targets)} p
      CROSS JOIN LATERAL (
        SELECT d.id, d.seq, d.org_id, d.kind, d.target_id, d.status, d.label, d.event_id, d.payload, d.meta,
               d.attempts, d.replays, d.last_error, d.next_attempt_at, d.created_at, d.finished_at
        FROM deliveries d
        WHERE (d.target_id, d.seq) > (p.id, p.start) AND (d.target_id, d.seq) <= (p.id, ${MAX_SEQ}::bigint)
        ORDER BY d.target_id, d.seq
        LIMIT ${Math.max(1, Math.min(options.perTarget, options.limit))}
      ) r
    ),
    numbered AS (
      -- One pass, no join: ok, the log's row and not held by an outcome
      -- row; n, its place among the target's ok rows (a join of the
      -- scanned rows with those taken was a nested loop over both).
      SELECT u.*, count(*) FILTER (WHERE u.ok) OVER (PARTITION BY u.target_id ORDER BY u.seq) AS n
      FROM (
        SELECT s.*, s.status = 'logged' AND NOT ${heldByOutcome(sql, "s")} AS ok
        FROM scanned s
      ) u
    ),
    taken AS (
      SELECT * FROM numbered WHERE ok AND n <= want
    ),
    marks AS (
      SELECT target_id, coalesce(max(seq) FILTER (WHERE ok AND n <= want), max(seq)) AS top,
             (count(*) FILTER (WHERE ok AND n <= want))::int AS n
      FROM numbered GROUP BY target_id
    )
  `

const TakenRow = Schema.Struct({
  ...DeliveryRow.fields,
  lease_id: Schema.String,
  mark: BigIntText,
  target_failures: Schema.Number,
  target_group: Schema.NullOr(Schema.String)
})
type TakenRow = typeof TakenRow.Type
const takenRows = decodeRows("deliveries", TakenRow)

/**
 * One statement for targets without a lease and this process's own: the
 * lease and the rows handed out under it. Answers one row more (`id` NULL)
 * saying whether a lease somewhere ran out (`takeover`).
 */
// Its rows asserted, not decoded: the take feeds every claim of a busy
// worker, and a schema decode of each full delivery row (payload included)
// would be paid on every delivery handed out of the log.
export const leaseAndTake = (sql: PgClient.PgClient, kind: DeliveryKind, options: ClaimOptions, owner: string) =>
  sql<TakenRow & { readonly takeover: boolean }>`
    WITH ${picked(sql, kind, options, owner, "fresh")},
    ${rowsPast(sql, "picked", options)},
    leased AS (
      UPDATE delivery_targets t
      SET lease_owner = ${owner},
          lease_id = CASE WHEN p.mine THEN t.lease_id ELSE gen_random_uuid() END,
          leased_to = greatest(p.start, coalesce(m.top, p.start)),
          log_in_flight = CASE WHEN p.mine THEN t.log_in_flight ELSE 0 END + coalesce(m.n, 0),
          lease_until = now() + make_interval(secs => ${seconds(options)}),
          rate_tat = ${sql.literal(rateCharged("coalesce(m.n, 0)"))},
          log_recent = true
      FROM picked p LEFT JOIN marks m ON m.target_id = p.id
      WHERE t.id = p.id
      RETURNING t.id, t.lease_id, t.leased_to, t.consecutive_failures, t.share_group
    ),
    handed AS (
      SELECT k.*, l.lease_id, l.leased_to AS mark, l.consecutive_failures AS target_failures, l.share_group AS target_group
      FROM taken k JOIN leased l ON l.id = k.target_id
    )
    SELECT h.*, f.takeover FROM (
      SELECT EXISTS (
        SELECT 1 FROM delivery_targets x
        WHERE x.kind = ${kind} AND x.log_listed AND x.log_pending > 0 AND NOT x.strict AND x.lease_id IS NOT NULL
          AND x.lease_until <= now()
      ) AS takeover
    ) f
    LEFT JOIN handed h ON true
  `

/** A takeover, first of two statements: the targets whose lease ran out, leased anew at their cursor. */
export const leaseTargets = (sql: PgClient.PgClient, kind: DeliveryKind, options: ClaimOptions, owner: string) =>
  sql`
    WITH ${picked(sql, kind, options, owner, "takeover")}
    UPDATE delivery_targets t
    SET lease_owner = ${owner}, lease_id = gen_random_uuid(), leased_to = t.cursor, log_in_flight = 0,
        lease_until = now() + make_interval(secs => ${seconds(options)}),
        -- Charged for what it may take (the next statement takes at most that).
        rate_tat = ${sql.literal(rateCharged("p.want"))},
        log_recent = true
    FROM picked p
    WHERE t.id = p.id
    RETURNING t.id, t.lease_id, p.want
  `

/**
 * The second: each taken-over target's rows past its mark (a fresh
 * snapshot, which sees everything the previous holder settled before the
 * lease changed hands), and the mark moved past them.
 */
export const takeRows = (sql: PgClient.PgClient, leased: ReadonlyArray<Leased>, options: ClaimOptions) =>
  sql`
    WITH leases AS (
      SELECT l.id, l.lease_id, l.want, t.leased_to AS start
      FROM jsonb_to_recordset(${JSON.stringify(leased)}::jsonb) AS l(id uuid, lease_id uuid, want int)
      JOIN delivery_targets t ON t.id = l.id AND t.lease_id = l.lease_id
    ),
    ${rowsPast(sql, "leases", options)},
    moved AS (
      UPDATE delivery_targets t
      SET leased_to = greatest(t.leased_to, m.top), log_in_flight = t.log_in_flight + m.n,
          lease_until = now() + make_interval(secs => ${seconds(options)})
      FROM marks m JOIN leases l ON l.id = m.target_id
      WHERE t.id = m.target_id AND t.lease_id = l.lease_id
      RETURNING t.id, t.lease_id, t.leased_to, t.consecutive_failures, t.share_group
    )
    SELECT k.*, m.lease_id, m.leased_to AS mark, m.consecutive_failures AS target_failures, m.share_group AS target_group
    FROM taken k JOIN moved m ON m.id = k.target_id
  `

/** Hands out rows of the targets this process can lease. */
export const take = Effect.fnUntraced(function*(
  sql: PgClient.PgClient,
  leases: LogLeases,
  kind: DeliveryKind,
  options: ClaimOptions
) {
  if (options.limit <= 0) return []
  if (leases.doubtful().length > 0) yield* reconcile(sql, leases)
  if (leases.unlistDue(kind, yield* Clock.currentTimeMillis, UNLIST_EVERY_MS)) {
    yield* unlistQuiet(sql, kind).pipe(Effect.orDie)
  }
  const owner = leases.owner()
  // The takeover's two statements only when a lease ran out somewhere and room is left.
  const rows = yield* Effect.gen(function*() {
    const fresh = yield* leaseAndTake(sql, kind, options, owner).pipe(Effect.orDie)
    const handed: Array<TakenRow> = fresh.filter((row) => row.id !== null)
    const room = options.limit - handed.length
    if (fresh[0]?.takeover === true && room > 0) {
      const leased = yield* leasedRows(leaseTargets(sql, kind, { ...options, limit: room }, owner)).pipe(Effect.orDie)
      if (leased.length > 0) {
        handed.push(...(yield* takenRows(takeRows(sql, leased, { ...options, limit: room })).pipe(Effect.orDie)))
      }
    }
    return handed
  }).pipe(
    // Committed, to be committed or not: the answer is lost, and what the
    // database holds under this owner id is in doubt.
    Effect.onError(() => Effect.sync(() => leases.doubt()))
  )
  const byTarget = new Map<string, { leaseId: string; mark: bigint; seqs: Array<bigint> }>()
  const claimed = rows.map((row): Claimed => {
    let taken = byTarget.get(row.target_id)
    if (taken === undefined) {
      taken = { leaseId: row.lease_id, mark: BigInt(row.mark), seqs: [] }
      byTarget.set(row.target_id, taken)
    }
    taken.seqs.push(BigInt(row.seq))
    return {
      ...toDelivery(row),
      status: "sending",
      attempts: row.attempts + 1,
      leaseOwner: row.lease_id,
      targetFailures: row.target_failures,
      targetGroup: row.target_group ?? undefined,
      claimedFrom: "logged"
    }
  })
  for (const [targetId, taken] of byTarget) {
    leases.taken(targetId, taken.leaseId, taken.mark, taken.seqs, seconds(options))
  }
  // A target leased with nothing handed out keeps its lease until it runs
  // out or a later take uses it; nothing is in flight under it here.
  return claimed
})

const releasedRows = decodeRows(
  "deliveries",
  Schema.Struct({ id: Schema.String, target_id: Schema.String, lease_id: Schema.String, ended: Schema.Boolean })
)

/**
 * Rows handed out and not sent, written `queued` (claimable per row from
 * then on, the attempt not counted), and the cursor moved past them. Only
 * under the target's current lease; answers how many.
 */
export const releaseLogged = Effect.fnUntraced(function*(
  sql: PgClient.PgClient,
  leases: LogLeases,
  claimed: ReadonlyArray<Claimed>
) {
  if (claimed.length === 0) return 0
  const byLease = new Map<string, Array<Claimed>>()
  for (const c of claimed) {
    const key = `${c.targetId}:${c.leaseOwner}`
    const list = byLease.get(key)
    if (list === undefined) byLease.set(key, [c])
    else list.push(c)
  }
  const rows: Array<{ id: string; target_id: string; lease_id: string; cursor: string | null }> = []
  for (const list of byLease.values()) {
    const { leaseOwner, targetId } = list[0]!
    const settled = leases.settle(targetId, leaseOwner, list.map((c) => BigInt(c.seq)))
    for (const c of list) {
      rows.push({ id: c.id, target_id: targetId, lease_id: leaseOwner, cursor: settled?.cursor.toString() ?? null })
    }
  }
  const targetIds = [...new Set(claimed.map((c) => c.targetId))].sort()
  const released = yield* releasedRows(sql`
    WITH locked AS (
      SELECT id, lease_id FROM delivery_targets WHERE id IN ${sql.in(targetIds)} ORDER BY id FOR UPDATE
    ),
    input AS (
      SELECT x.* FROM jsonb_to_recordset(${
    JSON.stringify(rows)
  }::jsonb) AS x(id uuid, target_id uuid, lease_id uuid, cursor bigint)
      JOIN locked l ON l.id = x.target_id AND l.lease_id = x.lease_id
    ),
    written AS (
      UPDATE deliveries d SET status = 'queued', next_attempt_at = now()
      FROM input i WHERE d.id = i.id AND d.status = 'logged'
      RETURNING d.id
    ),
    lease AS (
      UPDATE delivery_targets t
      SET log_in_flight = greatest(0, t.log_in_flight - c.n),
          cursor = greatest(t.cursor, coalesce(c.cursor, t.cursor)),
          lease_owner = CASE WHEN t.log_in_flight - c.n <= 0 THEN NULL ELSE t.lease_owner END,
          lease_id = CASE WHEN t.log_in_flight - c.n <= 0 THEN NULL ELSE t.lease_id END
      FROM (SELECT target_id, count(*)::int AS n, max(cursor) AS cursor FROM input GROUP BY target_id) c
      WHERE t.id = c.target_id
      RETURNING t.id, t.lease_id IS NULL AS ended
    )
    SELECT w.id, i.target_id, i.lease_id, coalesce(l.ended, false) AS ended
    FROM written w JOIN input i ON i.id = w.id LEFT JOIN lease l ON l.id = i.target_id
  `).pipe(
    Effect.tapCause(() =>
      Effect.sync(() => {
        // Not written: until they are, these rows hold the cursor back (as
        // a settle the database refused does), or a settle of later rows
        // would move it past rows still logged and never sent.
        for (const list of byLease.values()) {
          leases.keep(list[0]!.targetId, list[0]!.leaseOwner, list.map((c) => BigInt(c.seq)))
        }
      })
    ),
    Effect.orDie
  )
  for (const row of released) if (row.ended) leases.forget(row.target_id, row.lease_id)
  return released.length
})
