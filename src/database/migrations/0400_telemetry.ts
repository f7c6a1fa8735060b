import { Effect } from "effect"
import { SqlClient } from "effect/sql"

/**
 * Telemetry destinations: one OTLP/HTTP JSON collector per organization
 * (the unique index answers a second one with 409 DESTINATION_EXISTS).
 * Header values live in `org_secrets` (owner kind `telemetry_destination`);
 * export batches are rows of the shared `deliveries` queue (kind
 * `telemetry`, target = the destination). `dropped_spans` adds up the spans
 * every process dropped for this destination.
 */
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`
    CREATE TABLE telemetry_destinations (
      id uuid PRIMARY KEY,
      org_id uuid NOT NULL REFERENCES orgs (id) ON DELETE CASCADE,
      url text NOT NULL,
      url_hint text NOT NULL,
      created_at timestamptz NOT NULL DEFAULT now(),
      last_delivered_at timestamptz,
      last_error text,
      dropped_spans bigint NOT NULL DEFAULT 0
    )
  `
  yield* sql`CREATE UNIQUE INDEX telemetry_destinations_org_idx ON telemetry_destinations (org_id)`
})
