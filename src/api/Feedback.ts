/**
 * Feedback on logged task answers, its review and its promotion into dataset
 * versions (docs/feedback.md).
 */
import { Schema } from "effect"
import { HttpApiEndpoint, HttpApiGroup, HttpApiSchema, OpenApi } from "effect/http-api"
import { FeedbackQuota, ValidationAdmission } from "./Admission.ts"
import { Cursor, JsonObject, Limit, NextCursor, Text, Timestamp, TraceId, Uuid } from "./Common.ts"
import { documented, notFound } from "./Documentation.ts"
import {
  CorrectionTooComplex,
  FieldIssue,
  InvalidRequest,
  InvalidTransition,
  LimitReached,
  NotFound,
  Problem,
  RateLimited,
  ValidationBusy
} from "./Errors.ts"
import * as Examples from "./Examples.ts"
import { Authentication, requireScope } from "./Security.ts"

export const FeedbackStatus = Schema.Literals(["recorded", "pending", "staged", "rejected", "promoted"])
export type FeedbackStatus = typeof FeedbackStatus.Type

const RedactionWarning = Schema.Struct({
  fields: Schema.Array(Schema.String).annotate({
    description: "JSON paths of the changed strings, e.g. `correction.notes`"
  }),
  message: Schema.String
})

/** A verdict on an answer: 1 right, 0 neutral, -1 wrong. */
export const Score = Schema.Literals([1, 0, -1]).annotate({ description: "1 right, 0 neutral, -1 wrong" })

export const FeedbackItem = Schema.Struct({
  id: Uuid,
  inference_log_id: TraceId,
  task_id: Uuid,
  score: Score,
  correction: Schema.NullOr(JsonObject),
  status: FeedbackStatus,
  created_at: Timestamp,
  redaction_warning: Schema.optionalKey(RedactionWarning)
})
export type FeedbackItem = typeof FeedbackItem.Type

export const SubmitFeedback = Schema.Struct({
  inference_log_id: TraceId.annotate({ description: "The run's `trace_id` (also its `x-svc-trace-id` header)" }),
  score: Score,
  correction: Schema.optionalKey(
    JsonObject.annotate({ description: "The answer that should have been returned, in the task's answer shape" })
  )
})

export const PromotePreview = Schema.Struct({
  base_dataset_id: Uuid,
  expected_feedback_revision: Schema.String.annotate({
    description: "Revision of the whole staged set (every page), to pass to promote"
  }),
  staged: Schema.Array(FeedbackItem).annotate({
    description: "One page of the staged corrections, oldest first (`limit`, default 50, at most 100)"
  }),
  staged_count: Schema.Int.annotate({ description: "How many corrections are staged in all" }),
  next_cursor: NextCursor.annotate({
    description: "Pass as `cursor` for the next page of staged corrections; null on the last page"
  })
})

export const Promote = Schema.Struct({
  base_dataset_id: Uuid,
  expected_feedback_revision: Text.check(Schema.isMaxLength(200))
})

export const Promoted = Schema.Struct({
  dataset_id: Uuid,
  version: Schema.Int,
  promoted_count: Schema.Int
})

export class CorrectionShapeMismatch extends Problem<CorrectionShapeMismatch>()("CorrectionShapeMismatch", {
  code: "CORRECTION_SHAPE_MISMATCH",
  status: 422,
  title: "The correction does not fit the task's answer shape"
}, {
  field: Schema.String,
  errors: Schema.Array(FieldIssue)
}) {}

export class CorrectionContainsSecret extends Problem<CorrectionContainsSecret>()("CorrectionContainsSecret", {
  code: "CORRECTION_CONTAINS_SECRET",
  status: 422,
  title: "Removing protected values left the correction unfit for the answer shape"
}, {
  field: Schema.String,
  errors: Schema.Array(FieldIssue)
}) {}

export class DatasetBaseChanged extends Problem<DatasetBaseChanged>()("DatasetBaseChanged", {
  code: "DATASET_BASE_CHANGED",
  status: 409,
  title: "The dataset changed since the preview"
}, {
  current_base_dataset_id: Schema.optionalKey(Uuid)
}) {}

export class FeedbackChanged extends Problem<FeedbackChanged>()("FeedbackChanged", {
  code: "FEEDBACK_CHANGED",
  status: 409,
  title: "The accepted correction set changed since the preview"
}) {}

export class NothingStaged extends Problem<NothingStaged>()("NothingStaged", {
  code: "NOTHING_STAGED",
  status: 409,
  title: "The task has no staged corrections to promote"
}) {}

const FeedbackIdParams = { feedback_id: Uuid }
const TaskIdParams = { task_id: Uuid }

