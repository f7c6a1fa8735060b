/**
 * The statements of `mcp_calls`, the one table of governed MCP calls
 * (written only here): one row per session and `step_id`, created when a
 * call is allowed (and runs) or pending (and waits), claimed by the process
 * that runs its tool (a lease on the database's clock: after a crash,
 * another process runs it once the lease is over), and finished with its
 * result. A row's id is its MCP task's id.
 */
import type { CallToolResult, Task } from "@modelcontextprotocol/sdk/types.js"
import { Effect, Schema } from "effect"
import type { SqlClient } from "effect/sql"
import { newId } from "../platform/Ids.ts"
import { JsonColumn, rowsOf, Timestamp } from "../platform/Rows.ts"

export const CallState = Schema.Literals(["pending", "running", "completed", "failed", "cancelled"])
export type CallState = typeof CallState.Type

const CallColumns = Schema.Struct({
  id: Schema.String,
  org_id: Schema.String,
  session_id: Schema.String,
  step_id: Schema.String,
  server_id: Schema.String,
  tool: Schema.String,
  arguments: JsonColumn(Schema.Record(Schema.String, Schema.Json)),
  approval_id: Schema.NullOr(Schema.String),
  state: CallState,
  status_message: Schema.NullOr(Schema.String),
  result: Schema.NullOr(JsonColumn(Schema.Json)),
  created_at: Timestamp,
  updated_at: Timestamp
})
export type CallRow = typeof CallColumns.Type
const CallRows = rowsOf("mcp_calls", CallColumns)

const COLUMNS =
  "id, org_id, session_id, step_id, server_id, tool, arguments, approval_id, state, status_message, result, created_at, updated_at"

export const isFinished = (state: CallState) => state === "completed" || state === "failed" || state === "cancelled"

/** How often a client is asked to poll a task, in milliseconds. */
export const TASK_POLL_INTERVAL_MS = 1000

/** The MCP task of a call; `message`: its status message when it is still under way. */
export const toTask = (row: CallRow, message?: string): Task => {
  const statusMessage = message ?? row.status_message
  return {
    taskId: row.id,
    status: row.state === "pending" || row.state === "running" ? "working" : row.state,
    ...(statusMessage === null ? {} : { statusMessage }),
    createdAt: row.created_at,
    lastUpdatedAt: row.updated_at,
    ttl: null,
    pollInterval: TASK_POLL_INTERVAL_MS
  }
}

export interface NewCall {
  readonly orgId: string
  readonly sessionId: string
  readonly stepId: string
  readonly serverId: string
  readonly tool: string
  readonly arguments: Record<string, unknown>
  readonly approvalId: string | null
}

export const makeCallRows = (sql: SqlClient.SqlClient, leaseMs: number) => {
  /** The call of a session's step, created in `state` (`running`: claimed now) unless it exists; answers the row either way. */
  const open = (call: NewCall, state: "pending" | "running") =>
    Effect.gen(function*() {
      const inserted = yield* CallRows.one(sql`
        INSERT INTO mcp_calls (id, org_id, session_id, step_id, server_id, tool, arguments, approval_id, state, lease_until)
        VALUES (${newId()}, ${call.orgId}, ${call.sessionId}, ${call.stepId}, ${call.serverId}, ${call.tool},
                ${JSON.stringify(call.arguments)}::jsonb, ${call.approvalId}, ${state},
                ${state === "running" ? sql`now() + ${`${leaseMs} milliseconds`}::interval` : null})
        ON CONFLICT (session_id, step_id) DO NOTHING
        RETURNING ${sql.literal(COLUMNS)}
      `)
      if (inserted !== undefined) return { row: inserted, created: true }
      const found = yield* CallRows.returned(sql`
        SELECT ${sql.literal(COLUMNS)} FROM mcp_calls WHERE session_id = ${call.sessionId} AND step_id = ${call.stepId}
      `)
      return { row: found, created: false }
    })

  /** The call whose task this is, in the organization. */
  const find = (orgId: string, id: string) =>
    CallRows.one(sql`SELECT ${sql.literal(COLUMNS)} FROM mcp_calls WHERE id = ${id} AND org_id = ${orgId}`)

  /** Takes the call to run its tool: one waiting for its run, or one whose runner's lease is over. */
  const claim = (id: string) =>
    CallRows.one(sql`
      UPDATE mcp_calls SET state = 'running', lease_until = now() + ${`${leaseMs} milliseconds`}::interval, updated_at = now(),
        status_message = 'Approved: the tool is running.'
      WHERE id = ${id} AND (state = 'pending' OR (state = 'running' AND lease_until < now()))
      RETURNING ${sql.literal(COLUMNS)}
    `)

  /** Records how the call ended, unless it already has (or was cancelled). */
  const finish = (id: string, state: "completed" | "failed", result: CallToolResult, message: string) =>
    CallRows.one(sql`
      UPDATE mcp_calls SET state = ${state}, result = ${JSON.stringify(result)}::jsonb, status_message = ${message},
        lease_until = NULL, updated_at = now()
      WHERE id = ${id} AND state IN ('pending', 'running')
      RETURNING ${sql.literal(COLUMNS)}
    `)

  /**
   * `finish` as a gate (`agents/OutcomeStatement.ts`): the statement that records how the call ended,
   * answering a row only when it had not ended yet, for the step's outcome to be recorded in the same statement.
   */
  const finishGate = (id: string, state: "completed" | "failed", result: CallToolResult, message: string) =>
    sql`
      UPDATE mcp_calls SET state = ${state}, result = ${JSON.stringify(result)}::jsonb, status_message = ${message},
        lease_until = NULL, updated_at = now()
      WHERE id = ${id} AND state IN ('pending', 'running')
      RETURNING id
    `

  const cancel = (orgId: string, id: string) =>
    CallRows.one(sql`
      UPDATE mcp_calls SET state = 'cancelled', status_message = 'Cancelled by the client.', lease_until = NULL, updated_at = now()
      WHERE id = ${id} AND org_id = ${orgId} AND state = 'pending'
      RETURNING ${sql.literal(COLUMNS)}
    `)

  /** A page of a session's calls that waited for a person, oldest first, after the call `cursor`. */
  const listPending = (orgId: string, sessionId: string, cursor: string | undefined, limit: number) =>
    CallRows.all(sql`
      SELECT ${sql.literal(COLUMNS)} FROM mcp_calls
      WHERE org_id = ${orgId} AND session_id = ${sessionId} AND approval_id IS NOT NULL
        ${
      cursor === undefined
        ? sql``
        : sql`AND (created_at, id) > (SELECT created_at, id FROM mcp_calls WHERE id = ${cursor})`
    }
      ORDER BY created_at, id LIMIT ${limit}
    `)

  return { open, find, claim, finish, finishGate, cancel, listPending }
}

export type CallRowsApi = ReturnType<typeof makeCallRows>

/** The call of a session's step, if it has one (a call refused before any decision has none). */
export const findByStep = (sql: SqlClient.SqlClient, sessionId: string, stepId: string) =>
  CallRows.one(sql`
    SELECT ${sql.literal(COLUMNS)} FROM mcp_calls WHERE session_id = ${sessionId} AND step_id = ${stepId}
  `)
