import { Effect } from "effect"
import { SqlClient } from "effect/sql"

/**
 * Logged runs count against a per-organization quota of bytes
 * (`SVC_MAX_RUN_BYTES_PER_ORG`), kept as the feedback quota is (migration
 * 0631): the usage table becomes `org_usage`, one set of up to 16 shards
 * per organization and `kind` (`feedback`, `runs`). Existing runs are
 * counted into shard 0 of `runs`: 256 bytes per run plus its input's and
 * answer's JSON.
 */
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`ALTER TABLE org_feedback_usage RENAME TO org_usage`
  yield* sql`ALTER TABLE org_usage ADD COLUMN kind text NOT NULL DEFAULT 'feedback' CHECK (kind IN ('feedback', 'runs'))`
  yield* sql`ALTER TABLE org_usage ALTER COLUMN kind DROP DEFAULT`
  yield* sql`ALTER TABLE org_usage DROP CONSTRAINT org_feedback_usage_pkey`
  yield* sql`ALTER TABLE org_usage ADD PRIMARY KEY (org_id, kind, shard)`
  yield* sql`
    INSERT INTO org_usage (org_id, kind, shard, bytes)
    SELECT org_id, 'runs', 0, sum(256 + octet_length(input::text) + octet_length(answer::text)) FROM runs GROUP BY org_id
  `
})
