/**
 * Folder `rows/`: deliveries leased one row at a time (telemetry batches,
 * emails, strict endpoints, and a webhook delivery once an attempt of it
 * failed, was released or replayed): `Statements.ts` (claim, next due,
 * settle), `EmptyClaimAnswer.ts` (what a claim that takes nothing
 * answers instead), `SettleInput.ts` (the settle's input as JSON text),
 * `Replay.ts` and `BulkReplay.ts`. It moves no log cursor or lease except
 * through the settle's log part, and knows nothing of the worker or of HTTP.
 *
 * The queue's hot statements, built here so that their plans can be
 * checked (`test/integration/deliveries/plans.test.ts` EXPLAINs them on a
 * server with a large backlog and no statistics): the claim, the next due
 * instant and the settle. The first two start from the same skip scan of
 * `deliveries_waiting_idx`, so they cost O(waiting targets + rows taken),
 * never O(queue length), whatever the planner's statistics say; the settle
 * reaches its rows by primary key.
 */
import { Duration } from "effect"
import type { SqlClient } from "effect/sql"
import { RATE_READY, RATE_TOKENS, rateCharged } from "../Targets.ts"
import type { ClaimOptions, DeliveryKind } from "../Types.ts"
import { claimedOrNextDue } from "./EmptyClaimAnswer.ts"

/**
 * `waiting(target_id)`: every target with queued or retrying rows (of any
 * kind: ids never collide across kinds, and a kind condition would steer
 * the planner off the index), one index probe each, plus a final NULL.
 */
const waitingTargets = (sql: SqlClient.SqlClient) =>
  sql.literal(`waiting AS (
            (SELECT target_id FROM deliveries
             WHERE status IN ('queued', 'retrying')
             ORDER BY target_id LIMIT 1)
            UNION ALL
            SELECT (SELECT d.target_id FROM deliveries d
                    WHERE d.status IN ('queued', 'retrying') AND d.target_id > w.target_id
                    ORDER BY d.target_id LIMIT 1)
            FROM waiting w WHERE w.target_id IS NOT NULL
          )`)

/**
 * Takes leases on due deliveries of `kind` for `leaseOwner`: due
 * queued/retrying rows, or sending rows whose lease expired, of targets not
 * cooling down (and not in `skipTargets`), at most `perTarget` per target
 * (`perFailingTarget` for one whose latest attempt failed) counting leases
 * already live, `limit` in all, oldest due first. Rows another statement
 * holds are skipped, not waited for. A strict target (`delivery_targets.strict`)
 * gives at most one, and only its head: its undelivered row of lowest
 * `seq`, once that one is due (a retry that waits holds the ones behind it).
 * A target with a rate limit gives at most what its bucket holds, and the
 * same statement charges the bucket for what it gave. Claiming nothing, it
 * answers when the next delivery becomes claimable instead
 * (`EmptyClaimAnswer.ts`; `logOwner`: this process's owner of log leases).
 */
