/**
 * A governed step in one statement. What the step writes (the step, the
 * session's `step:governed` event and, when a person must decide, the
 * approval, its `approval.requested` outbox event and the organization's
 * stream event) is one statement of data-modifying CTEs with one
 * `pg_notify`: one round trip, one commit, and no transaction left open on
 * a pool connection (or on the embedded database's only session) while svc
 * prepares the next statement.
 *
 * Speeds up: (bench/notes/steps.md) a step made 12
 * round trips when allowed and 20 when pending; each cost svc 75-120 µs of
 * CPU and PostgreSQL 60-110 µs. In one statement, with the policy from the
 * process's cache (`PolicyCache.ts`), an allowed step on a PostgreSQL server
 * costs svc about the CPU of the cheapest authenticated write, and a pending
 * one well under 1 000 µs.
 *
 * The rules the statement keeps:
 * - The session row is locked first (`FOR UPDATE`): steps of one session are
 *   written one at a time, so the session's events are numbered in commit
 *   order, and a concurrent send of the same `step_id` has committed by the
 *   time the insert runs.
 * - A `step_id` already recorded (in the statement's snapshot) is answered
 *   from its row. One committed by a concurrent send after the snapshot
 *   makes the insert do nothing (`ON CONFLICT DO NOTHING`); the caller then
 *   reads that row in a statement of its own (`raced`).
 * - The policy the step was ruled by (`approvals/StepRulings.ts`) is checked
 *   against the stored one (`fresh`, `approvals/Requested.ts`) by its
 *   version. When it differs nothing is written and the caller reloads the
 *   policy and runs the statement again. One number whatever the size of
 *   the policy's rules: comparing every setting sent the rules' JSON
 *   (1.7 KB with ten rules) with every step, for the database to parse and
 *   compare (bench/notes/rules.md, "The policy's version").
 * - Every instant is the database's: `now()` truncated to the millisecond
 *   (`t0`). The approval, its outbox event and the organization's stream
 *   item are the pieces of their owners (`approvals/Requested.ts`, which
 *   has the outbox body built by `outbox/Outbox.ts`), written around it.
 * - A caller's own row written with the step (`companion`: the MCP
 *   gateway's call, `mcp/CallRows.ts`) is its owner's piece too: it reads
 *   the `step` CTE, so it is written only with a new step, in the same
 *   commit (a restart finds both or neither).
 */
import { Schema } from "effect"
import type { SqlClient, Statement } from "effect/sql"
import type { GovernedStep } from "../api/Agents.ts"
import { policyFresh, requestedWrites } from "../approvals/Requested.ts"
import type { StepRuling } from "../approvals/StepRulings.ts"
import { JsonColumn, rowsOf } from "../platform/Rows.ts"

const J = JSON.stringify

const StepResultRows = rowsOf(
  "agent_steps",
  Schema.Struct({
    found: Schema.Boolean,
    fresh: Schema.Boolean,
    inserted: Schema.Boolean,
    tool: Schema.NullOr(Schema.String),
    action_class: Schema.NullOr(Schema.String),
    arguments: Schema.NullOr(JsonColumn(Schema.Json)),
    decision: Schema.NullOr(Schema.Literals(["allow", "reject", "pending"])),
    approval_id: Schema.NullOr(Schema.String),
    rule: Schema.NullOr(Schema.String),
    reason: Schema.NullOr(Schema.String),
    companion: Schema.optionalKey(Schema.Unknown)
  })
)

export interface StepStatementInput {
  readonly orgId: string
  readonly sessionId: string
  readonly step: GovernedStep
  /** The policy's answer (`approvals/StepRulings.ts`). */
  readonly ruling: StepRuling
  /** For a pending step: the new approval's id and its outbox event's id. */
  readonly approval: { readonly id: string; readonly eventId: string } | null
  /** The `pg_notify` of the step's signals, when notifications reach other processes. */
  readonly notify: { readonly channel: string; readonly payload: string } | undefined
  /**
   * Another owner's data-modifying statement written with a new step: it selects `FROM step` and
   * answers one column `companion` (`RETURNING ... AS companion`), answered here as `companion`.
   */
  readonly companion?: Statement.Fragment | undefined
}

