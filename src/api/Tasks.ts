/**
 * Tasks, logged runs and dataset versions (docs/feedback.md, "Tasks and
 * runs", "Promotion").
 */
import { Schema } from "effect"
import { HttpApiEndpoint, HttpApiGroup, HttpApiSchema, OpenApi } from "effect/http-api"
import {
  Cursor,
  IntegerFromDigits,
  JsonObject,
  JsonValue,
  Limit,
  NextCursor,
  Text,
  Timestamp,
  TraceId,
  Uuid
} from "./Common.ts"
import { documented, notFound } from "./Documentation.ts"
import {
  AnswerSchemaTooComplex,
  InvalidRequest,
  LimitReached,
  NotFound,
  TooManyStreams,
  ValidationBusy
} from "./Errors.ts"
import * as Examples from "./Examples.ts"
import { Authentication, requireScope } from "./Security.ts"

export const Task = Schema.Struct({
  id: Uuid,
  name: Schema.String,
  answer_schema: JsonObject,
  created_at: Timestamp
})
export type Task = typeof Task.Type

export const CreateTask = Schema.Struct({
  name: Text.check(Schema.isMinLength(1), Schema.isMaxLength(200)),
  answer_schema: JsonObject.annotate({
    description: "JSON Schema (draft 2020-12 by default; draft-07 when `$schema` says so) of the task's answer"
  })
})

export const Run = Schema.Struct({
  trace_id: TraceId,
  task_id: Uuid,
  input: JsonValue,
  answer: JsonValue,
  created_at: Timestamp
})
export type Run = typeof Run.Type

export const LogRun = Schema.Struct({
  input: JsonValue,
  answer: JsonValue
})

export const DatasetSummary = Schema.Struct({
  id: Uuid,
  task_id: Uuid,
  version: Schema.Int,
  created_at: Timestamp,
  example_count: Schema.Int
})
export type DatasetSummary = typeof DatasetSummary.Type

export const Example = Schema.Struct({
  input: JsonValue,
  answer: JsonValue,
  feedback_id: Schema.optionalKey(Uuid)
})
export type Example = typeof Example.Type

export const Dataset = Schema.Struct({
  ...DatasetSummary.fields,
  examples: Schema.Array(Example).annotate({
    description: "One page of the version's examples, in their order (`limit`, default 50, at most 100)"
  }),
  next_cursor: NextCursor.annotate({
    description: "Pass as `cursor` for the next page of examples; null on the last page"
  })
})
export type Dataset = typeof Dataset.Type

/**
 * One line of a version's JSON Lines export: an example, with `feedback_id`
 * null when it did not come from a correction.
 */
const ExportLine = Schema.Struct({
  input: JsonValue,
  answer: JsonValue,
  feedback_id: Schema.NullOr(Uuid)
})
export type ExportLine = typeof ExportLine.Type

/** The export's media type: the format of `.jsonl` files, one JSON text per line. */
export const EXPORT_MEDIA_TYPE = "application/jsonl"

/** The export of a version: its lines, with the checksum and size sent before them. */
const DatasetExport = HttpApiSchema.WithHeaders(
  HttpApiSchema.StreamNdjson({ schema: ExportLine, contentType: EXPORT_MEDIA_TYPE, maxElementBytes: "64 MiB" }),
  {
    "repr-digest": Schema.String.annotate({
      description:
        "`sha-256=:<base64>:` (RFC 9530): SHA-256 of the whole export (every line, from the first), also on a resumed export"
    }),
    "x-svc-example-count": Schema.NumberFromString.check(Schema.isInt()).annotate({
      description: "Examples in the version: the whole export's line count (a decimal integer)"
    })
  }
)

const TaskIdParams = { task_id: Uuid }

