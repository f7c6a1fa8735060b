/**
 * The statement pieces of an approval a governed step opens, for the step's
 * one statement (`agents/StepStatement.ts`): whether the policy the step was
 * ruled by is still the stored one, and, for a pending step, the approval's
 * row, its `approval.requested` outbox event (`outbox/Outbox.ts` builds the
 * body) and the organization's stream item, as data-modifying CTEs. They
 * read the statement's CTEs `sess` (the locked session: `id`, `task_id`),
 * `step` (the inserted step) and `t` (`t0`, the step's instant).
 *
 * Every instant is the database's: `t0` truncated to the millisecond, as
 * `Date` would carry it, and the deadlines are offsets from it
 * (`Deadlines.plan`); the bodies are assembled around them.
 */
import type { SqlClient } from "effect/sql"
import type { GovernedStep } from "../api/Agents.ts"
import { requestedEventInsert } from "../outbox/Outbox.ts"
import { type DueKind, nextDue, plan, type PolicyRule } from "./Deadlines.ts"
import { streamId } from "./OrgStream.ts"
import type { StepRuling } from "./StepRulings.ts"

const J = JSON.stringify

/**
 * The JSON of a new approval's stream item, cut where the statement inserts
 * the instants and the task id: `listItemOf` in its key order. Before
 * `task_id`, before `deadline_at`, before `expires_at`, before
 * `requested_at`, the rest.
 */
const requestedPieces = (input: {
  readonly approvalId: string
  readonly sessionId: string
  readonly step: GovernedStep
  readonly rule: PolicyRule
  /** The rule on arguments that required the approval, if one did. */
  readonly ruleName?: string | undefined
}): readonly [string, string, string, string, string] => {
  const snapshotHead = `{"approval_id":${J(input.approvalId)},"session_id":${J(input.sessionId)},"step_id":${
    J(input.step.step_id)
  },"task_id":`
  const quorum = input.rule.quorum ?? 1
  const timeoutAction = `","timeout_action":${J(input.rule.timeout_action)}${
    input.ruleName === undefined ? "" : `,"rule":${J(input.ruleName)}`
  }${quorum > 1 ? `,"quorum":${quorum},"votes":[],"approvals_remaining":${quorum}` : ""}${
    input.rule.group === undefined ? "" : `,"assigned_group":${J(input.rule.group)},"escalation_level":0`
  }`
  return [
    snapshotHead,
    `,"status":"pending","deadline_at":"`,
    `","expires_at":"`,
    `${timeoutAction},"tool":${J(input.step.tool)},"action_class":${J(input.step.action_class)},"arguments":${
      J(input.step.arguments)
    },"escalation":${J(input.rule.escalation_seconds === null ? "none" : "pending")}${
      input.rule.escalation_chain === undefined || input.rule.escalation_chain.length === 0
        ? ""
        : `,"escalation_chain":${J(input.rule.escalation_chain)}`
    },"requested_at":"`,
    `"}`
  ]
}

/** The deadlines of a new approval as offsets (ms) from the instant it is requested. */
export const deadlineOffsets = (rule: PolicyRule): {
  readonly deadline: number
  readonly expires: number
  readonly expiring: number | null
  readonly due: number
  readonly dueKind: DueKind
} => {
  const state = plan(rule, 0)
  const due = nextDue(state)
  return {
    deadline: state.deadlineAt,
    expires: state.expiresAt,
    expiring: state.expiringAt,
    due: due.at,
    dueKind: due.kind
  }
}

/**
 * SQL: whether the stored policy is still the one the ruling was made from:
 * the row holds the `version` the cache read with it (a trigger moves it on
 * every update, whoever writes, and a policy stored again after a delete
 * takes a new one from a sequence, migration `0840_policy_versions`), or,
 * for the default rule, there is still no row.
 */
export const policyFresh = (sql: SqlClient.SqlClient, orgId: string, actionClass: string, ruling: StepRuling) =>
  ruling.policy.version !== null
    ? sql`EXISTS (SELECT 1 FROM approval_policies WHERE org_id = ${orgId} AND action_class = ${actionClass}
        AND version = ${ruling.policy.version}::bigint)`
    : sql`NOT EXISTS (SELECT 1 FROM approval_policies WHERE org_id = ${orgId} AND action_class = ${actionClass})`

/** Milliseconds after `t.t0`, as SQL. */
const at = (sql: SqlClient.SqlClient, ms: number) => sql`(t.t0 + ${ms}::float8 * interval '1 millisecond')`

/** The CTEs `approval`, `outbox` and `org_event` of a pending step (each preceded by a comma). */
export const requestedWrites = (sql: SqlClient.SqlClient, input: {
  readonly orgId: string
  readonly sessionId: string
  readonly step: GovernedStep
  readonly ruling: StepRuling
  /** The new approval's id and its outbox event's id. */
  readonly approval: { readonly id: string; readonly eventId: string }
}) => {
  const { approval, orgId, ruling, sessionId, step } = input
  const rule = ruling.settings
  const ruleName = ruling.rule ?? undefined
  const offsets = deadlineOffsets(rule)
  const [i0, i1, i2, i3, i4] = requestedPieces({ approvalId: approval.id, sessionId, step, rule, ruleName })
  const task = sql`coalesce(to_json(sess.task_id)::text, 'null')`
  return sql`,
    approval AS (
      INSERT INTO approvals (id, org_id, session_id, step_id, task_id, status, deadline_at, expires_at, timeout_action,
        expiring_at, escalation_seconds, next_due_at, next_due_kind, created_at, rule, quorum,
        assigned_group, escalation_chain)
      SELECT ${approval.id}, ${orgId}, sess.id, ${step.step_id}, sess.task_id, 'pending',
        ${at(sql, offsets.deadline)}, ${at(sql, offsets.expires)}, ${rule.timeout_action},
        ${
    offsets.expiring === null ? sql`NULL::timestamptz` : at(sql, offsets.expiring)
  }, ${rule.escalation_seconds}::int,
        ${at(sql, offsets.due)}, ${offsets.dueKind}, t.t0, ${ruling.rule}, ${rule.quorum ?? 1},
        ${rule.group ?? null}::text, ${rule.escalation_chain === undefined ? null : [...rule.escalation_chain]}::text[]
      FROM step, sess, t
      RETURNING id
    ),
    outbox AS (${
    requestedEventInsert(sql, {
      eventId: approval.eventId,
      orgId,
      approvalId: approval.id,
      sessionId,
      stepId: step.step_id,
      timeoutAction: rule.timeout_action,
      rule: ruleName,
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
        ${i0} || ${task} || ${i1} || svc_iso(${at(sql, offsets.deadline)}) || ${i2} || svc_iso(${
    at(sql, offsets.expires)
  })
          || ${i3} || svc_iso(t.t0) || ${i4}
      FROM approval, sess, t
    )`
}
