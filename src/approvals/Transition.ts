/**
 * A person's decision on an approval as a pure transition: from what the
 * decision's transaction read under the approval's row lock (`Current`),
 * the decider and their decision at the database's `now`, every outcome
 * there is (`Outcome`). Nothing here reads or writes: `Decide.ts` locks,
 * reads, calls `transition` and applies the outcome it answers, matching
 * every tag, so an outcome added here and not applied there is a type error.
 *
 * The refusals come in a fixed order: the approval (missing, closed), the
 * decider's precondition, who the decider is (a key revoked meanwhile, not
 * in the assigned group nor a member's delegate), an edit the approval
 * cannot take, a person the decision does not name; then a final deadline
 * that passed before anyone fired it, and only then the vote.
 */
import { Data } from "effect"
import type { ApprovalStatus } from "../api/Approvals.ts"
import { type DeadlineState, type DueKind, fire, nextDue } from "./Deadlines.ts"
import { isSharedAddress, type Voter } from "./Votes.ts"

/** A vote already cast on the approval (`approval_votes`). */
export interface CastVote {
  readonly decided_by: string
  readonly person: string | null
  readonly decided_for: string | null
  readonly decision: "approve" | "reject"
}

/** The approval as the decision's transaction found it, with its deadlines and the votes cast so far. */
export interface PendingFacts {
  readonly status: ApprovalStatus
  readonly quorum: number
  readonly assignedGroup: string | null
  readonly deadlines: DeadlineState
  readonly votes: ReadonlyArray<CastVote>
}

/** What a decision is decided against, read under the approval's row lock. */
export interface Current {
  /** The approval; none when the organization has no such approval. */
  readonly approval: PendingFacts | undefined
  /** Whether the decider's precondition (`DecisionGuard`) holds; true when there is none. */
  readonly guard: boolean
  /** Who the decider is (`Deciders.ts`, `standing`): their person (null: a key revoked), whom their vote counts for (null: not theirs to decide). */
  readonly standing: { readonly person: string | null; readonly decidedFor: string | null }
}

/** A decision: approve or reject, and whether it carries edited arguments (`Edits.ts`). */
export interface Decision {
  readonly decision: "approve" | "reject"
  readonly editsArguments: boolean
}

/** Every outcome of a decision. */
export type Outcome = Data.TaggedEnum<{
  /** No such approval in the organization. */
  Missing: {}
  /** Only a pending approval is decided. */
  Closed: { readonly status: ApprovalStatus }
  /** The decider's precondition does not hold. */
  Refused: {}
  /** The decider's key was revoked meanwhile. */
  Revoked: {}
  /** The approval is assigned to a group the decider is neither in nor a member's delegate for. */
  NotAssigned: { readonly group: string }
  /** Edited arguments on an approval that needs several approvals: every approver approves the same arguments. */
  EditWithQuorum: {}
  /** The shared reviewer address names no person: it cannot be one of several. */
  Unattributed: {}
  /** The final deadline passed before it was fired: the deadlines due, in the order they fire, the last being `expire`. */
  Lapsed: { readonly due: ReadonlyArray<DueKind> }
  /** This person, or the member they stand in for, has voted. */
  Duplicate: {}
  /** The vote is recorded; the approval stays pending, needing `remaining` more approvals. */
  Voted: { readonly voter: Voter; readonly remaining: number }
  /** The decision closes the approval. */
  Decided: { readonly voter: Voter; readonly status: "approved" | "rejected"; readonly resolution: "allow" | "reject" }
}>

export const Outcome = Data.taggedEnum<Outcome>()

/** The deadlines still to fire, in order, until the approval expires. */
const lapsedDeadlines = (state: DeadlineState): ReadonlyArray<DueKind> => {
  const due: Array<DueKind> = []
  for (let at = state;;) {
    const next = nextDue(at)
    due.push(next.kind)
    if (next.kind === "expire") return due
    at = fire(at, next.kind)
  }
}

/** Whether `voter` or anyone they stand for has voted: a decider, a person and a person counted for each vote once. */
const hasVoted = (votes: ReadonlyArray<CastVote>, voter: Voter) =>
  votes.some((vote) =>
    vote.decided_by === voter.actor || vote.person === voter.person || vote.decided_for === voter.decidedFor
  )

/** The outcome of `actor`'s `decision` on the approval as `current` holds it, at `now` (epoch ms). */
export const transition = (current: Current, actor: string, decision: Decision, now: number): Outcome => {
  const approval = current.approval
  if (approval === undefined) return Outcome.Missing()
  if (approval.status !== "pending") return Outcome.Closed({ status: approval.status })
  if (!current.guard) return Outcome.Refused()
  const { person, decidedFor } = current.standing
  if (person === null) return Outcome.Revoked()
  if (decidedFor === null) return Outcome.NotAssigned({ group: approval.assignedGroup ?? "" })
  if (decision.editsArguments && approval.quorum > 1) return Outcome.EditWithQuorum()
  if (approval.quorum > 1 && isSharedAddress(actor)) return Outcome.Unattributed()
  if (approval.deadlines.expiresAt <= now) return Outcome.Lapsed({ due: lapsedDeadlines(approval.deadlines) })
  const voter: Voter = { actor, person, decidedFor }
  if (hasVoted(approval.votes, voter)) return Outcome.Duplicate()
  const approvals = approval.votes.filter((vote) => vote.decision === "approve").length + 1
  if (decision.decision === "approve" && approval.quorum > approvals) {
    return Outcome.Voted({ voter, remaining: approval.quorum - approvals })
  }
  return decision.decision === "approve"
    ? Outcome.Decided({ voter, status: "approved", resolution: "allow" })
    : Outcome.Decided({ voter, status: "rejected", resolution: "reject" })
}