export const claimStatement = (
  sql: SqlClient.SqlClient,
  kind: DeliveryKind,
  options: ClaimOptions,
  leaseOwner: string,
  logOwner: string
) =>
  sql`
          WITH RECURSIVE ${waitingTargets(sql)},
          targets AS (
            SELECT target_id FROM waiting WHERE target_id IS NOT NULL
            UNION
            SELECT target_id FROM deliveries WHERE kind = ${kind} AND status = 'sending' AND lease_until <= now()
          ),
          -- Targets with a rate limit (delivery_targets_rate_idx: none for
          -- most), locked so that claims in several processes share one
          -- bucket; one another process holds is skipped this time.
          limited AS (
            SELECT t.id, ${sql.literal(RATE_TOKENS)} AS tokens FROM delivery_targets t
            WHERE t.rate_limit IS NOT NULL AND t.id IN (SELECT target_id FROM targets)
            FOR UPDATE OF t SKIP LOCKED
          ),
          room AS (
            SELECT g.target_id, coalesce(t.strict, false) AS strict, least(
              CASE WHEN coalesce(t.strict, false) THEN 1
                WHEN coalesce(t.consecutive_failures, 0) > 0
                THEN ${Math.min(options.perTarget, options.perFailingTarget ?? options.perTarget)}
                ELSE ${options.perTarget} END - (
              SELECT count(*)::int FROM deliveries b
              WHERE b.kind = ${kind} AND b.status = 'sending' AND b.lease_until > now() AND b.target_id = g.target_id
            ) - CASE WHEN t.lease_until > now() THEN t.log_in_flight ELSE 0 END, coalesce(l.tokens, 2147483647)) AS free
            FROM targets g LEFT JOIN delivery_targets t ON t.id = g.target_id LEFT JOIN limited l ON l.id = g.target_id
            WHERE (t.cooldown_until IS NULL OR t.cooldown_until <= now()) AND (t.rate_limit IS NULL OR l.id IS NOT NULL)
            ${
    (options.skipTargets?.length ?? 0) > 0 ? sql`AND g.target_id NOT IN ${sql.in([...options.skipTargets!])}` : sql``
  }
          ),
          candidates AS (
            SELECT u.id, u.next_attempt_at, u.seq FROM (
            SELECT c.id, c.next_attempt_at, c.seq
            FROM room r CROSS JOIN LATERAL (
              SELECT x.id, x.next_attempt_at, x.seq FROM (
                -- As in nextDue: the kind is checked outside the range scan.
                SELECT q.id, q.next_attempt_at, q.seq FROM (
                  SELECT d.id, d.next_attempt_at, d.seq, d.kind FROM deliveries d
                  WHERE d.target_id = r.target_id AND d.status IN ('queued', 'retrying') AND d.next_attempt_at <= now()
                  ORDER BY d.target_id, d.next_attempt_at, d.seq LIMIT greatest(r.free, 0)
                ) q WHERE q.kind = ${kind}
                UNION ALL
                (SELECT d.id, d.next_attempt_at, d.seq FROM deliveries d
                 WHERE d.target_id = r.target_id AND d.kind = ${kind} AND d.status = 'sending' AND d.lease_until <= now()
                 ORDER BY d.next_attempt_at, d.seq LIMIT greatest(r.free, 0))
              ) x
              ORDER BY x.next_attempt_at, x.seq LIMIT greatest(r.free, 0)
            ) c
            WHERE r.free > 0 AND NOT r.strict
            UNION ALL
            -- A strict target: its head (undelivered row of lowest seq), if
            -- it can be sent now; nothing behind it is.
            SELECT h.id, h.next_attempt_at, h.seq
            FROM room r CROSS JOIN LATERAL (
              SELECT d.id, d.next_attempt_at, d.seq, d.kind, d.status, d.lease_until FROM deliveries d
              WHERE d.target_id = r.target_id AND d.status IN ('queued', 'sending', 'retrying')
              ORDER BY d.target_id, d.seq LIMIT 1
            ) h
            WHERE r.free > 0 AND r.strict AND h.kind = ${kind}
              AND ((h.status IN ('queued', 'retrying') AND h.next_attempt_at <= now())
                OR (h.status = 'sending' AND h.lease_until <= now()))
            ) u
            ORDER BY u.next_attempt_at, u.seq
            LIMIT ${options.limit}
          ),
          picked AS (
            SELECT d.id, d.target_id, d.status AS claimed_from FROM deliveries d
            WHERE d.id IN (SELECT id FROM candidates)
            FOR UPDATE OF d SKIP LOCKED
          ),
          claimed AS (
            UPDATE deliveries d
            SET status = 'sending', lease_owner = ${leaseOwner},
                lease_until = now() + make_interval(secs => ${Duration.toMillis(options.leaseFor) / 1000}),
                attempts = d.attempts + 1
            FROM picked p LEFT JOIN delivery_targets t ON t.id = p.target_id
            WHERE d.id = p.id
              AND ((d.status IN ('queued', 'retrying') AND d.next_attempt_at <= now())
                OR (d.status = 'sending' AND d.lease_until <= now()))
            RETURNING d.id, d.seq, d.org_id, d.kind, d.target_id, d.status, d.label, d.event_id, d.payload, d.meta,
                      d.attempts, d.replays, d.last_error, d.next_attempt_at, d.created_at, d.finished_at,
                      d.lease_owner, coalesce(t.consecutive_failures, 0) AS target_failures, t.share_group AS target_group,
                      p.claimed_from
          ),
          -- The rate-limited targets' buckets pay for what was handed out.
          charged AS (
            UPDATE delivery_targets t SET rate_tat = ${sql.literal(rateCharged("c.n"))}
            FROM (SELECT target_id, count(*)::int AS n FROM claimed GROUP BY target_id) c
            WHERE t.id = c.target_id AND t.id IN (SELECT id FROM limited)
          )
          ${claimedOrNextDue(sql, nextDueAt(sql, kind, logOwner))}
`

