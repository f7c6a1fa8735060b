/**
 * Feedback rows as the database holds them and the items the API shows for
 * them (with the redaction warning when protected values were removed), and
 * what a reviewer does with them: the organization's list, newest first;
 * the transitions pending to staged or rejected; promotion of a task's
 * staged corrections into its next dataset version, and the preview a
 * reviewer promotes from.
 *
 * The revision of a task's staged set is a digest of the staged ids. A
 * correction only leaves `staged` by being promoted, and promotion also
 * creates a new dataset version, so together with `base_dataset_id` the
 * digest can never come back to an earlier value meaning something else.
 */
import { Effect, Option, Schema } from "effect"
import { type SqlClient, SqlError } from "effect/sql"
import { InvalidTransition, LimitReached, NotFound } from "../api/Errors.ts"
import {
  DatasetBaseChanged,
  FeedbackChanged,
  type FeedbackItem,
  FeedbackStatus,
  NothingStaged,
  type Promote,
  Score
} from "../api/Feedback.ts"
import type { SvcConfigShape } from "../platform/Config.ts"
import type { SecretBox } from "../platform/Crypto.ts"
import { type CursorScope, encodeCursor, keysetPage, page, type PageRequest, seqBound } from "../platform/Cursor.ts"
import { sha256Hex } from "../platform/Digest.ts"
import { newId } from "../platform/Ids.ts"
import { claimRate } from "../platform/OrgLimits.ts"
import { BigIntText, JsonColumn, rowsOf, Timestamp } from "../platform/Rows.ts"
import { insertDatasetVersion } from "../tasks/DatasetVersions.ts"

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
const FeedbackRows = rowsOf("feedback", FeedbackRow)

const COLUMNS = "id, seq, task_id, inference_log_id, score, correction, redacted_fields, status, created_at"

const REDACTION_MESSAGE =
  "Protected values (credentials or recognizable secrets) were removed from these fields of the correction before it was saved."