/** The one statement of a governed step (see the top of this file), its rows decoded. */
export const stepStatement = (sql: SqlClient.SqlClient, input: StepStatementInput) =>
  StepResultRows.one(stepSql(sql, input))

/** The statement of `stepStatement`, not yet run (`bench/inprocess/step-statement.ts` runs it alone). */
export const stepSql = (sql: SqlClient.SqlClient, input: StepStatementInput) => {
  const { orgId, ruling, sessionId, step } = input
  const { decision } = ruling
  const approvalId = input.approval?.id ?? null
  const sessionEvent = J({
    step_id: step.step_id,
    tool: step.tool,
    action_class: step.action_class,
    arguments: step.arguments,
    decision,
    ...(approvalId === null ? {} : { approval_id: approvalId }),
    ...(ruling.rule === null ? {} : { rule: ruling.rule }),
    ...(ruling.reason === null ? {} : { reason: ruling.reason })
  })
  const fresh = policyFresh(sql, orgId, step.action_class, ruling)
  const pending = input.approval === null
    ? sql``
    : requestedWrites(sql, { orgId, sessionId, step, ruling, approval: input.approval })

  const notify = input.notify === undefined
    ? { cte: sql``, column: sql`` }
    : {
      cte: sql`, note AS (SELECT pg_notify(${input.notify.channel}, ${input.notify.payload}) FROM step)`,
      column: sql`, (SELECT count(*) FROM note) AS notified`
    }

  return sql`
    WITH sess AS (
      SELECT id, task_id FROM agent_sessions WHERE id = ${sessionId} AND org_id = ${orgId} FOR UPDATE
    ),
    prior AS MATERIALIZED (
      SELECT tool, action_class, arguments, decision, approval_id, rule, reason FROM agent_steps
      WHERE session_id = ${sessionId} AND step_id = ${step.step_id}
    ),
    policy AS MATERIALIZED (SELECT ${fresh} AS fresh),
    t AS MATERIALIZED (SELECT date_trunc('milliseconds', now()) AS t0),
    step AS (
      INSERT INTO agent_steps (session_id, step_id, org_id, tool, action_class, arguments, decision, approval_id, resolution, created_at${
    ruling.rule === null ? sql`` : sql`, rule, reason`
  })
      SELECT sess.id, ${step.step_id}, ${orgId}, ${step.tool}, ${step.action_class}, ${J(step.arguments)}::jsonb,
        ${decision}, ${approvalId}::uuid, ${decision}, t.t0${
    ruling.rule === null ? sql`` : sql`, ${ruling.rule}, ${ruling.reason}`
  }
      FROM sess, t, policy
      WHERE policy.fresh AND NOT EXISTS (SELECT 1 FROM prior)
      ON CONFLICT (session_id, step_id) DO NOTHING
      RETURNING session_id
    ),
    bump AS (
      UPDATE agent_sessions s SET event_seq = s.event_seq + 1 FROM step WHERE s.id = step.session_id RETURNING s.event_seq
    ),
    session_event AS (
      INSERT INTO session_events (session_id, seq, org_id, name, data)
      SELECT ${sessionId}, bump.event_seq, ${orgId}, 'step:governed', ${sessionEvent} FROM bump
    )${pending}${notify.cte}${input.companion === undefined ? sql`` : sql`, companion AS (${input.companion})`}
    SELECT EXISTS (SELECT 1 FROM sess) AS found, (SELECT fresh FROM policy) AS fresh, EXISTS (SELECT 1 FROM step) AS inserted,
      prior.tool, prior.action_class, prior.arguments, prior.decision, prior.approval_id::text AS approval_id,
      prior.rule, prior.reason${notify.column}${
    input.companion === undefined ? sql`` : sql`, (SELECT companion FROM companion) AS companion`
  }
    FROM (SELECT 1) AS one LEFT JOIN prior ON true
  `
}
