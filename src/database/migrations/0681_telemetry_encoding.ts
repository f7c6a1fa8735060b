import { Effect } from "effect"
import { SqlClient } from "effect/sql"

/**
 * A telemetry destination's OTLP/HTTP encoding (`http/json` or
 * `http/protobuf`) and body compression (`none` or `gzip`). Destinations
 * made before these settings got gzip for every batch of 1 KiB or more,
 * which their collectors took: they keep gzip; a new destination says what
 * it wants (the service writes both columns).
 */
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`
    ALTER TABLE telemetry_destinations
      ADD COLUMN protocol text NOT NULL DEFAULT 'http/json' CHECK (protocol IN ('http/json', 'http/protobuf')),
      ADD COLUMN compression text NOT NULL DEFAULT 'gzip' CHECK (compression IN ('none', 'gzip'))
  `
  yield* sql`ALTER TABLE telemetry_destinations ALTER COLUMN compression SET DEFAULT 'none'`
})
