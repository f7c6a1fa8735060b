import { Effect } from "effect"
import { SqlClient } from "effect/sql"

/**
 * The shared delivery queue (`src/deliveries`): webhook deliveries and
 * telemetry batches alike are rows any process may claim with a lease.
 * - `deliveries`: one row per thing to send and its record (status,
 *   attempts, replays, last error). `payload` is opaque to the queue (sealed
 *   by the capability that needs one); `meta` holds kind-specific figures.
 * - `delivery_attempts`: one row per attempt (status code, error, a
 *   truncated response snippet), never the payload.
 * - `delivery_targets`: health of each endpoint/destination, for cooldowns.
 *   A target without a row is healthy.
 */
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`
    CREATE TABLE deliveries (
      seq bigint GENERATED ALWAYS AS IDENTITY UNIQUE,
      id uuid PRIMARY KEY,
      org_id uuid NOT NULL REFERENCES orgs (id) ON DELETE CASCADE,
      kind text NOT NULL,
      target_id uuid NOT NULL,
      status text NOT NULL,
      label text,
      event_id uuid,
      payload text,
      meta jsonb NOT NULL DEFAULT '{}'::jsonb,
      attempts integer NOT NULL DEFAULT 0,
      replays integer NOT NULL DEFAULT 0,
      last_error text,
      next_attempt_at timestamptz NOT NULL DEFAULT now(),
      lease_owner uuid,
      lease_until timestamptz,
      created_at timestamptz NOT NULL DEFAULT now(),
      finished_at timestamptz
    )
  `
  // Claims scan only what can be sent; lists read a target's newest rows.
  yield* sql`
    CREATE INDEX deliveries_due_idx ON deliveries (kind, next_attempt_at, seq)
    WHERE status IN ('queued', 'retrying')
  `
  yield* sql`CREATE INDEX deliveries_leased_idx ON deliveries (kind, lease_until) WHERE status = 'sending'`
  yield* sql`
    CREATE INDEX deliveries_undelivered_idx ON deliveries (target_id)
    WHERE status IN ('queued', 'sending', 'retrying')
  `
  yield* sql`CREATE INDEX deliveries_target_seq_idx ON deliveries (target_id, seq DESC)`
  yield* sql`
    CREATE TABLE delivery_attempts (
      delivery_id uuid NOT NULL REFERENCES deliveries (id) ON DELETE CASCADE,
      attempt integer NOT NULL,
      at timestamptz NOT NULL DEFAULT now(),
      status_code integer,
      error text,
      response_snippet text,
      duration_ms integer NOT NULL,
      PRIMARY KEY (delivery_id, attempt)
    )
  `
  yield* sql`
    CREATE TABLE delivery_targets (
      id uuid PRIMARY KEY,
      org_id uuid NOT NULL REFERENCES orgs (id) ON DELETE CASCADE,
      kind text NOT NULL,
      consecutive_failures integer NOT NULL DEFAULT 0,
      cooldown_until timestamptz
    )
  `
})
