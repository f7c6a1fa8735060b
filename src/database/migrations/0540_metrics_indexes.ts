import { Effect } from "effect"
import { SqlClient } from "effect/sql"

/**
 * What `/metrics` reads without scanning (src/observability/Scrape.ts):
 *
 * - `deliveries_undelivered_age_idx`: the oldest undelivered delivery of a
 *   kind is the first entry (one probe per kind, however long the queue).
 *   It holds only undelivered rows; a row leaves it when it is delivered,
 *   partial or failed.
 * - `notification_endpoints_deactivated_idx`: the endpoints a 410 Gone
 *   deactivated, and only them.
 */
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`
    CREATE INDEX deliveries_undelivered_age_idx ON deliveries (kind, created_at)
    WHERE status IN ('queued', 'sending', 'retrying')
  `
  yield* sql`CREATE INDEX notification_endpoints_deactivated_idx ON notification_endpoints (id) WHERE NOT active`
})
