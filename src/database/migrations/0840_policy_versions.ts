import { Effect } from "effect"
import { SqlClient } from "effect/sql"

/**
 * `approval_policies.version`: a number a policy takes from the sequence
 * `approval_policy_versions` when it is stored and again on every update,
 * so that a governed step checks its cached policy against the stored one
 * by comparing one number (`src/agents/StepStatement.ts`) instead of every
 * setting and the rules' JSON.
 *
 * The trigger moves it, whoever writes: several processes share one
 * PostgreSQL, and during a rolling upgrade an older one that knows nothing
 * of the column still stores policies (an `INSERT ... ON CONFLICT DO
 * UPDATE` fires it too). The sequence, not `version + 1`: a policy deleted
 * and stored again must not get back a number a cache still holds for the
 * deleted one. Existing rows take theirs from the sequence as the column
 * is added.
 */
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`CREATE SEQUENCE IF NOT EXISTS approval_policy_versions AS bigint`
  yield* sql`
    ALTER TABLE approval_policies ADD COLUMN IF NOT EXISTS version bigint NOT NULL DEFAULT nextval('approval_policy_versions')
  `
  yield* sql`ALTER SEQUENCE approval_policy_versions OWNED BY approval_policies.version`
  yield* sql`
    CREATE OR REPLACE FUNCTION approval_policies_next_version() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      NEW.version := nextval('approval_policy_versions');
      RETURN NEW;
    END
    $$
  `
  yield* sql`
    CREATE TRIGGER approval_policies_version BEFORE UPDATE ON approval_policies
    FOR EACH ROW EXECUTE FUNCTION approval_policies_next_version()
  `
})