export const toItem = (row: Omit<typeof FeedbackRow.Type, "seq">): FeedbackItem => ({
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

/** The revision of a staged set: a digest of its ids (order-independent). */
const revisionOf = (ids: ReadonlyArray<string>) => sha256Hex([...ids].sort().join(",")).slice(0, 32)

const TaskRows = rowsOf("tasks", Schema.Struct({ id: Schema.String }))
const DatasetRows = rowsOf(
  "datasets",
  Schema.Struct({
    id: Schema.String,
    version: Schema.Number,
    example_count: Schema.Number,
    lineage_id: Schema.String
  })
)
const IdRows = rowsOf("feedback", Schema.Struct({ id: Schema.String }))
const StatusRows = rowsOf("feedback", Schema.Struct({ status: FeedbackStatus }))

/** Reading, reviewing and promoting feedback. */
export const makeReview = (sql: SqlClient.SqlClient, box: SecretBox["Service"], config: SvcConfigShape) => {
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

  const currentDataset = (orgId: string, taskId: string, lock: boolean) =>
    Effect.gen(function*() {
      // Locking the task row serializes promotions of one task.
      const task = yield* TaskRows.one(
        lock
          ? sql`SELECT id FROM tasks WHERE id = ${taskId} AND org_id = ${orgId} FOR UPDATE`
          : sql`SELECT id FROM tasks WHERE id = ${taskId} AND org_id = ${orgId}`
      )
      if (task === undefined) return Option.none()
      const dataset = yield* DatasetRows.one(sql`
        SELECT id, version, example_count, lineage_id FROM datasets WHERE task_id = ${taskId} ORDER BY version DESC LIMIT 1
      `)
      return Option.fromUndefinedOr(dataset)
    })

  /** The ids of the task's staged corrections, oldest first (locked, for a promote). */
  const stagedIds = (orgId: string, taskId: string, lock: boolean) =>
    IdRows.all(sql`
      SELECT id FROM feedback
      WHERE task_id = ${taskId} AND org_id = ${orgId} AND status = 'staged' ORDER BY seq
      ${lock ? sql`FOR UPDATE` : sql``}
    `).pipe(Effect.map((rows) => rows.map((row) => row.id)))

  const preview = Effect.fnUntraced(function*(orgId: string, taskId: string, request: PageRequest) {
    yield* Effect.annotateCurrentSpan({ "svc.task_id": taskId })
    const limit = request.limit ?? 50
    const scope: CursorScope = { orgId, list: "promote_preview", filters: [taskId] }
    const after = yield* seqBound(mac, scope, request.cursor)
    // One snapshot: the page, the count and the revision describe the same staged set.
    const [dataset, ids, rows] = yield* sql.withTransaction(
      sql`SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY`.pipe(
        Effect.andThen(Effect.all([
          currentDataset(orgId, taskId, false),
          stagedIds(orgId, taskId, false),
          FeedbackRows.all(sql`
            SELECT ${sql.unsafe(COLUMNS)} FROM feedback
            WHERE task_id = ${taskId} AND org_id = ${orgId} AND status = 'staged'
            ${Option.isSome(after) ? sql`AND seq > ${after.value}` : sql``}
            ORDER BY seq LIMIT ${limit + 1}`)
        ]))
      )
    ).pipe(Effect.orDie)
    if (Option.isNone(dataset)) return yield* new NotFound({ detail: "No such task." })
    const { items, next_cursor } = page(rows, limit, (seq) => encodeCursor(mac, scope, seq))
    return {
      base_dataset_id: dataset.value.id,
      expected_feedback_revision: revisionOf(ids),
      staged: items.map(toItem),
      staged_count: ids.length,
      next_cursor
    }
  })

  // The promote rate, shared by every process (`claimRate`).
  const claimPromote = (orgId: string) =>
    claimRate(sql, orgId, {
      name: "promote",
      perMinute: config.maxPromotesPerMinute,
      limit: "SVC_MAX_PROMOTES_PER_MINUTE",
      what: "promotes"
    })

  const promote = Effect.fnUntraced(function*(orgId: string, taskId: string, input: typeof Promote.Type) {
    yield* Effect.annotateCurrentSpan({ "svc.task_id": taskId })
    const result = yield* sql.withTransaction(Effect.gen(function*() {
      const dataset = yield* currentDataset(orgId, taskId, true)
      if (Option.isNone(dataset)) return yield* new NotFound({ detail: "No such task." })
      const base = dataset.value
      if (base.id !== input.base_dataset_id) {
        return yield* new DatasetBaseChanged({
          current_base_dataset_id: base.id,
          detail: "The task has a newer dataset version than the previewed one; preview again and review."
        })
      }
      const ids = yield* stagedIds(orgId, taskId, true)
      if (ids.length === 0) {
        return yield* new NothingStaged({ detail: "Stage corrections before promoting them." })
      }
      if (revisionOf(ids) !== input.expected_feedback_revision) {
        return yield* new FeedbackChanged({
          detail: "The staged corrections changed since the preview; preview again and review."
        })
      }
      const count = base.example_count + ids.length
      if (count > config.maxExamplesPerDataset) {
        return yield* new LimitReached({
          limit: "SVC_MAX_EXAMPLES_PER_DATASET",
          limit_value: config.maxExamplesPerDataset,
          detail:
            `The new version would have ${count} examples, more than the ${config.maxExamplesPerDataset} allowed (SVC_MAX_EXAMPLES_PER_DATASET); nothing was promoted.`
        })
      }
      yield* claimPromote(orgId)
      const datasetId = newId()
      const version = base.version + 1
      // By reference (migration 0630): the new version is its base's line
      // plus the staged rows appended to it. Nothing earlier is copied.
      yield* insertDatasetVersion(sql, {
        id: datasetId,
        orgId,
        taskId,
        version,
        exampleCount: count,
        lineageId: base.lineage_id
      })
      const inserted = yield* sql`
        WITH promoted AS (
          UPDATE feedback SET status = 'promoted', promoted_dataset_id = ${datasetId}, updated_at = now()
          WHERE id = ANY(string_to_array(${ids.join(",")}, ',')::uuid[]) AND status = 'staged'
          RETURNING id, seq, inference_log_id, correction
        )
        INSERT INTO dataset_examples (lineage_id, position, dataset_id, input, answer, feedback_id)
        SELECT ${base.lineage_id}, ${base.example_count} + (row_number() OVER (ORDER BY p.seq))::int - 1, ${datasetId}, r.input, p.correction, p.id
        FROM promoted p JOIN runs r ON r.trace_id = p.inference_log_id
        RETURNING 1
      `
      if (inserted.length !== ids.length) {
        return yield* Effect.die(
          new Error(`promote appended ${inserted.length} examples for ${ids.length} locked staged corrections`)
        )
      }
      return { dataset_id: datasetId, version, promoted_count: ids.length }
    })).pipe(Effect.catch((error) => SqlError.isSqlError(error) ? Effect.die(error) : Effect.fail(error)))
    yield* Effect.annotateCurrentSpan({
      "svc.dataset_id": result.dataset_id,
      "svc.promoted_count": result.promoted_count
    })
    return result
  })

  return {
    list,
    stage: (orgId: string, feedbackId: string) => decide(orgId, feedbackId, "staged"),
    reject: (orgId: string, feedbackId: string) => decide(orgId, feedbackId, "rejected"),
    preview,
    promote
  }
}
