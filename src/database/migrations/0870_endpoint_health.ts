import { Effect } from "effect"
import { SqlClient } from "effect/sql"

/**
 * An endpoint's health in one table: `failing_since` (when its failing
 * streak began) moves from `notification_endpoints` to `delivery_targets`,
 * beside the consecutive failures and the cooldown the settle writes.
 * `notification_endpoints` keeps what a user configures and `active`.
 */
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`ALTER TABLE delivery_targets ADD COLUMN IF NOT EXISTS failing_since timestamptz`
  yield* sql`
    INSERT INTO delivery_targets AS t (id, org_id, kind, failing_since)
    SELECT id, org_id, 'webhook', failing_since FROM notification_endpoints WHERE failing_since IS NOT NULL
    ON CONFLICT (id) DO UPDATE SET failing_since = EXCLUDED.failing_since
  `
  yield* sql`ALTER TABLE notification_endpoints DROP COLUMN IF EXISTS failing_since`
})
