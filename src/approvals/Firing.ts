/**
 * An approval's rows with their deadline state, and the firing of a due
 * deadline: the expiring notice and the escalation move the review window;
 * the final deadline expires the approval and applies its timeout action
 * to the step. Each writes its lifecycle event to the outbox in the
 * transaction that claimed the row.
 */
import { Effect, Option, Schema } from "effect"
import type { SqlClient, SqlError } from "effect/sql"
import type { ApprovalEventType } from "../api/Approvals.ts"
import { escalationCount } from "../api/Assignment.ts"
import { writeApprovalEvent } from "../outbox/Outbox.ts"
import { InstantOrNull, rowsOf } from "../platform/Rows.ts"
import { databaseNow } from "../platform/Time.ts"
import { type DeadlineState, type DueKind, escalationPending, fire, nextDue } from "./Deadlines.ts"
import { ApprovalColumns, type ApprovalRow, makeApprovalEvent, snapshotOf } from "./Events.ts"
import { appendApprovalStream, type StreamEntry } from "./OrgStream.ts"
import type { StepRecords } from "./StepRecords.ts"
import { votesColumns } from "./Votes.ts"

/** An `approvals` row with its deadline state. */
export const ApprovalRows = rowsOf(
  "approvals",
  Schema.Struct({
    ...ApprovalColumns.fields,
    expiring_at: InstantOrNull,
    escalation_seconds: Schema.NullOr(Schema.Number),
    expiring_sent: Schema.Boolean,
    escalated: Schema.Boolean,
    next_due_kind: Schema.NullOr(Schema.Literals(["expiring", "escalate", "expire"])),
    escalation_chain: Schema.NullOr(Schema.Array(Schema.String))
  })
)
export type FullApprovalRow = NonNullable<Effect.Success<ReturnType<typeof ApprovalRows.one>>>

export const APPROVAL_COLUMNS =
  "id, org_id, session_id, step_id, task_id, status, deadline_at, expires_at, timeout_action, decided_at, decided_by, decision_reason, rule, approved_arguments, arguments_changed, arguments_digest, response, expiring_at, escalation_seconds, expiring_sent, escalated, next_due_kind, assigned_group, escalation_chain, escalation_level, " +
  votesColumns("approvals")

/**
 * `APPROVAL_COLUMNS` without what an edit or an answer settled (null): for
 * a statement that has just written them, whose caller holds them already
 * and need not read back, as JSON text, up to 256 KiB it sent.
 */
export const APPROVAL_COLUMNS_BUT_EDIT = APPROVAL_COLUMNS
  .replace(" approved_arguments,", " NULL::jsonb AS approved_arguments,")
  .replace(" response,", " NULL::jsonb AS response,")

/**
 * The row's deadline state. The escalations done are counted by
 * `escalation_level` along a chain (one per group handed to); without a
 * chain the one escalation keeps the level, and `escalated` (no escalation
 * remains) says whether it fired.
 */
export const stateOf = (row: FullApprovalRow): DeadlineState => {
  const escalations = escalationCount(row)
  return {
    deadlineAt: row.deadline_at.getTime(),
    expiresAt: row.expires_at.getTime(),
    expiringAt: row.expiring_at === null ? null : row.expiring_at.getTime(),
    escalationSeconds: row.escalation_seconds,
    expiringSent: row.expiring_sent,
    escalations,
    escalationsDone: row.escalated ? escalations : row.escalation_chain === null ? 0 : row.escalation_level
  }
}

export const isoMs = (ms: number) => new Date(ms).toISOString()

/** Writes the webhook event; `log` collects it for the organization's approval stream (appended last). */
export const emit = (
  sql: SqlClient.SqlClient,
  type: ApprovalEventType,
  row: ApprovalRow,
  at: number,
  log?: Array<StreamEntry>,
  splice?: (json: string) => string
) =>
  Effect.andThen(
    Effect.sync(() => log?.push({ type, approvalId: row.id })),
    writeApprovalEvent(sql, makeApprovalEvent(type, row.org_id, snapshotOf(row), new Date(at)), splice)
  )

