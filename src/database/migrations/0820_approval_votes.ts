import { Effect } from "effect"
import { SqlClient } from "effect/sql"

/**
 * Quorum: how many distinct people must approve (`approvals.quorum`, set
 * from the rule or the class's policy that required the approval;
 * `approval_policies.quorum`), and every vote cast on an approval
 * (`approval_votes`: one per decider, the primary key keeps a person from
 * voting twice).
 */
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`ALTER TABLE approvals ADD COLUMN IF NOT EXISTS quorum integer NOT NULL DEFAULT 1`
  yield* sql`ALTER TABLE approval_policies ADD COLUMN IF NOT EXISTS quorum integer NOT NULL DEFAULT 1`
  yield* sql`
    CREATE TABLE IF NOT EXISTS approval_votes (
      approval_id uuid NOT NULL REFERENCES approvals (id) ON DELETE CASCADE,
      decided_by text NOT NULL,
      decision text NOT NULL,
      reason text,
      decided_at timestamptz NOT NULL,
      PRIMARY KEY (approval_id, decided_by)
    )
  `
})
