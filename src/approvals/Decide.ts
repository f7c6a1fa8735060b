/**
 * A person's decision on an approval: lock → transition → apply. The
 * approval's row is locked and read with what the transition needs (the
 * decider's standing, their precondition, the database's time); the pure
 * transition (`Transition.ts`) answers the outcome; `apply` writes it
 * (every outcome matched) and answers what follows the commit: the
 * snapshot, or the outcome's refusal, and the wake-ups.
 */
import { Effect } from "effect"
import type { SqlClient, SqlError } from "effect/sql"
import { ArgumentsShapeMismatch } from "../api/ApprovalEdits.ts"
import type { ApprovalSnapshot } from "../api/Approvals.ts"
import { NotAssigned } from "../api/Assignment.ts"
import { InvalidTransition, NotFound, Unauthenticated } from "../api/Errors.ts"
import { AlreadyVoted, PersonRequired } from "../api/Votes.ts"
import { type Topic, Topics } from "../database/Wakeups.ts"
import { databaseNow, iso } from "../platform/Time.ts"
import { standing } from "./Deciders.ts"
import { type DecisionEdit, editSnapshot, markedEdit, type Settled, settledValues } from "./Edits.ts"
import { snapshotOf } from "./Events.ts"
import {
  APPROVAL_COLUMNS,
  APPROVAL_COLUMNS_BUT_EDIT,
  ApprovalRows,
  emit,
  type FullApprovalRow,
  isoMs,
  stateOf
} from "./Firing.ts"
import { appendApprovalStream, type StreamEntry } from "./OrgStream.ts"
import type { StepRecords } from "./StepRecords.ts"
import { type Current, type Decision, Outcome } from "./Transition.ts"
import { announceVote, quorumMembers, recordVote, standsFor, votesOf } from "./Votes.ts"

/** A decider's precondition (`Approvals.decide`): `holds` runs in the decision's transaction; `refused` is the failure when it does not hold. */
export interface DecisionGuard<E> {
  readonly holds: Effect.Effect<boolean>
  readonly refused: E
}

/** A decision as a decider sends it. */
export interface DecisionInput<E> {
  readonly decision: "approve" | "reject"
  /** Why, in the decider's words (already checked for length); recognizable secrets are removed before it is stored. */
  readonly reason?: string | undefined
  /**
   * What must still hold for this decider, checked in the decision's
   * transaction once the approval's row is locked (so a concurrent change
   * to what it reads commits before or after the decision, never between):
   * false decides nothing and fails with `refused`.
   */
  readonly guard?: DecisionGuard<E> | undefined
  /** Edited arguments (with approve) or a response for the agent (with reject): `Edits.ts`. */
  readonly edit?: DecisionEdit | undefined
}

/** What a decision fails with, beside its guard's refusal. */
export type DecisionRefused =
  | NotFound
  | InvalidTransition
  | AlreadyVoted
  | NotAssigned
  | PersonRequired
  | Unauthenticated
  | ArgumentsShapeMismatch

/** What the decision's transaction hands on to the commit: whom to wake, then the answer (the snapshot, or the refusal). */
export interface AfterCommit<E> {
  readonly wake?: { readonly sessionId: string | null; readonly topics: ReadonlyArray<Topic> }
  readonly answer: Effect.Effect<ApprovalSnapshot, DecisionRefused | E>
}

const EDIT_WITH_QUORUM =
  "cannot be edited when the approval needs several approvals: every approver approves the same arguments"

