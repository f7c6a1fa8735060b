import { Effect } from "effect"
import { SqlClient } from "effect/sql"

/**
 * The queue's updates of `delivery_targets` (every enqueue, lease and
 * settle writes its counts and lease) become HOT updates: PostgreSQL writes
 * the new row version on the same page with no new index entries, and
 * prunes the old one on its own, when no index's key or predicate names a
 * column whose value the update changes. `delivery_targets_log_idx` was
 * `WHERE log_pending > 0`, so every change of that counter (each enqueue
 * and settle) wrote a version every index of the table pointed at, and a
 * table of one row per endpoint grew by a dead version per delivery.
 *
 * - `log_recent`: set by every lease, cleared once the target has no
 *   logged rows left and its last lease ran out (`log/Unlist.ts`, at most
 *   every 10 s per process). An endpoint delivered to steadily keeps it.
 * - `log_listed` (generated): `log_pending > 0 OR log_recent`, the log's
 *   targets to look at. It changes when an endpoint's log starts after a
 *   quiet spell and once when it has been quiet, not with each delivery.
 * - `delivery_targets_log_idx` on `(kind) WHERE log_listed`.
 * - Fillfactor 50: half of each page kept for the new versions of its
 *   rows (the table holds one small row per endpoint). Adding the
 *   generated column rewrites the table with it.
 */
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`ALTER TABLE delivery_targets SET (fillfactor = 50)`
  yield* sql`ALTER TABLE delivery_targets ADD COLUMN log_recent boolean NOT NULL DEFAULT false`
  yield* sql`
    ALTER TABLE delivery_targets
      ADD COLUMN log_listed boolean GENERATED ALWAYS AS (log_pending > 0 OR log_recent) STORED
  `
  yield* sql`DROP INDEX delivery_targets_log_idx`
  yield* sql`CREATE INDEX delivery_targets_log_idx ON delivery_targets (kind) WHERE log_listed`
})
