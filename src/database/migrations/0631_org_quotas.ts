import { Effect } from "effect"
import { SqlClient } from "effect/sql"

/**
 * Per-organization quotas kept in the database, so that every process
 * shares them.
 *
 * `org_feedback_usage`: bytes of feedback an organization stores
 * (`SVC_MAX_FEEDBACK_BYTES_PER_ORG`), split over up to 16 rows per
 * organization (`shard`): each submission adds to one row picked at random,
 * so concurrent submissions of one organization seldom wait on one
 * another's row lock; the quota check sums the rows. Existing feedback is
 * counted into shard 0: 256 bytes per record plus its correction's JSON.
 *
 * `org_rate_limits`: per-organization rates (`name`, e.g. `promote`), one row
 * each: `tat` is the theoretical arrival time of a generic cell rate
 * algorithm, compared with the database's `now()`.
 */
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`
    CREATE TABLE org_feedback_usage (
      org_id uuid NOT NULL REFERENCES orgs (id) ON DELETE CASCADE,
      shard smallint NOT NULL CHECK (shard BETWEEN 0 AND 15),
      bytes bigint NOT NULL,
      PRIMARY KEY (org_id, shard)
    )
  `
  yield* sql`
    INSERT INTO org_feedback_usage (org_id, shard, bytes)
    SELECT org_id, 0, sum(256 + coalesce(octet_length(correction::text), 0)) FROM feedback GROUP BY org_id
  `
  yield* sql`
    CREATE TABLE org_rate_limits (
      org_id uuid NOT NULL REFERENCES orgs (id) ON DELETE CASCADE,
      name text NOT NULL,
      tat timestamptz NOT NULL,
      PRIMARY KEY (org_id, name)
    )
  `
})
