/**
 * Quorum: an approval that `quorum` distinct people must approve. Each
 * decision on it is a vote (`approval_votes`), recorded under the person who
 * cast it and the person it counts for (docs/approvals.md, "Who counts as
 * whom"); the approval stays pending until `quorum` distinct people have
 * approved or one has rejected, and the vote that gets there closes it as a single decision
 * would (`Approvals.decide`). A vote that does not close it records itself
 * and `approval:voted` on the session stream, and nothing else: no webhook
 * event, no change to the deadlines (docs/events.md, "Quorum").
 *
 * Votes are cast under the approval's row lock (`Decide.ts` locks it
 * first), so two votes for the last needed approval serialize: the first
 * closes the approval, the second finds it closed; whether a vote counts,
 * and what it does, is `Transition.ts`'s answer.
 */
import type { SqlClient } from "effect/sql"
import type { ApprovalStatus } from "../api/Approvals.ts"
import type { Vote } from "../api/Votes.ts"
import type { StepRecords } from "./StepRecords.ts"

/** What of an `approvals` row (`Events.ts`, `ApprovalColumns`) a vote reads. */
interface ApprovalRow {
  readonly id: string
  readonly org_id: string
  readonly session_id: string
  readonly step_id: string
  readonly status: ApprovalStatus
  readonly quorum: number
  /** JSON text, from `votesColumns`. */
  readonly votes: string | null
}

/** Whether a decider is the organization's shared reviewer address (`email:<address>`, `MailLinks.ts`): a credential no one person holds. */
export const isSharedAddress = (actor: string) => actor.startsWith("email:")

/**
 * SQL: the `quorum`, `votes` and `decider` columns of `approvals` row
 * `table` (an alias or the table's name), for `ApprovalColumns`: the votes
 * (JSON text, oldest first) only when the approval needs more than one
 * approval, so a single-decider approval reads as before; `decider`, the
 * closing vote's person and whom it counted for (JSON text), once a person
 * decided.
 */
export const votesColumns = (table: string) =>
  `${table}.quorum, CASE WHEN ${table}.quorum > 1 THEN (
    SELECT coalesce(json_agg(json_build_object('decided_by', v.decided_by, 'person', v.person, 'decided_for', v.decided_for,
      'decision', v.decision, 'decided_at', svc_iso(v.decided_at), 'reason', v.reason) ORDER BY v.decided_at, v.decided_by), '[]'::json)::text
    FROM approval_votes v WHERE v.approval_id = ${table}.id) END AS votes,
  CASE WHEN ${table}.decided_by IS NOT NULL THEN (
    SELECT json_build_object('person', v.person, 'decided_for', v.decided_for)::text
    FROM approval_votes v WHERE v.approval_id = ${table}.id AND v.decided_by = ${table}.decided_by) END AS decider`

/** Who a vote stands for: the person who cast it and the person it counts for, each named only where it differs from the one before. */
export const standsFor = (
  decidedBy: string,
  person: string | null | undefined,
  decidedFor: string | null | undefined
) => ({
  ...(person == null || person === decidedBy ? {} : { decided_by_person: person }),
  ...(decidedFor == null || decidedFor === (person ?? decidedBy) ? {} : { decided_for: decidedFor })
})

/** The snapshot's members beside `decided_by` (`standsFor`), from the `decider` column. */
export const deciderMembers = (row: { readonly decided_by: string | null; readonly decider: string | null }) => {
  if (row.decided_by === null || row.decider === null) return {}
  const decider = JSON.parse(row.decider) as { person: string | null; decided_for: string | null }
  return standsFor(row.decided_by, decider.person, decider.decided_for)
}

/** The votes of a row (`votes` column), oldest first; none for a single-decider approval. */
export const votesOf = (row: Pick<ApprovalRow, "votes">): ReadonlyArray<StoredVote> => JSON.parse(row.votes ?? "[]")

/** A vote as the `votes` column carries it. */
interface StoredVote {
  readonly decided_by: string
  readonly person: string | null
  readonly decided_for: string | null
  readonly decision: "approve" | "reject"
  readonly decided_at: string
  readonly reason: string | null
}

/** The snapshot's quorum members (`QuorumFields`) for a row, in their fixed order; none for a single-decider approval. */
export const quorumMembers = (
  row: Pick<ApprovalRow, "quorum" | "votes" | "status">
): { quorum?: number; votes?: ReadonlyArray<Vote>; approvals_remaining?: number } => {
  if (row.quorum <= 1) return {}
  const votes = votesOf(row).map(({ decided_at, decided_by, decided_for, decision, person, reason }): Vote => ({
    decided_by,
    ...standsFor(decided_by, person, decided_for),
    decision,
    decided_at,
    ...(reason === null ? {} : { reason })
  }))
  if (row.status !== "pending") return { quorum: row.quorum, votes }
  const approved = votes.filter((vote) => vote.decision === "approve").length
  return { quorum: row.quorum, votes, approvals_remaining: Math.max(0, row.quorum - approved) }
}

/** Who casts a vote (`Deciders.ts`, `standing`): the decider as records name them, the person they are and the person the vote counts for. */
export interface Voter {
  readonly actor: string
  readonly person: string
  readonly decidedFor: string
}

/**
 * Records `voter`'s vote on the locked, pending approval `row` at `now`
 * (the database's time, epoch ms), once `Transition.ts` found it is their
 * first: run it in the decision's transaction, after the row lock.
 */
export const recordVote = (
  sql: SqlClient.SqlClient,
  row: Pick<ApprovalRow, "id">,
  vote: {
    readonly voter: Voter
    readonly decision: "approve" | "reject"
    readonly reason: string | null
    readonly now: number
  }
) =>
  sql`
    INSERT INTO approval_votes (approval_id, decided_by, person, decided_for, decision, reason, decided_at)
    VALUES (${row.id}, ${vote.voter.actor}, ${vote.voter.person}, ${vote.voter.decidedFor}, ${vote.decision}, ${vote.reason},
      ${new Date(vote.now).toISOString()}::timestamptz)
  `

/** The session's `approval:voted` event for a vote that left the approval pending. */
export const announceVote = (
  steps: StepRecords["Service"],
  row: ApprovalRow,
  vote: { readonly voter: Voter; readonly reason: string | null; readonly now: number; readonly remaining: number }
) =>
  steps.append({
    sessionId: row.session_id,
    orgId: row.org_id,
    name: "approval:voted",
    data: {
      approval_id: row.id,
      step_id: row.step_id,
      decision: "approve",
      decided_at: new Date(vote.now).toISOString(),
      decided_by: vote.voter.actor,
      ...standsFor(vote.voter.actor, vote.voter.person, vote.voter.decidedFor),
      ...(vote.reason === null ? {} : { reason: vote.reason }),
      quorum: row.quorum,
      approvals_remaining: vote.remaining
    }
  })
