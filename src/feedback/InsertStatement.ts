/**
 * The feedback INSERT of `Feedback.submit`: constant text with named
 * parameters, numbered once when the module loads. (As an `sql` template
 * of nested fragments it was built and compiled on every POST: 118.5-120 KB
 * allocated per feedback POST instead of 111-113, bench/notes/request-path.md,
 * "Third round".) The redacted fields travel as JSON text cast to `jsonb`.
 * It returns only what svc did not send (the run's task, the creation time),
 * checked by hand (`createdRow`): the schema decoder of the returned row
 * held 2.6 % of the main thread's busy samples under the writes load, the
 * check 0.5 % (CPU profiles, PostgreSQL server, "Eighth round").
 */
import { Effect } from "effect"
import type { SqlClient } from "effect/sql"
import { usageCountText } from "../platform/OrgLimits.ts"
import { createdRow } from "../platform/Rows.ts"

/** Text with named parameters (`$name`) numbered once: the text PostgreSQL gets, and the names in the order of their numbers. */
const named = (text: string) => {
  const names: Array<string> = []
  const numbered = text.replace(/\$([a-z][A-Za-z]*)/g, (_, name: string) => {
    if (!names.includes(name)) names.push(name)
    return `$${names.indexOf(name) + 1}`
  })
  return { text: numbered, names: names as ReadonlyArray<keyof FeedbackInsert> }
}

const statement = (withFingerprint: boolean) =>
  named(`
    WITH inserted AS (
      INSERT INTO feedback (id, org_id, task_id, inference_log_id, score, correction, redacted_fields, status)
      SELECT $id, $orgId, r.task_id, r.trace_id, $score, $text::jsonb, $redacted::jsonb, $status
      FROM runs r WHERE r.trace_id = $inferenceLogId AND r.org_id = $orgId
      ${withFingerprint ? "AND (SELECT credentials_version::text FROM orgs WHERE id = $orgId) = $fingerprint" : ""}
      AND (SELECT coalesce(sum(bytes), 0) FROM org_usage WHERE org_id = $orgId AND kind = 'feedback') + $bytes <= $maxBytes
      RETURNING task_id, created_at
    ), counted AS (
      ${usageCountText("feedback", { orgId: "$orgId", bytes: "$bytes", from: "inserted" })}
    )
    SELECT task_id, created_at FROM inserted`)

const WITH_FINGERPRINT = statement(true)
const WITHOUT_FINGERPRINT = statement(false)

const created = createdRow("feedback")

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
}

/**
 * The statement: inserts the feedback row of the organization's run
 * (unless the fingerprint moved or the quota would be passed), counts its
 * bytes in its connection's usage shard, and returns what svc did not send:
 * the run's task and the creation time (none: nothing was inserted).
 */
export const feedbackInsert = (sql: SqlClient.SqlClient, row: FeedbackInsert) =>
  feedbackStatement(sql, row).pipe(Effect.orDie, Effect.flatMap(created))

/** The statement itself (`bench/inprocess/step-statement.ts` runs and explains it). */
export const feedbackStatement = (sql: SqlClient.SqlClient, row: FeedbackInsert) => {
  const { names, text } = row.fingerprint === null ? WITHOUT_FINGERPRINT : WITH_FINGERPRINT
  const redacted = row.redacted.length === 0 ? null : JSON.stringify(row.redacted)
  return sql.unsafe(text, names.map((name) => name === "redacted" ? redacted : row[name]))
}
