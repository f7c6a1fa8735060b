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
 * - The cached policy is checked against the stored one (`fresh`) by its
 *   version: the row must still hold the `version` the cache read with it
 *   (a trigger moves it on every update, whoever writes, and a policy
 *   stored again after a delete takes a new one from a sequence, migration
 *   `0840_policy_versions`), or, for the default rule, there must still be
 *   no row. When it differs nothing is written and the caller reloads the
 *   policy and runs the statement again. One number whatever the size of
 *   the policy's rules: comparing every setting sent the rules' JSON
 *   (1.7 KB with ten rules) with every step, for the database to parse and
 *   compare (bench/notes/rules.md, "The policy's version").
 * - Every instant is the database's: `now()` truncated to the millisecond,
 *   as `Date` would carry it, and the deadlines are offsets from it
 *   (`Deadlines.plan`). The outbox body is assembled around them by
 *   `outbox/Outbox.ts` (`requestedEventInsert`), as `approvalEventBody`
 *   builds every other body; the stream item from pieces built here.
 */
import { Schema } from "effect"
import type { SqlClient } from "effect/sql"
import type { GovernedStep, StepDecision } from "../api/Agents.ts"
import { type DueKind, nextDue, plan } from "../approvals/Deadlines.ts"
import { streamId } from "../approvals/OrgStream.ts"
import type { CachedRule } from "../approvals/PolicyCache.ts"
import { requestedEventInsert } from "../outbox/Outbox.ts"
import { JsonColumn, rowsOf } from "../platform/Rows.ts"

/** The pieces of a pending step's stream item around what only the statement knows: the session's task, the deadlines and its instant. */
export interface RequestedPieces {
  /** The organization stream's item: before `task_id`, before `deadline_at`, before `expires_at`, before `requested_at`, the rest. */
  readonly item: readonly [string, string, string, string, string]
}

const J = JSON.stringify

/**
 * The JSON of a new approval's stream item, cut where the statement inserts
 * the instants and the task id: `listItemOf` in its key order (the outbox
 * body is `outbox/Outbox.ts`'s `requestedEventInsert`).
 */
export const requestedPieces = (input: {
  readonly approvalId: string
  readonly sessionId: string
  readonly step: GovernedStep
  readonly rule: CachedRule["rule"]
  /** The rule on arguments that required the approval, if one did. */
  readonly ruleName?: string | undefined
}): RequestedPieces => {
  const snapshotHead = `{"approval_id":${J(input.approvalId)},"session_id":${J(input.sessionId)},"step_id":${J(input.step.step_id)},"task_id":`
  const snapshotStatus = `,"status":"pending","deadline_at":"`
  const snapshotExpires = `","expires_at":"`
  const quorum = input.rule.quorum ?? 1
  const timeoutAction = `","timeout_action":${J(input.rule.timeout_action)}${input.ruleName === undefined ? "" : `,"rule":${J(input.ruleName)}`}${
    quorum > 1 ? `,"quorum":${quorum},"votes":[],"approvals_remaining":${quorum}` : ""
  }${input.rule.group === undefined ? "" : `,"assigned_group":${J(input.rule.group)},"escalation_level":0`}`
  return {
    item: [
      snapshotHead,
      snapshotStatus,
      snapshotExpires,
      `${timeoutAction},"tool":${J(input.step.tool)},"action_class":${J(input.step.action_class)},"arguments":${J(input.step.arguments)},"escalation":${
        J(input.rule.escalation_seconds === null ? "none" : "pending")
      }${
        input.rule.escalation_chain === undefined || input.rule.escalation_chain.length === 0 ? "" : `,"escalation_chain":${J(input.rule.escalation_chain)}`
      },"requested_at":"`,
      `"}`
    ]
  }
}

/** The deadlines of a new approval as offsets (ms) from the instant it is requested. */
export const deadlineOffsets = (rule: CachedRule["rule"]): {
  readonly deadline: number
  readonly expires: number
  readonly expiring: number | null
  readonly due: number
  readonly dueKind: DueKind
} => {
  const state = plan(rule, 0)
  const due = nextDue(state)
  return { deadline: state.deadlineAt, expires: state.expiresAt, expiring: state.expiringAt, due: due.at, dueKind: due.kind }
}

export const StepResultRows = rowsOf("agent_steps", Schema.Struct({
  found: Schema.Boolean,
  fresh: Schema.Boolean,
  inserted: Schema.Boolean,
  tool: Schema.NullOr(Schema.String),
  action_class: Schema.NullOr(Schema.String),
  arguments: Schema.NullOr(JsonColumn(Schema.Json)),
  decision: Schema.NullOr(Schema.Literals(["allow", "reject", "pending"])),
  approval_id: Schema.NullOr(Schema.String),
  rule: Schema.NullOr(Schema.String),
  reason: Schema.NullOr(Schema.String)
}))

export interface StepStatementInput {
  readonly orgId: string
  readonly sessionId: string
  readonly step: GovernedStep
  readonly cached: CachedRule
  readonly decision: StepDecision
  /** The rule on arguments that decided (`Rules.ts`), with a rejecting rule's reason and the approval's deadline settings; absent when the class's settings decided. */
  readonly verdict?: { readonly rule: string; readonly reason: string | null; readonly settings: CachedRule["rule"] }
  /** For a pending step: the new approval's id and its outbox event's id. */
  readonly approval: { readonly id: string; readonly eventId: string } | null
  /** The `pg_notify` of the step's signals, when notifications reach other processes. */
  readonly notify: { readonly channel: string; readonly payload: string } | undefined
}