/** Applies the due deadline of a claimed row (inside the claiming transaction; the service names its span). */
export const fireDeadline = Effect.fnUntraced(function*(
  sql: SqlClient.SqlClient,
  steps: StepRecords["Service"],
  row: FullApprovalRow,
  now: number,
  log: Array<StreamEntry>
) {
  yield* Effect.annotateCurrentSpan({ "svc.org_id": row.org_id, "svc.approval_id": row.id })
  const state = stateOf(row)
  const due = nextDue(state)
  yield* Effect.annotateCurrentSpan({ "svc.deadline": due.kind })
  if (due.kind === "expire") {
    const expired = yield* ApprovalRows.returned(sql`
      UPDATE approvals SET status = 'expired', next_due_at = NULL, next_due_kind = NULL
      WHERE id = ${row.id} RETURNING ${sql.literal(APPROVAL_COLUMNS)}
    `)
    yield* steps.settle({ sessionId: row.session_id, stepId: row.step_id }, row.timeout_action)
    yield* emit(sql, "approval.expired", expired, now, log)
    yield* steps.append({
      sessionId: row.session_id,
      orgId: row.org_id,
      name: "approval:expired",
      data: {
        approval_id: row.id,
        step_id: row.step_id,
        timeout_action: row.timeout_action,
        resolution: row.timeout_action,
        expired_at: isoMs(now)
      }
    })
    return { sessionId: row.session_id as string | null }
  }
  const after = fire(state, due.kind)
  const next = nextDue(after)
  // An escalation along a chain hands the approval to the chain's next
  // group: the n-th escalation to its n-th group, at level n.
  const nextGroup = due.kind === "escalate" && row.escalation_chain !== null
    ? row.escalation_chain[state.escalationsDone]
    : undefined
  const escalated = row.escalated || (due.kind === "escalate" && !escalationPending(after))
  const updated = yield* ApprovalRows.returned(sql`
    UPDATE approvals SET expiring_sent = ${after.expiringSent}, escalated = ${escalated},
      assigned_group = ${nextGroup ?? row.assigned_group},
      escalation_level = ${nextGroup === undefined ? row.escalation_level : state.escalationsDone + 1},
      deadline_at = ${isoMs(after.deadlineAt)}::timestamptz,
      next_due_at = ${isoMs(next.at)}::timestamptz, next_due_kind = ${next.kind}
    WHERE id = ${row.id} RETURNING ${sql.literal(APPROVAL_COLUMNS)}
  `)
  yield* emit(sql, due.kind === "expiring" ? "approval.expiring" : "approval.escalated", updated, now, log)
  return { sessionId: null }
})

/**
 * Claims the most overdue deadline of any organization (skipping rows
 * another process holds) and fires it with `fire` (`fireDeadline` in the
 * service's span), in one transaction; what fired, or none when nothing is due.
 */
export const fireMostOverdue = (
  sql: SqlClient.SqlClient,
  fire: (
    row: FullApprovalRow,
    now: number,
    log: Array<StreamEntry>
  ) => Effect.Effect<{ readonly sessionId: string | null }, SqlError.SqlError>
) =>
  sql.withTransaction(Effect.gen(function*() {
    const row = yield* ApprovalRows.one(sql`
      SELECT ${sql.literal(APPROVAL_COLUMNS)} FROM approvals
      WHERE next_due_at <= now() AND status = 'pending'
      ORDER BY next_due_at LIMIT 1
      FOR UPDATE SKIP LOCKED
    `)
    if (row === undefined) {
      return Option.none<{ sessionId: string | null; orgId: string; kind: DueKind; dueAt: number; now: number }>()
    }
    const due = nextDue(stateOf(row))
    const now = yield* databaseNow(sql)
    const log: Array<StreamEntry> = []
    const fired = yield* fire(row, now, log)
    yield* appendApprovalStream(sql, row.org_id, log)
    return Option.some({ ...fired, orgId: row.org_id, kind: due.kind, dueAt: due.at, now })
  })).pipe(Effect.orDie)
