import { Effect } from "effect"
import { SqlClient } from "effect/sql"

/**
 * `Idempotency-Key` (`src/idempotency/`): one row per organization and key.
 * A request reserves it (`running`, with a lease its process renews) before
 * it runs and records its answer (`done`) after; the key's `fingerprint`
 * (method, path, body) tells a repeat from another request. `answer` is the
 * kept body, sealed with the master key (an answer may hold a secret shown
 * once, such as a new endpoint's signing secret); NULL for an empty body or
 * one over `SVC_IDEMPOTENCY_MAX_ANSWER_BYTES` (`kept` false). No key to
 * `orgs`: an organization's deletion removes its rows (trigger below), and
 * the retention sweep removes expired ones.
 */
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`
    CREATE TABLE IF NOT EXISTS idempotency_keys (
      org_id uuid NOT NULL,
      key text NOT NULL CHECK (length(key) BETWEEN 1 AND 255),
      fingerprint text NOT NULL,
      state text NOT NULL CHECK (state IN ('running', 'done')),
      lease_until timestamptz NOT NULL,
      status integer,
      content_type text,
      answer text,
      kept boolean NOT NULL DEFAULT true,
      created_at timestamptz NOT NULL DEFAULT now(),
      expires_at timestamptz NOT NULL,
      PRIMARY KEY (org_id, key)
    )
  `
  yield* sql`CREATE INDEX IF NOT EXISTS idempotency_keys_expiry ON idempotency_keys (expires_at)`
  yield* sql`
    CREATE OR REPLACE FUNCTION idempotency_keys_org_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      DELETE FROM idempotency_keys WHERE org_id = OLD.id;
      RETURN OLD;
    END $$
  `
  yield* sql`DROP TRIGGER IF EXISTS orgs_delete_idempotency_keys ON orgs`
  yield* sql`
    CREATE TRIGGER orgs_delete_idempotency_keys AFTER DELETE ON orgs
    FOR EACH ROW EXECUTE FUNCTION idempotency_keys_org_deleted()
  `
})
