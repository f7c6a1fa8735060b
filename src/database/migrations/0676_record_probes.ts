import { Effect } from "effect"
import { SqlClient } from "effect/sql"

/**
 * A logged row's outcome row found by one ordered index probe, whatever
 * the number of outcome rows kept.
 *
 * `delivery_records` and `delivery_attempt_records` (migration 0670) found
 * the outcome row holding a logged row by a range join: without an order,
 * the planner read `delivery_outcomes` sequentially per listed row, or,
 * by index, every newer outcome row of the endpoint. Both views now walk
 * the primary key `(target_id, to_seq)` from the row's seq upwards and stop
 * at the first outcome row whose seqs name it (a seq is held by at most
 * one): a delivered row reads the outcome rows ending between it and its
 * own (batches settled out of order), a row not delivered the outcome rows
 * above it (only those settled above the cursor). Rows other than `logged`
 * never probe.
 *
 * The bounds are row values, `(target_id, to_seq)` from the row's seq to the
 * highest seq, not `target_id = x AND to_seq >= y`: without statistics the
 * planner takes the latter for a handful of rows and reads them all by a
 * bitmap, then sorts; a range of row values is estimated at a third of the
 * table, so the ordered scan with its limit wins (as in 0675).
 *
 * Measured (`bench/sql/records-study.ts`, one endpoint's 36 000 / 100 000
 * outcome rows, analysed, then 200 rows waiting; with the list's row-value
 * bounds): the latest 50 from 158 / 1 010 ms to 0.7 / 1.1 ms on a server,
 * 1 284 / 638 ms to 5.7 / 1.2 ms on PGlite; one delivery's attempts from
 * 9.2 / 38 ms to 0.5 / 0.3 ms on a server, 42 / 25 ms to 4.3 / 1.5 ms on
 * PGlite.
 */
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`
    CREATE OR REPLACE VIEW delivery_records AS
    SELECT d.id, d.seq, d.org_id, d.kind, d.target_id,
      CASE WHEN d.status <> 'logged' THEN d.status
           WHEN o.at IS NOT NULL THEN 'delivered'
           WHEN t.lease_id IS NOT NULL AND t.lease_until > now() AND d.seq > t.cursor AND d.seq <= t.leased_to THEN 'sending'
           ELSE 'queued' END AS status,
      d.label, d.event_id, d.payload, d.meta,
      CASE WHEN d.status <> 'logged' THEN d.attempts
           WHEN o.at IS NOT NULL OR (t.lease_id IS NOT NULL AND t.lease_until > now() AND d.seq > t.cursor AND d.seq <= t.leased_to) THEN 1
           ELSE 0 END AS attempts,
      d.replays, d.last_error, d.next_attempt_at, d.created_at,
      CASE WHEN d.status <> 'logged' THEN d.finished_at ELSE o.at END AS finished_at
    FROM deliveries d
    LEFT JOIN delivery_targets t ON d.status = 'logged' AND t.id = d.target_id
    LEFT JOIN LATERAL (
      SELECT x.at FROM delivery_outcomes x
      WHERE d.status = 'logged'
        AND (x.target_id, x.to_seq) >= (d.target_id, d.seq) AND (x.target_id, x.to_seq) <= (d.target_id, 9223372036854775807)
        AND x.from_seq <= d.seq AND d.seq = ANY (x.seqs)
      ORDER BY x.target_id, x.to_seq
      LIMIT 1
    ) o ON true
  `
  yield* sql`
    CREATE OR REPLACE VIEW delivery_attempt_records AS
    SELECT delivery_id, attempt, at, status_code, error, response_snippet, duration_ms FROM delivery_attempts
    UNION ALL
    SELECT d.id, 1, o.at, o.status_codes[o.i], NULL, NULL, o.durations_ms[o.i]
    FROM deliveries d
    CROSS JOIN LATERAL (
      SELECT x.at, x.status_codes, x.durations_ms, array_position(x.seqs, d.seq) AS i FROM delivery_outcomes x
      WHERE (x.target_id, x.to_seq) >= (d.target_id, d.seq) AND (x.target_id, x.to_seq) <= (d.target_id, 9223372036854775807)
        AND x.from_seq <= d.seq AND d.seq = ANY (x.seqs)
      ORDER BY x.target_id, x.to_seq
      LIMIT 1
    ) o
    WHERE d.status = 'logged'
  `
})
