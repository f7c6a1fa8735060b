/**
 * Tasks, their logged runs and their dataset versions. Creating a task
 * creates its first, empty dataset version in the same transaction.
 */
import { PgClient } from "@effect/sql-pg"
import { Clock, Context, Effect, Exit, Layer, Option, Schema } from "effect"
import {
  type AnswerSchemaTooComplex,
  type InvalidRequest,
  LimitReached,
  NotFound,
  type ValidationBusy
} from "../api/Errors.ts"
import { type CreateTask, type Dataset, DatasetSummary, Example, type LogRun, Run, Task } from "../api/Tasks.ts"
import { SvcConfig } from "../platform/Config.ts"
import { randomTraceId, SecretBox } from "../platform/Crypto.ts"
import {
  type CursorMac,
  type CursorScope,
  DEFAULT_PAGE_LIMIT,
  encodeCursor,
  keysetPage,
  page,
  type PageRequest,
  seqBound
} from "../platform/Cursor.ts"
import { newId } from "../platform/Ids.ts"
import { type ByteQuota, refuseAtCap, refuseOverQuota } from "../platform/OrgLimits.ts"
import { BigIntText, JsonColumn, rowsOf, Timestamp } from "../platform/Rows.ts"
import { AnswerSchemas } from "./AnswerSchema.ts"
import { insertDatasetVersion } from "./DatasetVersions.ts"
import { runBytes, runInsert } from "./RunInsert.ts"
import { checkSchema } from "./SchemaCheck.ts"

// Rows carry `seq` for paging; the domain shapes do not.
const TaskRows = rowsOf(
  "tasks",
  Schema.Struct({
    ...Task.fields,
    answer_schema: JsonColumn(Task.fields.answer_schema),
    created_at: Timestamp,
    seq: BigIntText
  })
)
const RunRows = rowsOf(
  "runs",
  Schema.Struct({
    ...Run.fields,
    input: JsonColumn(Run.fields.input),
    answer: JsonColumn(Run.fields.answer),
    created_at: Timestamp,
    seq: BigIntText
  })
)
const DatasetRows = rowsOf("datasets", Schema.Struct({ ...DatasetSummary.fields, created_at: Timestamp }))
const VersionRows = rowsOf(
  "datasets",
  Schema.Struct({ ...DatasetSummary.fields, created_at: Timestamp, lineage_id: Schema.String })
)
const ExampleRows = rowsOf(
  "dataset_examples",
  Schema.Struct({
    seq: Schema.Number,
    input: JsonColumn(Example.fields.input),
    answer: JsonColumn(Example.fields.answer),
    feedback_id: Schema.NullOr(Schema.String)
  })
)

const withoutSeq = <A extends { readonly seq: string }>({ seq: _, ...rest }: A): Omit<A, "seq"> => rest

/** The run quota (`org_usage` of kind `runs`): each run counts 256 bytes plus its input's and answer's JSON. */
const runQuota = (config: { readonly maxRunBytesPerOrg: number }): ByteQuota => ({
  kind: "runs",
  limit: "SVC_MAX_RUN_BYTES_PER_ORG",
  value: config.maxRunBytesPerOrg,
  what: "logged runs"
})

