import { Effect } from "effect"
import { SqlClient } from "effect/sql"

/**
 * Strict ordering, an option of each target.
 *
 * - `notification_endpoints.ordering`: `concurrent` (the default: several
 *   deliveries in flight, in no promised order) or `strict` (one at a time,
 *   in the order the events were recorded).
 * - `delivery_targets.strict`: what the queue's claim reads. A strict
 *   target's next delivery is its undelivered row of lowest `seq` (its
 *   head); nothing else of the target is claimed while the head waits for
 *   a retry or is being sent.
 * - The undelivered rows' index gains `seq` (`deliveries_undelivered_idx`
 *   on `(target_id)` becomes `(target_id, seq)`, same predicate): the head
 *   is its first entry for the target. Every statement that used the old
 *   index (a target's undelivered rows) uses the new one; no index is added.
 */
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`
    ALTER TABLE notification_endpoints ADD COLUMN ordering text NOT NULL DEFAULT 'concurrent'
    CHECK (ordering IN ('concurrent', 'strict'))
  `
  yield* sql`ALTER TABLE delivery_targets ADD COLUMN strict boolean NOT NULL DEFAULT false`
  yield* sql`
    CREATE INDEX deliveries_undelivered_seq_idx ON deliveries (target_id, seq)
    WHERE status IN ('queued', 'sending', 'retrying')
  `
  yield* sql`DROP INDEX deliveries_undelivered_idx`
})