export class FeedbackApi extends HttpApiGroup.make("feedback")
  .add(
    // The middleware added last runs first: the quota is read before a
    // place in the validation queue is taken, so the read never holds one.
    HttpApiEndpoint.post("submit", "/v1/feedback", {
      payload: SubmitFeedback,
      success: FeedbackItem.pipe(HttpApiSchema.status(201)),
      error: [
        NotFound,
        CorrectionShapeMismatch,
        CorrectionContainsSecret,
        CorrectionTooComplex,
        ValidationBusy,
        LimitReached
      ]
    }).middleware(ValidationAdmission).middleware(FeedbackQuota).pipe(
      requireScope(
        "feedback.write",
        "Records feedback on a logged run. A correction is checked against the task's answer schema and scrubbed of protected values (`redaction_warning` says which fields changed); it starts `pending`, feedback without one is `recorded`."
      ),
      documented({
        summary: "Submit feedback",
        request: Examples.submitFeedback,
        response: Examples.feedbackItem,
        errors: {
          404: "`inference_log_id` names no run in your organization.",
          409:
            "Your organization's feedback would pass `SVC_MAX_FEEDBACK_BYTES_PER_ORG` bytes with this one (`LIMIT_REACHED`); decided before the correction is checked.",
          429:
            "The validation queue is full and your organization holds at least its share of it (`VALIDATION_BUSY`, `limit` names the setting); retry after `Retry-After` seconds."
        }
      })
    ),
    HttpApiEndpoint.get("list", "/v1/feedback", {
      query: {
        task_id: Schema.optionalKey(Uuid),
        status: Schema.optionalKey(FeedbackStatus),
        limit: Limit,
        cursor: Cursor
      },
      success: Schema.Struct({ feedback: Schema.Array(FeedbackItem), next_cursor: NextCursor }),
      error: InvalidRequest
    }).pipe(
      requireScope("feedback.read", "Lists feedback, newest first."),
      documented({ summary: "List feedback", response: Examples.feedbackList })
    ),
    HttpApiEndpoint.post("stage", "/v1/feedback/:feedback_id/stage", {
      params: FeedbackIdParams,
      success: FeedbackItem,
      error: [NotFound, InvalidTransition]
    }).pipe(
      requireScope(["feedback.review", "feedback.write"], "Moves a pending correction to `staged`."),
      documented({
        summary: "Stage a correction",
        response: Examples.stagedFeedback,
        errors: { 409: "The feedback is not pending (`INVALID_TRANSITION`)." }
      })
    ),
    HttpApiEndpoint.post("reject", "/v1/feedback/:feedback_id/reject", {
      params: FeedbackIdParams,
      success: FeedbackItem,
      error: [NotFound, InvalidTransition]
    }).pipe(
      requireScope(["feedback.review", "feedback.write"], "Moves a pending correction to `rejected`."),
      documented({
        summary: "Reject a correction",
        response: Examples.rejectedFeedback,
        errors: { 409: "The feedback is not pending (`INVALID_TRANSITION`)." }
      })
    ),
    HttpApiEndpoint.get("promotePreview", "/v1/tasks/:task_id/feedback/promote/preview", {
      params: TaskIdParams,
      query: { limit: Limit, cursor: Cursor },
      success: PromotePreview,
      error: [NotFound, InvalidRequest]
    }).pipe(
      requireScope(
        "feedback.read",
        "The task's current dataset version and the revision of its staged corrections, to pass to promote, with a page of the staged corrections (oldest first; `next_cursor` fetches the next page). Every page carries the revision of the whole staged set as it is now."
      ),
      documented({
        summary: "Preview a promotion",
        response: Examples.promotePreview,
        errors: { 404: notFound("task") }
      })
    ),
    HttpApiEndpoint.post("promote", "/v1/tasks/:task_id/feedback/promote", {
      params: TaskIdParams,
      payload: Promote,
      success: Promoted.pipe(HttpApiSchema.status(201)),
      error: [NotFound, DatasetBaseChanged, FeedbackChanged, NothingStaged, LimitReached, RateLimited]
    }).pipe(
      requireScope(
        "datasets.write",
        "Creates the next dataset version: the base examples plus every staged correction (the run's input with the corrected answer); those corrections become `promoted`."
      ),
      documented({
        summary: "Promote staged corrections",
        request: Examples.promote,
        response: Examples.promoted,
        errors: {
          409:
            "The preview is stale (`DATASET_BASE_CHANGED`, `FEEDBACK_CHANGED`), nothing is staged (`NOTHING_STAGED`), or the new version would pass `SVC_MAX_EXAMPLES_PER_DATASET` (`LIMIT_REACHED`).",
          429:
            "The organization promoted `SVC_MAX_PROMOTES_PER_MINUTE` times within the last minute (`RATE_LIMITED`, with `Retry-After`)."
        }
      })
    )
  )
  .middleware(Authentication)
  .annotate(OpenApi.Title, "Feedback")
{}
