import { Effect } from "effect"
import { SqlClient } from "effect/sql"

/**
 * Named reviewers: an organization's reviewer groups (`reviewer_groups`)
 * and their members (`reviewer_group_members`, each named as records name
 * deciders: an API key's id or `console:<person>`); delegations of a
 * member's reviewing to another person for a time window
 * (`reviewer_delegations`); the group a policy or a rule assigns its
 * approvals to, and the group its escalation hands them to
 * (`approval_policies.reviewer_group`, `.escalation_group`; a rule carries
 * its own in `rules`); and the group each approval is assigned to now
 * (`approvals.assigned_group`, `.escalation_group`, `.escalation_level`).
 */
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`
    CREATE TABLE IF NOT EXISTS reviewer_groups (
      id uuid PRIMARY KEY,
      org_id uuid NOT NULL REFERENCES orgs (id) ON DELETE CASCADE,
      name text NOT NULL,
      created_at timestamptz NOT NULL DEFAULT now(),
      updated_at timestamptz NOT NULL DEFAULT now(),
      UNIQUE (org_id, name)
    )
  `
  yield* sql`
    CREATE TABLE IF NOT EXISTS reviewer_group_members (
      group_id uuid NOT NULL REFERENCES reviewer_groups (id) ON DELETE CASCADE,
      member text NOT NULL,
      PRIMARY KEY (group_id, member)
    )
  `
  yield* sql`CREATE INDEX IF NOT EXISTS reviewer_group_members_member_idx ON reviewer_group_members (member)`
  yield* sql`
    CREATE TABLE IF NOT EXISTS reviewer_delegations (
      id uuid PRIMARY KEY,
      org_id uuid NOT NULL REFERENCES orgs (id) ON DELETE CASCADE,
      delegator text NOT NULL,
      delegate text NOT NULL,
      starts_at timestamptz NOT NULL,
      ends_at timestamptz NOT NULL,
      ended_at timestamptz,
      created_at timestamptz NOT NULL DEFAULT now()
    )
  `
  yield* sql`CREATE INDEX IF NOT EXISTS reviewer_delegations_delegate_idx ON reviewer_delegations (org_id, delegate, ends_at)`
  yield* sql`ALTER TABLE approval_policies ADD COLUMN IF NOT EXISTS reviewer_group text`
  yield* sql`ALTER TABLE approval_policies ADD COLUMN IF NOT EXISTS escalation_group text`
  yield* sql`ALTER TABLE approvals ADD COLUMN IF NOT EXISTS assigned_group text`
  yield* sql`ALTER TABLE approvals ADD COLUMN IF NOT EXISTS escalation_group text`
  yield* sql`ALTER TABLE approvals ADD COLUMN IF NOT EXISTS escalation_level integer NOT NULL DEFAULT 0`
})
