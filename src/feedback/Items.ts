/**
 * A feedback row as the database holds it, and the item the API shows for
 * it (with the redaction warning when protected values were removed).
 */
import { Schema } from "effect"
import { type FeedbackItem, FeedbackStatus, Score } from "../api/Feedback.ts"
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
