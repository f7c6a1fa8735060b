import { Effect } from "effect"
import { SqlClient } from "effect/sql"

/**
 * One person, one vote (docs/approvals.md, "Who counts as whom").
 *
 * - `api_keys.person`: the person a key belongs to, fixed at its creation:
 *   the console person who made it (`console:<name>`), the person of the
 *   key that made it, or, for a key made with the CLI, the key itself (its
 *   id). Existing keys get it from `created_by` (recorded since 0632): a
 *   key made before that column existed, or with the CLI, is its own person;
 *   a key whose maker was since pruned belongs to that maker's id.
 * - `svc_person(org, decider)`: the person a decider (as `decided_by` names
 *   them) is, or NULL for a key that is revoked or not the organization's.
 * - `approval_votes.person` (the person who cast the vote) and
 *   `.decided_for` (the person the vote counts for: a delegate's vote
 *   counts for the member they stand in for): each unique per approval, so
 *   a person neither votes twice nor is counted twice. Existing votes: both
 *   are their `decided_by`.
 * - `reviewer_member_addresses.accepted_at`: when the member themselves set
 *   or accepted the address (an administrator's address is an invitation
 *   until then). Existing addresses were set by administrators: NULL, so
 *   they get no approval mail and their links decide nothing until the
 *   member accepts them.
 * - Revoking a key (however it is done: API, CLI, SQL) ends, in the same
 *   transaction, every delegation it gave or received and its own reviewer
 *   address (so every link mailed to it, and its mail).
 * - `svc_revoke_console_person(org, person)` ends a console person's access
 *   in one statement: their sessions and unused sign-in links, the keys that are theirs (each
 *   announced on `svc_key_revoked` for the key caches, and ended as above),
 *   their delegations given and received and their reviewer address.
 *   Answers how many sessions and keys it ended.
 */
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`ALTER TABLE api_keys ADD COLUMN IF NOT EXISTS person text`
  yield* sql`
    UPDATE api_keys SET person = CASE WHEN created_by LIKE 'console:%' THEN created_by ELSE id::text END
    WHERE person IS NULL AND (created_by IS NULL OR created_by LIKE 'console:%')
  `
  // Keys made by keys take their maker's person, one generation a round.
  for (;;) {
    const rows = yield* sql`
      UPDATE api_keys k SET person = maker.person FROM api_keys maker
      WHERE k.person IS NULL AND maker.person IS NOT NULL AND maker.id::text = k.created_by
      RETURNING k.id
    `
    if (rows.length === 0) break
  }
  yield* sql`UPDATE api_keys SET person = created_by WHERE person IS NULL`
  yield* sql`
    CREATE OR REPLACE FUNCTION svc_person(org uuid, decider text) RETURNS text LANGUAGE sql STABLE AS $$
      SELECT CASE
        WHEN decider LIKE 'console:%' OR decider LIKE 'email:%' THEN decider
        WHEN decider ~ '^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$' THEN (
          SELECT coalesce(k.person, k.id::text) FROM api_keys k
          WHERE k.id = decider::uuid AND k.org_id = org AND k.revoked_at IS NULL)
      END
    $$
  `
  yield* sql`ALTER TABLE approval_votes ADD COLUMN IF NOT EXISTS person text`
  yield* sql`ALTER TABLE approval_votes ADD COLUMN IF NOT EXISTS decided_for text`
  yield* sql`UPDATE approval_votes SET person = decided_by, decided_for = decided_by WHERE person IS NULL`
  yield* sql`ALTER TABLE approval_votes ALTER COLUMN person SET NOT NULL`
  yield* sql`ALTER TABLE approval_votes ALTER COLUMN decided_for SET NOT NULL`
  yield* sql`CREATE UNIQUE INDEX IF NOT EXISTS approval_votes_person_idx ON approval_votes (approval_id, person)`
  yield* sql`CREATE UNIQUE INDEX IF NOT EXISTS approval_votes_decided_for_idx ON approval_votes (approval_id, decided_for)`
  yield* sql`ALTER TABLE reviewer_member_addresses ADD COLUMN IF NOT EXISTS accepted_at timestamptz`
  yield* sql`CREATE INDEX IF NOT EXISTS reviewer_delegations_delegator_idx ON reviewer_delegations (org_id, delegator, ends_at)`
  yield* sql`
    CREATE OR REPLACE FUNCTION svc_end_key_reviewing() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      UPDATE reviewer_delegations SET ended_at = now()
      WHERE org_id = NEW.org_id AND ended_at IS NULL AND ends_at > now()
        AND (delegator = NEW.id::text OR delegate = NEW.id::text);
      DELETE FROM reviewer_member_addresses WHERE org_id = NEW.org_id AND member = NEW.id::text;
      RETURN NULL;
    END
    $$
  `
  yield* sql`
    CREATE OR REPLACE FUNCTION svc_revoke_console_person(org uuid, person_name text, OUT sessions integer, OUT keys integer)
    LANGUAGE plpgsql AS $$
    DECLARE
      decider text := 'console:' || person_name;
    BEGIN
      UPDATE console_sessions SET revoked_at = now() WHERE org_id = org AND person = person_name AND revoked_at IS NULL;
      GET DIAGNOSTICS sessions = ROW_COUNT;
      UPDATE console_links SET expires_at = now() WHERE org_id = org AND person = person_name AND used_at IS NULL AND expires_at > now();
      WITH revoked AS (
        UPDATE api_keys SET revoked_at = now() WHERE org_id = org AND person = decider AND revoked_at IS NULL RETURNING key_hash
      )
      SELECT count(pg_notify('svc_key_revoked', key_hash))::int INTO keys FROM revoked;
      UPDATE reviewer_delegations SET ended_at = now()
      WHERE org_id = org AND ended_at IS NULL AND ends_at > now() AND (delegator = decider OR delegate = decider);
      DELETE FROM reviewer_member_addresses WHERE org_id = org AND member = decider;
    END
    $$
  `
  yield* sql`DROP TRIGGER IF EXISTS api_keys_end_reviewing ON api_keys`
  yield* sql`
    CREATE TRIGGER api_keys_end_reviewing
    AFTER UPDATE OF revoked_at ON api_keys
    FOR EACH ROW WHEN (OLD.revoked_at IS NULL AND NEW.revoked_at IS NOT NULL)
    EXECUTE FUNCTION svc_end_key_reviewing()
  `
})