/** `DeliveryQueue.nextDue`'s statement; NULL when none waits. */
export const nextDueStatement = (sql: SqlClient.SqlClient, kind: DeliveryKind, owner: string) =>
  sql`
          WITH RECURSIVE ${waitingTargets(sql)}
          SELECT ${nextDueAt(sql, kind, owner)} AS at
`

/**
 * When the next delivery of `kind` becomes claimable (due, out of
 * cooldown, its lease run out, its rate limit's next token), for a
 * statement with the CTE `waiting`; NULL when none waits. `owner`: this
 * process's owner of log leases.
 */
const nextDueAt = (sql: SqlClient.SqlClient, kind: DeliveryKind, owner: string) =>
  sql`least(
            (SELECT min(greatest(
                      CASE WHEN h.status IS NULL THEN f.next_attempt_at
                           WHEN h.status = 'sending' THEN h.lease_until
                           ELSE h.next_attempt_at END,
                      coalesce(t.cooldown_until, f.next_attempt_at), ${sql.literal(RATE_READY)}))
             FROM waiting w
             CROSS JOIN LATERAL (
               -- A target's rows are all of one kind: the kind is checked
               -- on the row found, so the only way to find it is the
               -- ordered range scan of deliveries_waiting_idx (with the kind
               -- inside, a planner without statistics may gather all the
               -- target's rows through two bitmaps and sort them).
               SELECT d.next_attempt_at, d.kind FROM deliveries d
               WHERE d.target_id = w.target_id AND d.status IN ('queued', 'retrying')
               ORDER BY d.target_id, d.next_attempt_at, d.seq LIMIT 1
             ) f
             LEFT JOIN delivery_targets t ON t.id = w.target_id
             -- A strict target waits for its head, whatever is due behind it.
             LEFT JOIN LATERAL (
               SELECT d.status, d.next_attempt_at, d.lease_until FROM deliveries d
               WHERE t.strict AND d.target_id = w.target_id AND d.status IN ('queued', 'sending', 'retrying')
               ORDER BY d.target_id, d.seq LIMIT 1
             ) h ON true
             WHERE w.target_id IS NOT NULL AND f.kind = ${kind}),
            (SELECT min(lease_until) FROM deliveries WHERE kind = ${kind} AND status = 'sending'),
            -- The log's targets: at once when rows wait past a lease this
            -- process may take or holds, else when the other holder's runs out.
            (SELECT min(greatest(
                      CASE WHEN t.lease_id IS NOT NULL AND t.lease_until > now()
                             AND (t.lease_owner <> ${owner} OR t.log_pending <= t.log_in_flight)
                           THEN t.lease_until ELSE now() END,
                      coalesce(t.cooldown_until, now()), ${sql.literal(RATE_READY)}))
             FROM delivery_targets t
             WHERE t.kind = ${kind} AND t.log_listed AND t.log_pending > 0 AND NOT t.strict)
          )`

/**
 * Records a batch of outcomes (`rows`: the JSON array `settleMany` builds,
 * in order) for the lease holders only: each delivery's row, its attempt,
 * and the health of its target. The targets (`targetIds`, sorted) are
 * locked first, in id order, in the same statement.
 */
