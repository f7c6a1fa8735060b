/**
 * An MCP call's row (`mcp_calls`, `CallRows.ts`) written in its governed
 * step's statement (`agents/StepStatement.ts`, `companion`): the call of an
 * allowed (`running`, under its runner's lease) or pending step is inserted
 * from the statement's `step` CTE, so only with a new step and in its
 * commit (a restart finds both or neither); a refused step has none. A step
 * sent again writes no row here: the caller opens it with `CallRows.open`,
 * which answers the row a first send wrote.
 *
 * Speeds up: an allowed `tools/call` through the gateway, which wrote its
 * call's row in a statement of its own after the step's: 4 statements per
 * allowed call became 3 (4.14-4.18 per call measured before, 3.13-3.20
 * after, svc's background statements shared over the calls), one write to
 * the database's socket and one answer's handling fewer (`bench/notes/mcp.md`).
 */
import { Schema } from "effect"
import type { SqlClient } from "effect/sql"
import { newId } from "../platform/Ids.ts"
import { Timestamp } from "../platform/Rows.ts"
import type { CallRow, NewCall } from "./CallRows.ts"

const decodeTimestamp = Schema.decodeUnknownSync(Timestamp)

const stateOf = (decision: string) => decision === "allow" ? "running" : decision === "pending" ? "pending" : null

/**
 * The call's piece for the step's decision (`piece`, none for a refused step), its row from what the
 * piece answered (`row`: `undefined` when it wrote none), and the call (`call`, for `CallRows.open`). `leaseMs`: a running call's lease, as `CallRows.claim`'s.
 */
export const callWithStep = (sql: SqlClient.SqlClient, leaseMs: number, of: Omit<NewCall, "approvalId">) => {
  const id = newId()
  const call = {
    orgId: of.orgId,
    sessionId: of.sessionId,
    stepId: of.stepId,
    serverId: of.serverId,
    tool: of.tool,
    arguments: of.arguments
  }
  const piece = (decision: string, approvalId: string | null) => {
    const state = stateOf(decision)
    return state === null ? undefined : sql`
      INSERT INTO mcp_calls (id, org_id, session_id, step_id, server_id, tool, arguments, approval_id, state, lease_until)
      SELECT ${id}, ${call.orgId}, ${call.sessionId}, ${call.stepId}, ${call.serverId}, ${call.tool},
        ${JSON.stringify(call.arguments)}::jsonb, ${approvalId}::uuid, ${state},
        ${state === "running" ? sql`now() + ${`${leaseMs} milliseconds`}::interval` : null}
      FROM step
      ON CONFLICT (session_id, step_id) DO NOTHING
      RETURNING created_at AS companion
    `
  }
  const row = (createdAt: unknown, decision: string, approvalId: string | null): CallRow | undefined => {
    const state = stateOf(decision)
    if (createdAt === undefined || createdAt === null || state === null) return undefined
    const at = decodeTimestamp(createdAt)
    return {
      id,
      org_id: call.orgId,
      session_id: call.sessionId,
      step_id: call.stepId,
      server_id: call.serverId,
      tool: call.tool,
      arguments: call.arguments as CallRow["arguments"],
      approval_id: approvalId,
      state,
      status_message: null,
      result: null,
      created_at: at,
      updated_at: at
    }
  }
  return { call, piece, row }
}
