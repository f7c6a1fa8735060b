/**
 * A tool's outcome recorded in one statement, behind a gate the caller
 * writes: the gate is a data-modifying CTE of the caller's own table (the
 * MCP gateway's finish of its call, `mcp/CallRows.ts`) and the outcome is
 * recorded only when the gate answers a row. What the outcome writes (the
 * step's outcome, the session's next event number, its `tool:succeeded`
 * or `tool:failed` event and, on a server, the `pg_notify` that wakes the
 * session's streams in other processes) are CTEs after it: one round trip, one commit,
 * no transaction held open between statements. The rules are those of
 * `AgentSessions.reportOutcome`: only an allowed step without an outcome,
 * with the arguments digest it was approved with; the event's data is the
 * same JSON (`reported_at` the outcome's instant, the database's clock
 * truncated to the millisecond).
 *
 * Speeds up: an allowed `tools/call` through the MCP gateway, which
 * finished its call and then reported the step's outcome in 7 statements
 * (a session read, then BEGIN, the step, the event number, the event,
 * COMMIT, and on a server the streams' NOTIFY): 12 statements per allowed
 * call became 5 on PGlite and 6 on a server (14 and 16 before the kept
 * upstream sessions), and PostgreSQL's CPU per call through svc fell from
 * 4.0-4.9 ms to 2.4-2.8 ms with them, at load 10-25 (`bench/notes/mcp.md`).
 */
import { Schema } from "effect"
import type { SqlClient, Statement } from "effect/sql"
import type { ToolOutcome } from "../api/Agents.ts"
import { rowsOf } from "../platform/Rows.ts"

const J = JSON.stringify

const GatedOutcomeRows = rowsOf(
  "agent_steps",
  Schema.Struct({ gated: Schema.Boolean, recorded: Schema.Boolean })
)

export interface GatedOutcome {
  readonly orgId: string
  readonly sessionId: string
  readonly stepId: string
  readonly outcome: ToolOutcome
  /** A data-modifying statement that answers a row (`RETURNING`) when the outcome is to be recorded. */
  readonly gate: Statement.Fragment
  /** The `pg_notify` of the session's signal, when notifications reach other processes (`Wakeups.inStatement`). */
  readonly notify?: { readonly channel: string; readonly payload: string } | undefined
}

/** What an outcome's step and event store beside its status: the members the outcome has. */
export const outcomeBody = (outcome: ToolOutcome) => ({
  ...(outcome.result === undefined ? {} : { result: outcome.result }),
  ...(outcome.error === undefined ? {} : { error: outcome.error }),
  ...(outcome.arguments_digest === undefined ? {} : { arguments_digest: outcome.arguments_digest })
})

/** The statement (see the top of this file), answering whether the gate passed and the outcome was recorded. */
const gatedOutcomeSql = (sql: SqlClient.SqlClient, input: GatedOutcome) => {
  const { outcome, orgId, sessionId, stepId } = input
  const body = outcomeBody(outcome)
  // The event's JSON as `AgentSessions.reportOutcome` writes it: {step_id, tool, status, ...body, reported_at}.
  const head = `{"step_id":${J(stepId)},"tool":`
  const middle = `,"status":${J(outcome.status)}${J(body).slice(1, -1) === "" ? "" : `,${J(body).slice(1, -1)}`}` +
    `,"reported_at":`
  const name = outcome.status === "succeeded" ? "tool:succeeded" : "tool:failed"
  const notify = input.notify === undefined
    ? { cte: sql``, column: sql`` }
    : {
      cte: sql`, note AS (SELECT pg_notify(${input.notify.channel}, ${input.notify.payload}) FROM step)`,
      column: sql`, (SELECT count(*) FROM note) AS notified`
    }
  return sql`
    WITH gate AS (${input.gate}),
    t AS MATERIALIZED (SELECT date_trunc('milliseconds', now()) AS t0),
    step AS (
      UPDATE agent_steps SET outcome = ${outcome.status}, outcome_body = ${J(body)}::jsonb, outcome_at = t.t0
      FROM t
      WHERE session_id = ${sessionId} AND step_id = ${stepId} AND org_id = ${orgId} AND resolution = 'allow'
        AND outcome IS NULL AND arguments_digest IS NOT DISTINCT FROM ${outcome.arguments_digest ?? null}
        AND EXISTS (SELECT 1 FROM gate)
      RETURNING agent_steps.tool, agent_steps.outcome_at
    ),
    bump AS (
      UPDATE agent_sessions SET event_seq = event_seq + 1
      WHERE id = ${sessionId} AND EXISTS (SELECT 1 FROM step) RETURNING event_seq
    ),
    event AS (
      INSERT INTO session_events (session_id, seq, org_id, name, data)
      SELECT ${sessionId}, bump.event_seq, ${orgId}, ${name},
        ${head} || to_json(step.tool)::text || ${middle} ||
        to_json(to_char(step.outcome_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'))::text || '}'
      FROM bump, step
    )${notify.cte}
    SELECT EXISTS (SELECT 1 FROM gate) AS gated, EXISTS (SELECT 1 FROM step) AS recorded${notify.column}
  `
}

/** Runs `gatedOutcomeSql`. */
export const gatedOutcome = (sql: SqlClient.SqlClient, input: GatedOutcome) =>
  GatedOutcomeRows.returned(gatedOutcomeSql(sql, input))