/** Milliseconds after `t.t0`, as SQL. */
const at = (sql: SqlClient.SqlClient, ms: number) => sql`(t.t0 + ${ms}::float8 * interval '1 millisecond')`

/** The one statement of a governed step (see the top of this file), its rows decoded. */
export const stepStatement = (sql: SqlClient.SqlClient, input: StepStatementInput) => StepResultRows.one(stepSql(sql, input))

/** The statement of `stepStatement`, not yet run (`bench/inprocess/step-statement.ts` runs it alone). */
export const stepSql = (sql: SqlClient.SqlClient, input: StepStatementInput) => {
  const { orgId, sessionId, step, cached, decision, verdict } = input
  // The approval's deadlines: the deciding rule's, else the class's.
  const rule = verdict?.settings ?? cached.rule
  const approvalId = input.approval?.id ?? null
  const sessionEvent = J({
    step_id: step.step_id,
    tool: step.tool,
    action_class: step.action_class,
    arguments: step.arguments,
    decision,
    ...(approvalId === null ? {} : { approval_id: approvalId }),
    ...(verdict === undefined ? {} : { rule: verdict.rule }),
    ...(verdict?.reason == null ? {} : { reason: verdict.reason })
  })
  // The stored policy is the version the cached rule was read from (or, for the default rule, there is none).
  const fresh = cached.version !== null
    ? sql`EXISTS (SELECT 1 FROM approval_policies WHERE org_id = ${orgId} AND action_class = ${step.action_class}
        AND version = ${cached.version}::bigint)`
    : sql`NOT EXISTS (SELECT 1 FROM approval_policies WHERE org_id = ${orgId} AND action_class = ${step.action_class})`

  const pending = (() => {
    if (input.approval === null) return sql``
    const offsets = deadlineOffsets(rule)
    const pieces = requestedPieces({
      approvalId: input.approval.id,
      sessionId,
      step,
      rule,
      ruleName: verdict?.rule
    })
    const task = sql`coalesce(to_json(sess.task_id)::text, 'null')`
    const [i0, i1, i2, i3, i4] = pieces.item
    return sql`,
    approval AS (
      INSERT INTO approvals (id, org_id, session_id, step_id, task_id, status, deadline_at, expires_at, timeout_action,
        expiring_at, escalation_seconds, next_due_at, next_due_kind, created_at, rule, quorum,
        assigned_group, escalation_chain)
      SELECT ${input.approval.id}, ${orgId}, sess.id, ${step.step_id}, sess.task_id, 'pending',
        ${at(sql, offsets.deadline)}, ${at(sql, offsets.expires)}, ${rule.timeout_action},
        ${offsets.expiring === null ? sql`NULL::timestamptz` : at(sql, offsets.expiring)}, ${rule.escalation_seconds}::int,
        ${at(sql, offsets.due)}, ${offsets.dueKind}, t.t0, ${verdict?.rule ?? null}, ${rule.quorum ?? 1},
        ${rule.group ?? null}::text, ${rule.escalation_chain === undefined ? null : [...rule.escalation_chain]}::text[]
      FROM step, sess, t
      RETURNING id
    ),
    outbox AS (${
      requestedEventInsert(sql, {
        eventId: input.approval.eventId,
        orgId,
        approvalId: input.approval.id,
        sessionId,
        stepId: step.step_id,
        timeoutAction: rule.timeout_action,
        rule: verdict?.rule,
        quorum: rule.quorum ?? 1,
        group: rule.group,
        at: sql`t.t0`,
        occurredAt: sql`svc_iso(t.t0)`,
        taskId: task,
        deadlineAt: sql`svc_iso(${at(sql, offsets.deadline)})`,
        expiresAt: sql`svc_iso(${at(sql, offsets.expires)})`,
        from: sql`approval, sess, t`
      })
    }),
    org_event AS (
      INSERT INTO approval_stream_events (org_id, seq, name, data)
      SELECT ${orgId}, ${sql.literal(streamId(0))}, 'approval.requested',
        ${i0} || ${task} || ${i1} || svc_iso(${at(sql, offsets.deadline)}) || ${i2} || svc_iso(${at(sql, offsets.expires)})
          || ${i3} || svc_iso(t.t0) || ${i4}
      FROM approval, sess, t
    )`
  })()

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
    verdict === undefined ? sql`` : sql`, rule, reason`
  })
      SELECT sess.id, ${step.step_id}, ${orgId}, ${step.tool}, ${step.action_class}, ${J(step.arguments)}::jsonb,
        ${decision}, ${approvalId}::uuid, ${decision}, t.t0${verdict === undefined ? sql`` : sql`, ${verdict.rule}, ${verdict.reason}`}
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
    )${pending}${notify.cte}
    SELECT EXISTS (SELECT 1 FROM sess) AS found, (SELECT fresh FROM policy) AS fresh, EXISTS (SELECT 1 FROM step) AS inserted,
      prior.tool, prior.action_class, prior.arguments, prior.decision, prior.approval_id::text AS approval_id,
      prior.rule, prior.reason${notify.column}
    FROM (SELECT 1) AS one LEFT JOIN prior ON true
  `
}
