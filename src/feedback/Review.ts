/**
 * Feedback rows as the database holds them and the items the API shows for
 * them (with the redaction warning when protected values were removed);
 * reading and reviewing them: the organization's list, newest first, and
 * the transitions a reviewer makes, pending to staged or rejected.
 */
import { Effect, Option, Schema } from "effect"
import type { SqlClient } from "effect/sql"
import { type FeedbackItem, FeedbackStatus, Score } from "../api/Feedback.ts"
import { InvalidTransition, NotFound } from "../api/Errors.ts"
import type { SecretBox } from "../platform/Crypto.ts"
import { type CursorScope, keysetPage, type PageRequest } from "../platform/Cursor.ts"
import { BigIntText, JsonColumn, rowsOf, Timestamp } from "../platform/Rows.ts"

export const FeedbackRow = Schema.Struct({
  id: Schema.String,
  seq: BigIntText,
  task_id: Schema.String,
  inference_log_id: Schema.String,
  score: Score,
  correction: Schema.NullOr(JsonColumn(Schema.Record(Schema.String, Schema.Json))),
  redacted_fields: Schema.NullOr(JsonColumn(Schema.Array(Schema.String))),
  status: FeedbackStatus,
  created_at: Timestamp
})
export type FeedbackRow = typeof FeedbackRow.Type
export const FeedbackRows = rowsOf("feedback", FeedbackRow)

export const COLUMNS = "id, seq, task_id, inference_log_id, score, correction, redacted_fields, status, created_at"

const REDACTION_MESSAGE =
  "Protected values (credentials or recognizable secrets) were removed from these fields of the correction before it was saved."

export const toItem = (row: FeedbackRow): FeedbackItem => ({
  id: row.id,
  inference_log_id: row.inference_log_id,
  task_id: row.task_id,
  score: row.score,
  correction: row.correction as FeedbackItem["correction"],
  status: row.status,
  created_at: row.created_at,
  ...(row.redacted_fields !== null && row.redacted_fields.length > 0
    ? { redaction_warning: { fields: row.redacted_fields, message: REDACTION_MESSAGE } }
    : {})
})

export interface ListRequest extends PageRequest {
  readonly task_id?: string | undefined
  readonly status?: FeedbackStatus | undefined
}

const StatusRows = rowsOf("feedback", Schema.Struct({ status: FeedbackStatus }))

export const makeReview = (sql: SqlClient.SqlClient, box: SecretBox["Service"]) => {
  const mac = (message: string) => box.mac("cursor", message)
  const list = Effect.fnUntraced(function*(orgId: string, request: ListRequest) {
    const scope: CursorScope = { orgId, list: "feedback", filters: [request.task_id, request.status] }
    const { items, next_cursor } = yield* keysetPage(mac, scope, request, (below, rows) =>
      FeedbackRows.all(sql`
        SELECT ${sql.unsafe(COLUMNS)} FROM feedback
        WHERE org_id = ${orgId}
        ${request.task_id !== undefined ? sql`AND task_id = ${request.task_id}` : sql``}
        ${request.status !== undefined ? sql`AND status = ${request.status}` : sql``}
        ${Option.isSome(below) ? sql`AND seq < ${below.value}` : sql``}
        ORDER BY seq DESC LIMIT ${rows}
      `))
    return { feedback: items.map(toItem), next_cursor }
  })

  const decide = Effect.fnUntraced(function*(orgId: string, feedbackId: string, to: "staged" | "rejected") {
    yield* Effect.annotateCurrentSpan({ "svc.feedback_id": feedbackId })
    const updated = yield* FeedbackRows.one(sql`
      UPDATE feedback SET status = ${to}, updated_at = now()
      WHERE id = ${feedbackId} AND org_id = ${orgId} AND status = 'pending'
      RETURNING ${sql.unsafe(COLUMNS)}
    `)
    if (updated !== undefined) return toItem(updated)
    const current = yield* StatusRows.one(sql`
      SELECT status FROM feedback WHERE id = ${feedbackId} AND org_id = ${orgId}
    `)
    if (current === undefined) return yield* new NotFound({ detail: "No such feedback." })
    return yield* new InvalidTransition({
      status_now: current.status,
      detail: current.status === "recorded"
        ? "Feedback without a correction cannot be staged or rejected."
        : `Only pending corrections can be ${to}; this one is ${current.status}.`
    })
  })

  return {
    list,
    stage: (orgId: string, feedbackId: string) => decide(orgId, feedbackId, "staged"),
    reject: (orgId: string, feedbackId: string) => decide(orgId, feedbackId, "rejected")
  }
}
