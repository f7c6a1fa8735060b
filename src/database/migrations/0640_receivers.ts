import { Effect } from "effect"
import { SqlClient } from "effect/sql"

/**
 * What receivers and their administrators get beside the approval events:
 *
 * - `notification_endpoints.action_classes`: a JSON array of action classes
 *   (exact, or prefixes ending in `.*`) whose approval events the endpoint
 *   gets; NULL: all of them.
 * - `notification_endpoints.test_window_at` / `test_count`: the fixed
 *   one-minute window of test deliveries and how many were sent in it,
 *   claimed by one UPDATE so the bound holds across processes.
 * - `notification_endpoints.failing_since`: set when the endpoint entered a
 *   cooldown after having been healthy (and `endpoint.failing` was written),
 *   cleared by its next success: one notice per failing streak.
 * - `events.about_endpoint`: the endpoint an operational event is about; it
 *   is never delivered there.
 */
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`
    ALTER TABLE notification_endpoints
      ADD COLUMN action_classes jsonb,
      ADD COLUMN test_window_at timestamptz,
      ADD COLUMN test_count integer NOT NULL DEFAULT 0,
      ADD COLUMN failing_since timestamptz
  `
  yield* sql`ALTER TABLE events ADD COLUMN about_endpoint uuid`
})
