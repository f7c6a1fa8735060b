/**
 * The approval lifecycle events as receivers get them; their body is built
 * and written to the outbox by `outbox/Outbox.ts`.
 */
import { Schema } from "effect"
import { type ApprovalEventType, type ApprovalSnapshot, ApprovalStatus } from "../api/Approvals.ts"
import type { ApprovalEvent } from "../api/Events.ts"
import { TimeoutAction } from "../api/Policies.ts"
import { newId } from "../platform/Ids.ts"
import { Instant, InstantOrNull } from "../platform/Rows.ts"
import { iso } from "../platform/Time.ts"
import { EditColumns, editSnapshot } from "./Edits.ts"
import { deciderMembers, quorumMembers } from "./Votes.ts"

/** An `approvals` row as the snapshot needs it. */
export const ApprovalColumns = Schema.Struct({
  id: Schema.String,
  org_id: Schema.String,
  session_id: Schema.String,
  step_id: Schema.String,
  task_id: Schema.NullOr(Schema.String),
  status: ApprovalStatus,
  deadline_at: Instant,
  expires_at: Instant,
  timeout_action: TimeoutAction,
  decided_at: InstantOrNull,
  decided_by: Schema.NullOr(Schema.String),
  decision_reason: Schema.NullOr(Schema.String),
  rule: Schema.NullOr(Schema.String),
  quorum: Schema.Number,
  /** The votes as JSON text (`Votes.ts`), when the approval needs more than one approval. */
  votes: Schema.NullOr(Schema.String),
  /** The closing vote's person and whom it counted for, as JSON text (`Votes.ts`). */
  decider: Schema.NullOr(Schema.String),
  assigned_group: Schema.NullOr(Schema.String),
  escalation_level: Schema.Number,
  ...EditColumns.fields
})
export type ApprovalRow = typeof ApprovalColumns.Type

/** The snapshot's assignment members: none when no reviewer group reviews the approval. */
const assignmentMembers = (row: Pick<ApprovalRow, "assigned_group" | "escalation_level">) =>
  row.assigned_group === null ? {} : { assigned_group: row.assigned_group, escalation_level: row.escalation_level }

/**
 * The approval snapshot in its fixed key order; `decided_at`/`decided_by`
 * only for a person's decision, `decision_reason` only when they gave one,
 * `rule` only when a policy's rule on arguments required the approval,
 * `quorum`, `votes` and `approvals_remaining` only when it needs more than
 * one approval (`Votes.ts`), `assigned_group` and `escalation_level` only
 * when a reviewer group reviews it; then an edit's or an answer's members (`Edits.ts`).
 */
export const snapshotOf = (row: ApprovalRow): ApprovalSnapshot => {
  const snapshot: {
    -readonly [K in keyof ApprovalSnapshot]: ApprovalSnapshot[K]
  } = {
    approval_id: row.id,
    session_id: row.session_id,
    step_id: row.step_id,
    task_id: row.task_id,
    status: row.status,
    deadline_at: iso(row.deadline_at),
    expires_at: iso(row.expires_at),
    timeout_action: row.timeout_action
  }
  if (row.rule !== null) snapshot.rule = row.rule
  if (row.decided_at !== null && row.decided_by !== null) {
    snapshot.decided_at = iso(row.decided_at)
    snapshot.decided_by = row.decided_by
    Object.assign(snapshot, deciderMembers(row))
    if (row.decision_reason !== null) snapshot.decision_reason = row.decision_reason
  }
  return Object.assign(snapshot, quorumMembers(row), assignmentMembers(row), editSnapshot(row))
}

/** A new lifecycle event (its `id` is the receivers' deduplication key). */
export const makeApprovalEvent = (
  type: ApprovalEventType,
  orgId: string,
  approval: ApprovalSnapshot,
  occurredAt: Date
): ApprovalEvent => ({
  id: newId(),
  type,
  org_id: orgId,
  occurred_at: iso(occurredAt),
  approval
})
