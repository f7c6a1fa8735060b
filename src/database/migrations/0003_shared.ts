import { Effect } from "effect"
import { SqlClient } from "effect/sql"

/**
 * Pieces several capabilities share:
 * - `events`: the durable approval event log (outbox). Rows are written in
 *   the same transaction as the state change that causes them; `body` is the
 *   exact JSON sent to receivers, so every retry and replay carries the same
 *   bytes. `dispatched_at` marks events already fanned out into deliveries.
 * - `org_secrets`: secrets at rest (webhook signing secrets, collector
 *   header values), sealed with the master key, owned by one resource.
 */
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`
    CREATE TABLE events (
      seq bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
      id uuid NOT NULL UNIQUE,
      org_id uuid NOT NULL REFERENCES orgs (id) ON DELETE CASCADE,
      type text NOT NULL,
      occurred_at timestamptz NOT NULL,
      body text NOT NULL,
      dispatched_at timestamptz
    )
  `
  yield* sql`CREATE INDEX events_undispatched_idx ON events (seq) WHERE dispatched_at IS NULL`
  yield* sql`CREATE INDEX events_org_idx ON events (org_id, seq)`
  yield* sql`
    CREATE TABLE org_secrets (
      id uuid PRIMARY KEY,
      org_id uuid NOT NULL REFERENCES orgs (id) ON DELETE CASCADE,
      owner_kind text NOT NULL,
      owner_id uuid NOT NULL,
      name text NOT NULL,
      sealed text NOT NULL,
      created_at timestamptz NOT NULL DEFAULT now(),
      expires_at timestamptz
    )
  `
  yield* sql`CREATE INDEX org_secrets_owner_idx ON org_secrets (owner_kind, owner_id)`
  yield* sql`CREATE INDEX org_secrets_org_idx ON org_secrets (org_id)`
})
