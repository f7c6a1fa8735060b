import { Effect } from "effect"
import { SqlClient } from "effect/sql"

/**
 * Per-endpoint custom headers and rate limit (docs/webhooks.md, "Custom
 * headers", "Rate limit").
 *
 * - `notification_endpoints.header_names`: the names of the endpoint's
 *   custom headers, as given (what the API lists; the values are secrets
 *   in `org_secrets`, kind `notification_endpoint_header`).
 * - `notification_endpoints.rate_limit`: deliveries per second, NULL for
 *   unlimited.
 * - `delivery_targets.rate_limit` and `rate_tat`: the queue's copy of the
 *   limit and the bucket's theoretical arrival time (GCRA), which the claim
 *   statements read and move under the target's row lock, so every process
 *   on the database shares one bucket per endpoint; `delivery_targets_rate_idx`
 *   finds the rate-limited targets.
 *
 * Additive: a 0.1.0 process ignores the columns (and so does not honour a
 * limit) until it is upgraded.
 */
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`
    ALTER TABLE notification_endpoints
      ADD COLUMN header_names jsonb NOT NULL DEFAULT '[]',
      ADD COLUMN rate_limit integer CHECK (rate_limit > 0)
  `
  yield* sql`ALTER TABLE delivery_targets ADD COLUMN rate_limit integer CHECK (rate_limit > 0), ADD COLUMN rate_tat timestamptz`
  // The per-row claim locks the rate-limited targets among those waiting:
  // read from this index, empty unless some endpoint has a limit.
  yield* sql`CREATE INDEX delivery_targets_rate_idx ON delivery_targets (id) WHERE rate_limit IS NOT NULL`
})