export const settleStatement = (sql: SqlClient.SqlClient, rows: string, targetIds: ReadonlyArray<string>) => {
  // Target health, as if the batch's outcomes were applied one by one in
  // order: a success resets the count and ends any cooldown; a failed
  // attempt counts one, and from the `after`-th on starts a cooldown
  // of base * 2^(failures - after), at most cap. A failure that lands
  // while the target already cools down was an attempt in flight when
  // the cooldown began (up to the per-target limit of them): it belongs
  // to the round that started the cooldown, so it neither counts again
  // nor extends it. So f failures after the last success (or the start)
  // move the count from f0 to min(f0 + f, max(f0 + 1, after)).
  const counted = sql.literal(`CASE
              WHEN r.failures = 0 THEN r.f0
              WHEN r.cooldown_after IS NULL THEN r.f0 + r.failures
              ELSE least(r.f0 + r.failures, greatest(r.f0 + 1, r.cooldown_after))
            END`)
  // The lock order (see `targetsFirst` in Targets.ts) in the same statement, so a
  // batch costs one round trip, not a transaction's four: `locked`
  // takes the target rows in id order, and `input`, which every other
  // part reads, waits for it (a one-time filter on its count), so no
  // delivery row is touched before the targets are held.
  //
  // Its rows asserted, not decoded: the settle runs once per batch of
  // every busy worker, and a schema decode per row would be paid on every
  // delivery settled (the answer is ours, one short row per item).
  return sql<{
    delivery_id: string
    lease_owner: string
    cooldown_ms: number | null
    failures: number | null
    target_id: string
    log_ended: boolean
  }>`
          WITH locked AS (
            SELECT id, lease_id FROM delivery_targets WHERE id IN ${sql.in(targetIds)} ORDER BY id FOR UPDATE
          ),
          input AS (
            -- lm: a row handed out of the log under the target's current lease.
            SELECT x.*, coalesce(x.logged AND l.lease_id = x.lease_owner, false) AS lm
            FROM jsonb_to_recordset(${rows}::jsonb) AS x(
              ord int, id uuid, lease_owner uuid, target_id uuid, status text, last_error text, meta jsonb,
              retry_after_ms float8, finished boolean, failed_attempt boolean, cooldown_after int,
              cooldown_base float8, cooldown_cap float8, status_code int, error text, snippet text, duration_ms int,
              logged boolean, seq bigint, org_id uuid, log_cursor bigint, lease_secs float8)
            LEFT JOIN locked l ON l.id = x.target_id
          ),
          -- A success handed out of the log writes no row: its batch's outcome row holds it.
          logged_ok AS (
            SELECT * FROM input WHERE lm AND status = 'delivered'
          ),
          outcomes AS (
            INSERT INTO delivery_outcomes (target_id, to_seq, from_seq, org_id, seqs, status_codes, durations_ms)
            SELECT target_id, max(seq), min(seq), (array_agg(org_id))[1], array_agg(seq ORDER BY seq),
                   array_agg(status_code ORDER BY seq), array_agg(duration_ms ORDER BY seq)
            FROM logged_ok GROUP BY target_id
            RETURNING target_id
          ),
          settled AS (
            UPDATE deliveries d
            SET status = i.status, last_error = i.last_error,
                meta = d.meta || coalesce(i.meta, '{}'::jsonb),
                next_attempt_at = CASE WHEN i.retry_after_ms IS NULL THEN d.next_attempt_at
                                       ELSE now() + make_interval(secs => i.retry_after_ms / 1000) END,
                finished_at = CASE WHEN i.finished THEN now() END,
                attempts = CASE WHEN d.status = 'logged' THEN d.attempts + 1 ELSE d.attempts END,
                status_code = i.status_code, lease_owner = NULL, lease_until = NULL
            FROM input i
            WHERE d.id = i.id AND NOT (i.lm AND i.status = 'delivered')
              AND ((d.status = 'sending' AND d.lease_owner = i.lease_owner) OR (d.status = 'logged' AND i.lm))
            RETURNING d.id, d.attempts, i.lease_owner
          ),
          recorded AS (
            INSERT INTO delivery_attempts (delivery_id, attempt, status_code, error, response_snippet, duration_ms)
            SELECT s.id, s.attempts, i.status_code, i.error, i.snippet, i.duration_ms
            FROM settled s JOIN input i ON i.id = s.id AND i.lease_owner = s.lease_owner
            ON CONFLICT (delivery_id, attempt) DO NOTHING
            RETURNING delivery_id
          ),
          held AS (
            SELECT i.* FROM input i
            JOIN settled s ON s.id = i.id AND s.lease_owner = i.lease_owner
            JOIN recorded r ON r.delivery_id = i.id
            UNION ALL
            SELECT o.* FROM logged_ok o WHERE (SELECT count(*) FROM outcomes) >= 0
          ),
          rounds AS (
            SELECT target_id,
                   bool_or(NOT failed_attempt) AS succeeded,
                   (count(*) FILTER (WHERE failed_attempt AND ord > last_success))::int AS failures,
                   max(cooldown_after) AS cooldown_after, max(cooldown_base) AS cooldown_base,
                   max(cooldown_cap) AS cooldown_cap,
                   (count(*) FILTER (WHERE lm))::int AS log_n,
                   (count(*) FILTER (WHERE lm AND status = 'delivered'))::int AS log_ok,
                   max(log_cursor) AS log_cursor, max(lease_secs) AS lease_secs
            FROM (
              SELECT h.*, coalesce(max(ord) FILTER (WHERE NOT failed_attempt) OVER (PARTITION BY target_id), -1) AS last_success
              FROM held h
            ) x
            GROUP BY target_id
          ),
          health AS (
            UPDATE delivery_targets t
            SET consecutive_failures = CASE WHEN r.cooling THEN t.consecutive_failures ELSE ${counted} END,
                cooldown_until = CASE
                  WHEN r.cooling THEN t.cooldown_until
                  WHEN r.failures > 0 AND r.cooldown_after IS NOT NULL AND ${counted} >= r.cooldown_after
                    THEN now() + make_interval(secs => least(r.cooldown_cap, r.cooldown_base * power(2, ${counted} - r.cooldown_after)))
                  WHEN r.succeeded THEN NULL
                  ELSE t.cooldown_until
                END,
                -- The log: successes leave the counts here (their rows are
                -- not written); the cursor moves; the lease is extended
                -- while rows are in flight under it, and ends with the last.
                undelivered = greatest(0, t.undelivered - r.log_ok),
                log_pending = greatest(0, t.log_pending - r.log_ok),
                log_in_flight = greatest(0, t.log_in_flight - r.log_n),
                cursor = greatest(t.cursor, coalesce(r.log_cursor, t.cursor)),
                lease_until = CASE WHEN r.log_n > 0 AND t.log_in_flight > r.log_n
                  THEN greatest(t.lease_until, now() + make_interval(secs => r.lease_secs)) ELSE t.lease_until END,
                lease_owner = CASE WHEN r.log_n > 0 AND t.log_in_flight <= r.log_n THEN NULL ELSE t.lease_owner END,
                lease_id = CASE WHEN r.log_n > 0 AND t.log_in_flight <= r.log_n THEN NULL ELSE t.lease_id END
            FROM (
              SELECT rounds.*,
                     CASE WHEN rounds.succeeded THEN 0 ELSE c.consecutive_failures END AS f0,
                     (NOT rounds.succeeded AND coalesce(c.cooldown_until > now(), false)) AS cooling
              FROM rounds JOIN delivery_targets c ON c.id = rounds.target_id
            ) r
            WHERE t.id = r.target_id
              AND (r.failures > 0 OR t.consecutive_failures <> 0 OR t.cooldown_until IS NOT NULL OR r.log_n > 0)
            RETURNING t.id, t.cooldown_until, t.consecutive_failures, (r.log_n > 0 AND t.lease_id IS NULL) AS log_ended
          )
          SELECT h.id AS delivery_id, h.lease_owner, h.target_id,
                 (extract(epoch FROM t.cooldown_until - now()) * 1000)::float8 AS cooldown_ms, t.consecutive_failures AS failures,
                 coalesce(t.log_ended, false) AS log_ended
          FROM held h LEFT JOIN health t ON t.id = h.target_id
`
}
