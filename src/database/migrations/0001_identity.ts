import { Effect } from "effect"
import { SqlClient } from "effect/sql"

/** Organizations and their API keys (only a hash of each key is kept). */
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`
    CREATE TABLE orgs (
      id uuid PRIMARY KEY,
      name text NOT NULL,
      created_at timestamptz NOT NULL DEFAULT now()
    )
  `
  yield* sql`
    CREATE TABLE api_keys (
      id uuid PRIMARY KEY,
      org_id uuid NOT NULL REFERENCES orgs (id) ON DELETE CASCADE,
      name text,
      key_hash text NOT NULL UNIQUE,
      key_prefix text NOT NULL,
      scopes text[] NOT NULL,
      created_at timestamptz NOT NULL DEFAULT now(),
      revoked_at timestamptz
    )
  `
  yield* sql`CREATE INDEX api_keys_org_idx ON api_keys (org_id, created_at)`
})
