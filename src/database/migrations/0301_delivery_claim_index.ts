import { Effect } from "effect"
import { SqlClient } from "effect/sql"

/**
 * Lets `DeliveryQueue.claim` find waiting targets (skip scan) and each
 * target's next due rows (range scan) without reading the whole queue:
 * a burst of thousands of webhook deliveries to one endpoint otherwise made
 * every claim sort the entire queue.
 */
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`
    CREATE INDEX deliveries_waiting_idx ON deliveries (target_id, next_attempt_at, seq)
    WHERE status IN ('queued', 'retrying')
  `
})
