/**
 * The queue's two hot statements, built here so that their plans can be
 * checked (`test/integration/deliveries/plans.test.ts` EXPLAINs them on a
 * server with a large backlog and no statistics): the claim and the next
 * due instant. Both start from the same skip scan of
 * `deliveries_waiting_idx`, so they cost O(waiting targets + rows taken),
 * never O(queue length), whatever the planner's statistics say.
 */
import type { SqlClient } from "effect/sql"
import { Duration } from "effect"
import type { ClaimedRow, ClaimOptions, DeliveryKind } from "./Types.ts"

/**
 * `waiting(target_id)`: every target with queued or retrying rows (of any
 * kind: ids never collide across kinds, and a kind condition would steer
 * the planner off the index), one index probe each, plus a final NULL.
 */
export const waitingTargets = (sql: SqlClient.SqlClient) =>
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
 * holds are skipped, not waited for.
 */
export const claimStatement = (
  sql: SqlClient.SqlClient,
  kind: DeliveryKind,
  options: ClaimOptions,
  leaseOwner: string
) =>
  sql<ClaimedRow>`
          WITH RECURSIVE ${waitingTargets(sql)},
          targets AS (
            SELECT target_id FROM waiting WHERE target_id IS NOT NULL
            UNION
            SELECT target_id FROM deliveries WHERE kind = ${kind} AND status = 'sending' AND lease_until <= now()
          ),
          room AS (
            SELECT g.target_id,
              CASE WHEN coalesce(t.consecutive_failures, 0) > 0
                THEN ${Math.min(options.perTarget, options.perFailingTarget ?? options.perTarget)}
                ELSE ${options.perTarget} END - (
              SELECT count(*)::int FROM deliveries b
              WHERE b.kind = ${kind} AND b.status = 'sending' AND b.lease_until > now() AND b.target_id = g.target_id
            ) AS free
            FROM targets g LEFT JOIN delivery_targets t ON t.id = g.target_id
            WHERE (t.cooldown_until IS NULL OR t.cooldown_until <= now())
            ${(options.skipTargets?.length ?? 0) > 0 ? sql`AND g.target_id NOT IN ${sql.in([...options.skipTargets!])}` : sql``}
          ),
          candidates AS (
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
            WHERE r.free > 0
            ORDER BY c.next_attempt_at, c.seq
            LIMIT ${options.limit}
          ),
          picked AS (
            SELECT d.id, d.target_id, d.status AS claimed_from FROM deliveries d
            WHERE d.id IN (SELECT id FROM candidates)
            FOR UPDATE OF d SKIP LOCKED
          )
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
                    d.lease_owner, coalesce(t.consecutive_failures, 0) AS target_failures, p.claimed_from
`

/** When the next delivery of `kind` becomes claimable (due, out of cooldown, or lease expired); NULL when none waits. */
export const nextDueStatement = (sql: SqlClient.SqlClient, kind: DeliveryKind) =>
  sql<{ at: Date | null }>`
          WITH RECURSIVE ${waitingTargets(sql)}
          SELECT least(
            (SELECT min(greatest(f.next_attempt_at, coalesce(t.cooldown_until, f.next_attempt_at)))
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
             WHERE w.target_id IS NOT NULL AND f.kind = ${kind}),
            (SELECT min(lease_until) FROM deliveries WHERE kind = ${kind} AND status = 'sending')
          ) AS at
`
