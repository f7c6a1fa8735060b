import { Effect } from "effect"
import { SqlClient } from "effect/sql"

/**
 * Notification endpoints (webhook receivers) and per-organization
 * notification settings (the reviewer email address). Signing secrets live
 * in `org_secrets` (owner kind `notification_endpoint`), sealed with the
 * master key; deliveries live in the shared delivery queue.
 * `events` is a JSON array of event type names, exactly as subscribed: new
 * event types never widen an existing subscription.
 */
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`
    CREATE TABLE notification_endpoints (
      id uuid PRIMARY KEY,
      seq bigint GENERATED ALWAYS AS IDENTITY,
      org_id uuid NOT NULL REFERENCES orgs (id) ON DELETE CASCADE,
      url text NOT NULL,
      url_hint text NOT NULL,
      events jsonb NOT NULL,
      active boolean NOT NULL DEFAULT true,
      deactivated_at timestamptz,
      deactivated_reason text,
      created_at timestamptz NOT NULL DEFAULT now(),
      created_by text NOT NULL
    )
  `
  yield* sql`CREATE INDEX notification_endpoints_org_idx ON notification_endpoints (org_id, seq)`
  yield* sql`
    CREATE TABLE notification_settings (
      org_id uuid PRIMARY KEY REFERENCES orgs (id) ON DELETE CASCADE,
      reviewer_email text,
      updated_at timestamptz NOT NULL DEFAULT now()
    )
  `
})
