/**
 * The feedback INSERT of `Feedback.submit` as constant text with positional
 * parameters, instead of an `sql` template of nested fragments.
 *
 * What it buys: the template (two sub-selects as fragments, an optional
 * fingerprint clause, `sql.json`, two `sql.unsafe` column lists) was built
 * and compiled into its text on every feedback POST. Measured A/B on the
 * PostgreSQL server (`AB_ALLOC=1 sh bench/ab-request-path.sh`,
 * 2026-11-23): the main thread allocates 111-113 KB per feedback POST
 * instead of 118.5-120 (bench/notes/request-path.md, "Third round").
 * The text is the one the template compiled to, parameter for parameter
 * in the same order; the redacted fields travel as JSON text cast to
 * `jsonb`, as the correction already did.
 */
import type { SqlClient } from "effect/sql"

const COLUMNS = "id, seq, task_id, inference_log_id, score, status, created_at"

const statement = (withFingerprint: boolean) => {
  const at = withFingerprint ? 2 : 0
  return `
    WITH inserted AS (
      INSERT INTO feedback (id, org_id, task_id, inference_log_id, score, correction, redacted_fields, status)
      SELECT $1, $2, r.task_id, r.trace_id, $3, $4::jsonb, $5::jsonb, $6
      FROM runs r WHERE r.trace_id = $7 AND r.org_id = $8
      ${withFingerprint ? "AND (SELECT credentials_version::text FROM orgs WHERE id = $9) = $10" : ""}
      AND (SELECT coalesce(sum(bytes), 0) FROM org_usage WHERE org_id = $${9 + at} AND kind = 'feedback') + $${10 + at} <= $${11 + at}
      RETURNING ${COLUMNS}
    ), counted AS (
      INSERT INTO org_usage (org_id, kind, shard, bytes)
      SELECT $${12 + at}, 'feedback', $${13 + at}, $${14 + at} FROM inserted
      ON CONFLICT (org_id, kind, shard) DO UPDATE SET bytes = org_usage.bytes + excluded.bytes
    )
    SELECT ${COLUMNS} FROM inserted`
}

const WITH_FINGERPRINT = statement(true)
const WITHOUT_FINGERPRINT = statement(false)

export interface FeedbackInsert {
  readonly id: string
  readonly orgId: string
  readonly score: number
  /** The correction's JSON text, or null for a bare score. */
  readonly text: string | null
  /** Fields whose protected values were removed (stored as a JSON array, or null when none). */
  readonly redacted: ReadonlyArray<string>
  readonly status: "recorded" | "pending"
  readonly inferenceLogId: string
  /** Inserted only while the organization's credentials still have this fingerprint; null: no condition. */
  readonly fingerprint: string | null
  /** What the record counts against the quota, and the quota. */
  readonly bytes: number
  readonly maxBytes: number
  readonly shard: number
}

/**
 * The statement: inserts the feedback row of the organization's run
 * (unless the fingerprint moved or the quota would be passed), counts its
 * bytes in the usage shard, and returns the new row's columns.
 */
export const feedbackInsert = (sql: SqlClient.SqlClient, row: FeedbackInsert) =>
  sql.unsafe(row.fingerprint === null ? WITHOUT_FINGERPRINT : WITH_FINGERPRINT, [
    row.id, row.orgId, row.score, row.text, row.redacted.length === 0 ? null : JSON.stringify(row.redacted), row.status,
    row.inferenceLogId, row.orgId,
    ...(row.fingerprint === null ? [] : [row.orgId, row.fingerprint]),
    row.orgId, row.bytes, row.maxBytes,
    row.orgId, row.shard, row.bytes
  ])