export class TasksApi extends HttpApiGroup.make("tasks")
  .add(
    HttpApiEndpoint.post("create", "/v1/tasks", {
      payload: CreateTask,
      success: Task.pipe(HttpApiSchema.status(201)),
      error: [AnswerSchemaTooComplex, ValidationBusy, LimitReached]
    }).pipe(
      requireScope("tasks.write", "Creates a task and its first, empty dataset version."),
      documented({
        summary: "Create a task",
        request: Examples.createTask,
        response: Examples.task,
        errors: {
          409: "The organization already has `SVC_MAX_TASKS_PER_ORG` tasks (`LIMIT_REACHED`).",
          429:
            "The validation queue is full and your organization holds at least its share of it (`VALIDATION_BUSY`); retry after `Retry-After` seconds."
        }
      })
    ),
    HttpApiEndpoint.get("list", "/v1/tasks", {
      query: { limit: Limit, cursor: Cursor },
      success: Schema.Struct({ tasks: Schema.Array(Task), next_cursor: NextCursor })
    }).pipe(
      requireScope("tasks.read", "Lists tasks, newest first."),
      documented({ summary: "List tasks", response: Examples.taskList })
    ),
    HttpApiEndpoint.get("get", "/v1/tasks/:task_id", {
      params: TaskIdParams,
      success: Task,
      error: NotFound
    }).pipe(
      requireScope("tasks.read"),
      documented({
        summary: "Get a task",
        description: "One task with its answer schema.",
        response: Examples.task,
        errors: { 404: notFound("task") }
      })
    ),
    HttpApiEndpoint.post("logRun", "/v1/tasks/:task_id/runs", {
      params: TaskIdParams,
      payload: LogRun,
      success: Run.pipe(HttpApiSchema.status(201)),
      error: [NotFound, LimitReached]
    }).pipe(
      requireScope(
        "tasks.write",
        "Logs a run of the task. The answer's `trace_id` is also sent in the `x-svc-trace-id` header; it is the `inference_log_id` of feedback."
      ),
      documented({
        summary: "Log a run",
        request: Examples.logRun,
        response: Examples.run,
        errors: {
          404: notFound("task"),
          409:
            "The organization's logged runs would pass `SVC_MAX_RUN_BYTES_PER_ORG` bytes (`LIMIT_REACHED`); nothing is stored."
        }
      })
    ),
    HttpApiEndpoint.get("listRuns", "/v1/tasks/:task_id/runs", {
      params: TaskIdParams,
      query: { limit: Limit, cursor: Cursor },
      success: Schema.Struct({ runs: Schema.Array(Run), next_cursor: NextCursor }),
      error: NotFound
    }).pipe(
      requireScope("tasks.read", "Lists the task's runs, newest first."),
      documented({
        summary: "List a task's runs",
        response: Examples.runList,
        errors: { 404: notFound("task") }
      })
    ),
    HttpApiEndpoint.get("getRun", "/v1/runs/:trace_id", {
      params: { trace_id: TraceId },
      success: Run,
      error: NotFound
    }).pipe(
      requireScope("tasks.read"),
      documented({
        summary: "Get a run",
        description: "One logged run, by its trace id.",
        response: Examples.run,
        errors: { 404: notFound("run") }
      })
    )
  )
  .middleware(Authentication)
  .annotate(OpenApi.Title, "Tasks and runs")
{}

export class DatasetsApi extends HttpApiGroup.make("datasets")
  .add(
    HttpApiEndpoint.get("listForTask", "/v1/tasks/:task_id/datasets", {
      params: TaskIdParams,
      query: { limit: Limit, cursor: Cursor },
      success: Schema.Struct({ datasets: Schema.Array(DatasetSummary), next_cursor: NextCursor }),
      error: [NotFound, InvalidRequest]
    }).pipe(
      requireScope(
        "datasets.read",
        "Lists the task's dataset versions, oldest first, in pages (`limit`, default 50, at most 100; `next_cursor`)."
      ),
      documented({
        summary: "List a task's dataset versions",
        response: Examples.datasetList,
        errors: { 404: notFound("task") }
      })
    ),
    HttpApiEndpoint.get("get", "/v1/datasets/:dataset_id", {
      params: { dataset_id: Uuid },
      query: { limit: Limit, cursor: Cursor },
      success: Dataset,
      error: [NotFound, InvalidRequest]
    }).pipe(
      requireScope(
        "datasets.read",
        "One dataset version with a page of its examples, in their order; `next_cursor` fetches the next page. Versions never change."
      ),
      documented({
        summary: "Get a dataset version",
        response: Examples.dataset,
        errors: { 404: notFound("dataset version") }
      })
    ),
    HttpApiEndpoint.get("export", "/v1/datasets/:dataset_id/export", {
      params: { dataset_id: Uuid },
      query: {
        after: Schema.optionalKey(
          IntegerFromDigits({
            minimum: 0,
            maximum: 2 ** 31 - 1,
            description:
              "Lines already received: the export resumes with the next one (0, the default, starts at the first)"
          })
        )
      },
      success: DatasetExport,
      error: [NotFound, InvalidRequest, TooManyStreams]
    }).pipe(
      requireScope(
        "datasets.read",
        "The whole version as JSON Lines (`application/jsonl`), one example per line in the version's order: `{\"input\": ..., \"answer\": ..., \"feedback_id\": ...}` (null when the example did not come from a correction), each line ended by `\\n`. Streamed as it is read, in bounded pages. `Repr-Digest` carries the SHA-256 of the whole export and `x-svc-example-count` its number of lines; a download cut short resumes with `after` set to the number of complete lines received, and the parts joined have that digest. An export counts as an open stream (429 `TOO_MANY_STREAMS`) and ends when its key or console session is revoked."
      ),
      documented({
        summary: "Export a dataset version as JSON Lines",
        response: Examples.exportLine,
        errors: {
          400: "`after` is not a whole number from 0 to the version's example count (`field` names it).",
          404: notFound("dataset version"),
          429: "Too many open streams (`TOO_MANY_STREAMS`; `limit` names the setting)."
        }
      })
    )
  )
  .middleware(Authentication)
  .annotate(OpenApi.Title, "Datasets")
{}
