import { Effect } from "effect"
import { SqlClient } from "effect/sql"

/**
 * Searching the delivery log (`src/deliveries/records/Search.ts`,
 * docs/webhooks.md "Searching the delivery log"): a page of a filtered
 * search reads an index in its order, newest first, and stops at the page's
 * end, whatever the history holds.
 *
 * - `deliveries.status_code`: the HTTP status of the delivery's last
 *   attempt, written with the row by the settles that write it (a failure,
 *   a retry, a row leased on its own) and by the statements that store an
 *   attempted delivery. A logged row delivered by the log reads its status
 *   from its outcome row (`delivery_records.status_code`), so the log's
 *   successes still write nothing per delivery. Rows of earlier releases
 *   take their last kept attempt's status.
 * - Newest first by `(created_at, seq)`: per organization and kind (the
 *   organization's list) and per target (an endpoint's list).
 * - The same two orders over the rows that are neither logged nor
 *   delivered (failed, retrying, queued or sending on their own, partial):
 *   the statuses and HTTP statuses other than 2xx a search asks for most
 *   are read there without walking past the delivered ones. These are
 *   written only for rows that are written anyway.
 * - An approval's deliveries by the approval id their label carries
 *   (`<type> <approval id>`).
 * - `delivery_records` gains `stored_status` (the row's own status, which
 *   the planner can match to the partial indexes) and `status_code`.
 */
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`ALTER TABLE deliveries ADD COLUMN status_code integer`
  yield* sql`
    UPDATE deliveries d SET status_code = a.status_code
    FROM (
      SELECT DISTINCT ON (delivery_id) delivery_id, status_code FROM delivery_attempts ORDER BY delivery_id, attempt DESC
    ) a
    WHERE a.delivery_id = d.id AND a.status_code IS NOT NULL AND d.status <> 'logged'
  `
  yield* sql`CREATE INDEX deliveries_org_created_idx ON deliveries (org_id, kind, created_at, seq)`
  yield* sql`CREATE INDEX deliveries_target_created_idx ON deliveries (target_id, created_at, seq)`
  yield* sql`
    CREATE INDEX deliveries_org_unsettled_idx ON deliveries (org_id, kind, created_at, seq)
    WHERE status NOT IN ('logged', 'delivered')
  `
  yield* sql`
    CREATE INDEX deliveries_target_unsettled_idx ON deliveries (target_id, created_at, seq)
    WHERE status NOT IN ('logged', 'delivered')
  `
  yield* sql`
    CREATE INDEX deliveries_approval_idx ON deliveries (org_id, (split_part(label, ' ', 2)))
    WHERE label LIKE 'approval.%'
  `
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
      CASE WHEN d.status <> 'logged' THEN d.finished_at ELSE o.at END AS finished_at,
      d.status AS stored_status,
      CASE WHEN d.status <> 'logged' THEN d.status_code ELSE o.status_code END AS status_code
    FROM deliveries d
    LEFT JOIN delivery_targets t ON d.status = 'logged' AND t.id = d.target_id
    LEFT JOIN LATERAL (
      SELECT x.at, x.status_codes[array_position(x.seqs, d.seq)] AS status_code FROM delivery_outcomes x
      WHERE d.status = 'logged'
        AND (x.target_id, x.to_seq) >= (d.target_id, d.seq) AND (x.target_id, x.to_seq) <= (d.target_id, 9223372036854775807)
        AND x.from_seq <= d.seq AND d.seq = ANY (x.seqs)
      ORDER BY x.target_id, x.to_seq
      LIMIT 1
    ) o ON true
  `
})
