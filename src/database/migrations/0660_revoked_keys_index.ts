import { Effect } from "effect"
import { SqlClient } from "effect/sql"

/**
 * Retention of revoked API keys (`src/retention/Retention.ts`): the pruning
 * statement finds the keys revoked longest ago without scanning the table.
 * Re-runnable (`IF NOT EXISTS`).
 */
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`CREATE INDEX IF NOT EXISTS api_keys_revoked_idx ON api_keys (revoked_at) WHERE revoked_at IS NOT NULL`
})