/** The refusal of each outcome that decides nothing. */
const refusal = {
  missing: () => new NotFound({ detail: "No such approval." }),
  closed: (status: string) =>
    new InvalidTransition({
      status_now: status as "approved",
      detail: `The approval is ${status}; only a pending approval can be decided.`
    }),
  revoked: () => new Unauthenticated({ detail: "The API key is unknown or revoked." }),
  notAssigned: (group: string) =>
    new NotAssigned({
      assigned_group: group,
      detail: `The approval is assigned to the reviewer group ${
        JSON.stringify(group)
      }: only its members and their active delegates decide it.`
    }),
  editWithQuorum: () =>
    new ArgumentsShapeMismatch({
      field: "arguments",
      errors: [{ field: "arguments", message: EDIT_WITH_QUORUM }],
      detail: `arguments ${EDIT_WITH_QUORUM}.`
    }),
  unattributed: () =>
    new PersonRequired({
      detail:
        "This approval needs several distinct people to approve it, and a decision through the organization's shared reviewer address names no person: decide in the console, or through a mail to your own address."
    }),
  duplicate: (actor: string) =>
    new AlreadyVoted({
      decided_by: actor,
      detail:
        "This person has already voted on this approval (with this or another of their credentials), or the member they stand in for has (themselves or through another delegate); a person votes once."
    }),
  lapsed: () =>
    new InvalidTransition({
      status_now: "expired",
      detail: "The approval expired before this decision: its final deadline had passed. Its timeout action applies."
    })
}

