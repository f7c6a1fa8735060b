import { Effect } from "effect"
import { SqlClient } from "effect/sql"

/**
 * `orgs.credentials_version` moves whenever the organization's known
 * credentials change: an API key added (or its hash or owner changed, or
 * removed) and any change to its secret store (`org_secrets`: signing
 * secrets, collector header values). Triggers keep it, whoever writes,
 * so the feedback scrubber's cache of known credentials is checked with one
 * indexed read of the org row instead of re-deriving a fingerprint over
 * both tables on every INSERT. Revocation does not move it (revoked keys are
 * scrubbed too); an organization's deletion takes the row with it (the
 * update then touches nothing).
 */
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`ALTER TABLE orgs ADD COLUMN credentials_version bigint NOT NULL DEFAULT 0`
  yield* sql`
    CREATE FUNCTION orgs_bump_credentials_version() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      IF TG_OP <> 'INSERT' THEN
        UPDATE orgs SET credentials_version = credentials_version + 1 WHERE id = OLD.org_id;
      END IF;
      IF TG_OP <> 'DELETE' AND (TG_OP = 'INSERT' OR NEW.org_id IS DISTINCT FROM OLD.org_id) THEN
        UPDATE orgs SET credentials_version = credentials_version + 1 WHERE id = NEW.org_id;
      END IF;
      RETURN NULL;
    END
    $$
  `
  yield* sql`
    CREATE TRIGGER api_keys_credentials_version
    AFTER INSERT OR DELETE OR UPDATE OF key_hash, org_id ON api_keys
    FOR EACH ROW EXECUTE FUNCTION orgs_bump_credentials_version()
  `
  yield* sql`
    CREATE TRIGGER org_secrets_credentials_version
    AFTER INSERT OR DELETE OR UPDATE ON org_secrets
    FOR EACH ROW EXECUTE FUNCTION orgs_bump_credentials_version()
  `
})