export class Tasks extends Context.Service<Tasks, {
  readonly create: (orgId: string, input: typeof CreateTask.Type) => Effect.Effect<
    Task,
    InvalidRequest | AnswerSchemaTooComplex | ValidationBusy | LimitReached
  >
  readonly list: (
    orgId: string,
    request: PageRequest
  ) => Effect.Effect<{ readonly tasks: ReadonlyArray<Task>; readonly next_cursor: string | null }, InvalidRequest>
  readonly get: (orgId: string, taskId: string) => Effect.Effect<Task, NotFound>
  readonly logRun: (
    orgId: string,
    taskId: string,
    input: typeof LogRun.Type
  ) => Effect.Effect<Run, NotFound | LimitReached>
  readonly listRuns: (
    orgId: string,
    taskId: string,
    request: PageRequest
  ) => Effect.Effect<
    { readonly runs: ReadonlyArray<Run>; readonly next_cursor: string | null },
    NotFound | InvalidRequest
  >
  readonly getRun: (orgId: string, traceId: string) => Effect.Effect<Run, NotFound>
  readonly listDatasets: (
    orgId: string,
    taskId: string,
    request: PageRequest
  ) => Effect.Effect<
    { readonly datasets: ReadonlyArray<DatasetSummary>; readonly next_cursor: string | null },
    NotFound | InvalidRequest
  >
  readonly getDataset: (
    orgId: string,
    datasetId: string,
    request: PageRequest
  ) => Effect.Effect<Dataset, NotFound | InvalidRequest>
}>()("svc/tasks/Tasks") {
  static readonly layer = Layer.effect(
    Tasks,
    Effect.gen(function*() {
      const sql = yield* PgClient.PgClient
      const box = yield* SecretBox
      const mac: CursorMac = (message) => box.mac("cursor", message)
      const schemas = yield* AnswerSchemas
      const config = yield* SvcConfig

      const create = Effect.fn("Tasks.create")(function*(
        orgId: string,
        input: typeof CreateTask.Type
      ) {
        const id = newId()
        yield* checkSchema(schemas, orgId, id, input.answer_schema)
        const row = yield* sql.withTransaction(Effect.gen(function*() {
          yield* refuseAtCap(sql, orgId, "tasks", {
            value: config.maxTasksPerOrg,
            limit: "SVC_MAX_TASKS_PER_ORG",
            detail:
              `The organization already has ${config.maxTasksPerOrg} tasks, the most allowed (SVC_MAX_TASKS_PER_ORG).`
          })
          const task = yield* TaskRows.returned(sql`
            INSERT INTO tasks (id, org_id, name, answer_schema)
            VALUES (${id}, ${orgId}, ${input.name}, ${sql.json(input.answer_schema)})
            RETURNING id, seq, name, answer_schema, created_at
          `)
          const datasetId = newId()
          yield* insertDatasetVersion(sql, {
            id: datasetId,
            orgId,
            taskId: id,
            version: 1,
            exampleCount: 0,
            lineageId: datasetId
          })
          return task
        })).pipe(Effect.catchTag("SqlError", Effect.die))
        return withoutSeq(row)
      })

      const list = Effect.fn("Tasks.list")(function*(orgId: string, request: PageRequest) {
        const { items, next_cursor } = yield* keysetPage(
          mac,
          { orgId, list: "tasks" },
          request,
          (below, rows) =>
            TaskRows.all(sql`
            SELECT id, seq, name, answer_schema, created_at FROM tasks
            WHERE org_id = ${orgId} ${Option.isSome(below) ? sql`AND seq < ${below.value}` : sql``}
            ORDER BY seq DESC LIMIT ${rows}
          `)
        )
        return { tasks: items.map(withoutSeq), next_cursor }
      })

      const get = Effect.fn("Tasks.get")(function*(orgId: string, taskId: string) {
        const row = yield* TaskRows.one(sql`
          SELECT id, seq, name, answer_schema, created_at FROM tasks WHERE id = ${taskId} AND org_id = ${orgId}
        `)
        if (row === undefined) return yield* new NotFound({ detail: "No such task." })
        return withoutSeq(row)
      })

      // Plain steps, no generator, and the span without `Effect.fn`'s
      // call-site stack capture: this runs on every logged run.
      const logRun = (orgId: string, taskId: string, input: typeof LogRun.Type) =>
        Effect.withFiber((fiber) => {
          // The run is a trace of its own: its span's trace id is the run's
          // trace_id (the feedback `inference_log_id`), and it links to the
          // request's span (here `Tasks.logRun`). A fresh trace, not the
          // request's, so two runs logged under one caller `traceparent` keep
          // distinct ids. Ended only once the run exists: a log refused
          // (unknown task) is not a run, and its span, never ended, is never exported.
          const cached = fiber.cache.span
          const request = cached?._tag === "Span" ? cached : undefined
          const runSpan = Effect.makeSpan("Tasks.run", {
            root: true,
            links: request !== undefined ? [{ span: request, attributes: {} }] : [],
            // `invoke_agent`: the GenAI semantic conventions' operation for an agent's answer (docs/telemetry.md).
            attributes: { "svc.org_id": orgId, "svc.task_id": taskId, "gen_ai.operation.name": "invoke_agent" }
          })
          return Effect.flatMap(runSpan, (span) => {
            const traceId = /^(?!0{32})[0-9a-f]{32}$/.test(span.traceId) ? span.traceId : randomTraceId()
            const inputText = JSON.stringify(input.input)
            const answerText = JSON.stringify(input.answer)
            const bytes = runBytes(inputText, answerText)
            return Effect.flatMap(
              runInsert(sql, {
                traceId,
                orgId,
                taskId,
                input: inputText,
                answer: answerText,
                bytes,
                maxBytes: config.maxRunBytesPerOrg
              }),
              (row): Effect.Effect<Run, NotFound | LimitReached> => {
                // Kept out by the quota, or the organization has no such task.
                if (row === undefined) {
                  return Effect.andThen(
                    refuseOverQuota(sql, orgId, runQuota(config), bytes),
                    Effect.fail(new NotFound({ detail: "No such task." }))
                  )
                }
                span.end(fiber.getRef(Clock.Clock).currentTimeNanosUnsafe(), Exit.void)
                if (request !== undefined && request.status._tag !== "Ended") {
                  request.attribute("svc.task_id", taskId)
                  request.attribute("svc.trace_id", traceId)
                }
                // The stored input and answer are the request's, as the JSON they were stored from.
                return Effect.succeed({
                  trace_id: traceId,
                  task_id: row.task_id,
                  input: input.input,
                  answer: input.answer,
                  created_at: row.created_at
                })
              }
            )
          })
        }).pipe(Effect.withSpan("Tasks.logRun", undefined, { captureStackTrace: false }))

      const listRuns = Effect.fn("Tasks.listRuns")(function*(orgId: string, taskId: string, request: PageRequest) {
        yield* get(orgId, taskId)
        const { items, next_cursor } = yield* keysetPage(
          mac,
          { orgId, list: "runs", filters: [taskId] },
          request,
          (below, rows) =>
            RunRows.all(sql`
            SELECT trace_id, seq, task_id, input, answer, created_at FROM runs
            WHERE task_id = ${taskId} AND org_id = ${orgId}
            ${Option.isSome(below) ? sql`AND seq < ${below.value}` : sql``}
            ORDER BY seq DESC LIMIT ${rows}
          `)
        )
        return { runs: items.map(withoutSeq), next_cursor }
      })

      const getRun = Effect.fn("Tasks.getRun")(function*(orgId: string, traceId: string) {
        const row = yield* RunRows.one(sql`
          SELECT trace_id, seq, task_id, input, answer, created_at FROM runs
          WHERE trace_id = ${traceId} AND org_id = ${orgId}
        `)
        if (row === undefined) return yield* new NotFound({ detail: "No such run." })
        return withoutSeq(row)
      })

      // Oldest first: a cursor holds the last version of its page, and the
      // next page starts above it (versions only ever get added above).
      const listDatasets = Effect.fn("Tasks.listDatasets")(
        function*(orgId: string, taskId: string, request: PageRequest) {
          const { items, next_cursor } = yield* keysetPage(
            mac,
            { orgId, list: "datasets", filters: [taskId] },
            request,
            (after, rows) =>
              Effect.andThen(
                get(orgId, taskId),
                DatasetRows.all(sql`
              SELECT id, task_id, version, example_count, created_at FROM datasets
              WHERE task_id = ${taskId} AND org_id = ${orgId}
              ${Option.isSome(after) ? sql`AND version > ${Number(after.value)}` : sql``}
              ORDER BY version LIMIT ${rows}
            `).pipe(Effect.map((found) => found.map((row) => ({ ...row, seq: row.version }))))
              )
          )
          return { datasets: items.map(({ seq: _, ...summary }) => summary), next_cursor }
        }
      )

      // A version's examples are its line's rows below its count (migration
      // 0630): one index range per page, whatever the version's size.
      const getDataset = Effect.fn("Tasks.getDataset")(
        function*(orgId: string, datasetId: string, request: PageRequest) {
          const limit = request.limit ?? DEFAULT_PAGE_LIMIT
          const scope: CursorScope = { orgId, list: "dataset_examples", filters: [datasetId] }
          const after = yield* seqBound(mac, scope, request.cursor)
          const row = yield* VersionRows.one(sql`
          SELECT id, task_id, version, example_count, created_at, lineage_id FROM datasets
          WHERE id = ${datasetId} AND org_id = ${orgId}
        `)
          if (row === undefined) return yield* new NotFound({ detail: "No such dataset." })
          const examples = yield* ExampleRows.all(sql`
          SELECT position AS seq, input, answer, feedback_id FROM dataset_examples
          WHERE lineage_id = ${row.lineage_id} AND position < ${row.example_count}
          ${Option.isSome(after) ? sql`AND position > ${Number(after.value)}` : sql``}
          ORDER BY position LIMIT ${limit + 1}
        `)
          const { items, next_cursor } = page(examples, limit, (seq) => encodeCursor(mac, scope, seq))
          const { lineage_id: _, ...summary } = row
          return {
            ...summary,
            examples: items.map(({ seq: _, feedback_id, ...example }) =>
              feedback_id === null ? example : { ...example, feedback_id }
            ),
            next_cursor
          }
        }
      )

      return Tasks.of({ create, list, get, logRun, listRuns, getRun, listDatasets, getDataset })
    })
  )
}
