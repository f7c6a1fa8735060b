import { Effect } from "effect"
import { SqlClient } from "effect/sql"

/**
 * Indexes for retention (`src/retention/Retention.ts`): each pruning
 * statement finds its oldest rows past retention without scanning the
 * table, and an outbox event's deliveries are found by event id. Written
 * to be re-runnable (`IF NOT EXISTS`).
 */
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`
    CREATE INDEX IF NOT EXISTS deliveries_finished_idx ON deliveries (finished_at)
    WHERE status IN ('delivered', 'failed') AND kind IN ('webhook', 'email')
  `
  yield* sql`CREATE INDEX IF NOT EXISTS deliveries_event_idx ON deliveries (event_id) WHERE event_id IS NOT NULL`
  yield* sql`CREATE INDEX IF NOT EXISTS delivery_attempts_at_idx ON delivery_attempts (at)`
  yield* sql`CREATE INDEX IF NOT EXISTS events_dispatched_idx ON events (dispatched_at) WHERE dispatched_at IS NOT NULL`
  yield* sql`CREATE INDEX IF NOT EXISTS session_events_created_idx ON session_events (created_at)`
})
