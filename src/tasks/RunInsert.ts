/**
 * The run INSERT of `Tasks.logRun` (`POST /v1/tasks/:task_id/runs`, the
 * cheapest write with a body) as constant text with positional parameters,
 * returning only what svc does not already hold.
 *
 * Speeds up: the INSERT used to be an `sql` template compiled on every
 * POST and returned the stored `input` and `answer`, so PostgreSQL wrote
 * both `jsonb` values back out as text and svc parsed them again (about
 * 1 KB each way for the bench's run) and decoded the row by schema. The
 * answer's `input` and `answer` are the request's own (decoded from its
 * JSON, stored as that JSON: the same values once parsed); the statement
 * returns the task id and the creation time. Measured on the PostgreSQL
 * server with a ~1 KB run, with the service step and handler as plain
 * steps (`AB_ALLOC=1 sh bench/ab-request-path.sh`, two interleaved rounds):
 * the main thread allocates 92 KB per logged run instead of 101, and svc
 * spends 457-493 µs of CPU per logged run instead of 557-570 (PGlite:
 * 815-915 instead of 1 070-1 140; bench/notes/request-path.md, "Fifth round").
 * Since then the statement also checks and counts the organization's run
 * quota (a sub-select over at most 16 usage rows and an upsert of one), as
 * the feedback INSERT does; those figures predate it.
 */
import { Effect } from "effect"
import type { SqlClient } from "effect/sql"
import { usageCountText } from "../platform/OrgLimits.ts"
import { createdRow } from "../platform/Rows.ts"

// The run is stored only within the organization's run quota
// (`SVC_MAX_RUN_BYTES_PER_ORG`, `org_usage` of kind `runs`, migration 0791),
// and its bytes are counted in one shard in the same statement.
const RUN_INSERT = `
  WITH inserted AS (
    INSERT INTO runs (trace_id, org_id, task_id, input, answer)
    SELECT $1, $2, id, $3::jsonb, $4::jsonb FROM tasks WHERE id = $5 AND org_id = $6
    AND (SELECT coalesce(sum(bytes), 0) FROM org_usage WHERE org_id = $7 AND kind = 'runs') + $8 <= $9
    RETURNING task_id, created_at
  ), counted AS (
    ${usageCountText("runs", { orgId: "$10", bytes: "$11", from: "inserted" })}
  )
  SELECT task_id, created_at FROM inserted`

/** What one logged run counts against `SVC_MAX_RUN_BYTES_PER_ORG`: the record, and its input's and answer's JSON. */
export const RUN_RECORD_BYTES = 256
export const runBytes = (input: string, answer: string) =>
  RUN_RECORD_BYTES + Buffer.byteLength(input, "utf8") + Buffer.byteLength(answer, "utf8")

const created = createdRow("runs")

/**
 * Inserts run `traceId` of `orgId`'s task `taskId` (`input` and `answer` as
 * JSON text, `bytes` their `runBytes`); none when the task is not the
 * organization's, or when the run would pass `maxBytes`.
 */
export const runInsert = (
  sql: SqlClient.SqlClient,
  run: {
    readonly traceId: string
    readonly orgId: string
    readonly taskId: string
    readonly input: string
    readonly answer: string
    readonly bytes: number
    readonly maxBytes: number
  }
) =>
  sql.unsafe(RUN_INSERT, [
    run.traceId,
    run.orgId,
    run.input,
    run.answer,
    run.taskId,
    run.orgId,
    run.orgId,
    run.bytes,
    run.maxBytes,
    run.orgId,
    run.bytes
  ]).pipe(Effect.orDie, Effect.flatMap(created))
