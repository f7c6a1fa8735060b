import { Effect } from "effect"
import { SqlClient } from "effect/sql"

/**
 * The release of svc each applied migration belongs to, so that a build
 * older than its database refuses to start (`src/database/Migrations.ts`).
 *
 * Rows are written by `Migrations.ts` after each run, in the run's
 * transaction: every applied migration without a row gets the release
 * `migrations/index.ts` lists it under. The first run of this migration
 * thus backfills the migrations applied before it (all of 0.1.0), with the
 * time each was applied.
 */
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`
    CREATE TABLE svc_schema_versions (
      migration_id integer PRIMARY KEY,
      name text NOT NULL,
      svc_version text NOT NULL,
      applied_at timestamptz NOT NULL DEFAULT now()
    )
  `
})