export const makeDecide = (sql: SqlClient.SqlClient, steps: StepRecords["Service"], deps: {
  /** Fires the due deadline of a locked row (`Firing.ts`, in the service's span). */
  readonly fireDeadline: (
    row: FullApprovalRow,
    now: number,
    log: Array<StreamEntry>
  ) => Effect.Effect<{ readonly sessionId: string | null }, SqlError.SqlError>
}) => {
  const select = (orgId: string, approvalId: string, lock: boolean) =>
    ApprovalRows.one(sql`
      SELECT ${sql.literal(APPROVAL_COLUMNS)} FROM approvals WHERE id = ${approvalId} AND org_id = ${orgId}${
      sql.literal(lock ? " FOR UPDATE" : "")
    }
    `)

  /**
   * What the transition reads: the approval (locked, in the decision's
   * transaction), and for a pending one the decider's precondition, their
   * standing and the database's time.
   */
  const read = Effect.fnUntraced(
    function*<E>(orgId: string, actor: string, approvalId: string, input: DecisionInput<E>, lock: boolean) {
      const locked = yield* select(orgId, approvalId, lock)
      // A lock that waited for a concurrent decision holds the row as that one left it, but the locking statement's
      // sub-select of the votes saw its snapshot from before the wait: a quorum's votes are read again once the row is held.
      const row = lock && locked?.status === "pending" && locked.quorum > 1
        ? yield* select(orgId, approvalId, false)
        : locked
      if (row === undefined || row.status !== "pending") {
        const current: Current = {
          approval: row && factsOf(row),
          guard: true,
          standing: { person: null, decidedFor: null }
        }
        return { row, current, now: 0 }
      }
      const guard = input.guard === undefined ? true : yield* input.guard.holds
      const who = yield* standing(sql, orgId, actor, approvalId, row.assigned_group)
      const current: Current = { approval: factsOf(row), guard, standing: who }
      return { row, current, now: yield* databaseNow(sql) }
    }
  )

  /** Writes `outcome` in the decision's transaction; answers what follows the commit. */
  const apply = <E>(
    orgId: string,
    actor: string,
    input: DecisionInput<E>,
    row: FullApprovalRow | undefined,
    outcome: Outcome,
    settled: Settled,
    reason: string | null,
    now: number
  ) => {
    const refuse = (error: DecisionRefused | E) => Effect.succeed<AfterCommit<E>>({ answer: Effect.fail(error) })
    const log: Array<StreamEntry> = []
    return Outcome.$match(outcome, {
      Missing: () => refuse(refusal.missing()),
      Closed: ({ status }) => refuse(refusal.closed(status)),
      Refused: () => refuse(input.guard!.refused),
      Revoked: () => refuse(refusal.revoked()),
      NotAssigned: ({ group }) => refuse(refusal.notAssigned(group)),
      EditWithQuorum: () => refuse(refusal.editWithQuorum()),
      Unattributed: () => refuse(refusal.unattributed()),
      Duplicate: () => refuse(refusal.duplicate(actor)),
      // The final deadline lapsed before the scheduler fired it (a process
      // down or busy): the approval closed without a decision. What is due
      // fires here, in order, under the row lock.
      Lapsed: ({ due }) =>
        Effect.gen(function*() {
          let sessionId: string | null = null
          let current = row!
          for (const _ of due) {
            sessionId = (yield* deps.fireDeadline(current, now, log)).sessionId ?? sessionId
            current = (yield* select(orgId, current.id, false))!
          }
          yield* appendApprovalStream(sql, orgId, log)
          return {
            wake: { sessionId, topics: [Topics.events] },
            answer: Effect.fail(refusal.lapsed())
          } satisfies AfterCommit<E>
        }),
      // A vote that leaves the approval pending (a quorum): recorded, on the session's stream, nothing else.
      Voted: ({ remaining, voter }) =>
        Effect.gen(function*() {
          yield* recordVote(sql, row!, { voter, decision: input.decision, reason, now })
          yield* announceVote(steps, row!, { voter, reason, now, remaining })
          const pending = (yield* select(orgId, row!.id, false))!
          return {
            wake: { sessionId: pending.session_id, topics: [] },
            answer: Effect.succeed(snapshotOf(pending))
          } satisfies AfterCommit<E>
        }),
      Decided: ({ resolution, status, voter }) =>
        Effect.gen(function*() {
          const settle = settledValues(settled)
          yield* recordVote(sql, row!, { voter, decision: input.decision, reason, now })
          // The edit is written once, here: not read back (it is `settled`), and the step copies the stored value.
          const written = yield* ApprovalRows.returned(sql`
            UPDATE approvals SET status = ${status}, decided_at = ${isoMs(now)}::timestamptz, decided_by = ${actor},
              decision_reason = ${reason}, next_due_at = NULL, next_due_kind = NULL,
              approved_arguments = ${settle.approvedArguments}::jsonb, arguments_changed = ${settle.changed}::jsonb,
              arguments_digest = ${settle.digest}, response = ${settle.response}::jsonb
            WHERE id = ${row!.id}
            RETURNING ${sql.literal(APPROVAL_COLUMNS_BUT_EDIT)}
          `)
          const decided = { ...written, approved_arguments: settled.approved_arguments, response: settled.response }
          // Its three event copies carry it as marks, spliced into their JSON text as made once.
          const { marked, splice } = markedEdit(decided, settled)
          yield* steps.settle({ sessionId: decided.session_id, stepId: decided.step_id }, resolution, true)
          const type = input.decision === "approve" ? "approval.approved" : "approval.rejected"
          yield* emit(sql, type, marked, now, log, splice)
          yield* steps.append({
            sessionId: decided.session_id,
            orgId,
            name: "approval:decided",
            data: {
              approval_id: decided.id,
              step_id: decided.step_id,
              decision: status,
              resolution,
              decided_at: iso(decided.decided_at ?? new Date(now)),
              decided_by: actor,
              ...standsFor(actor, voter.person, voter.decidedFor),
              ...(reason === null ? {} : { decision_reason: reason }),
              ...quorumMembers(decided),
              ...editSnapshot({ ...settled, approved_arguments: marked.approved_arguments, response: marked.response })
            },
            splice
          })
          yield* appendApprovalStream(sql, orgId, log, { row: marked, splice })
          const wake = { sessionId: decided.session_id, topics: [Topics.events, Topics.approvals] }
          return { wake, answer: Effect.succeed(snapshotOf(decided)) } satisfies AfterCommit<E>
        })
    })
  }

  return { read, apply, refusal }
}

/** The transition's view of a row. */
const factsOf = (row: FullApprovalRow): NonNullable<Current["approval"]> => ({
  status: row.status,
  quorum: row.quorum,
  assignedGroup: row.assigned_group,
  deadlines: stateOf(row),
  votes: votesOf(row)
})

/** The transition's decision. */
export const decisionOf = (input: DecisionInput<unknown>): Decision => ({
  decision: input.decision,
  editsArguments: input.edit?.arguments !== undefined
})

/** Whether an outcome writes (the rest are refusals, answered before edited arguments are checked). */
export const writes = (outcome: Outcome) =>
  Outcome.$is("Lapsed")(outcome) || Outcome.$is("Voted")(outcome) || Outcome.$is("Decided")(outcome)
