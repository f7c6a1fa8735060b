/**
 * Quorum: an approval that k distinct people must approve, and the votes
 * cast on it (docs/approvals.md, "Quorum").
 */
import { Schema } from "effect"
import { HttpApiError } from "effect/http-api"
import { Timestamp } from "./Common.ts"
import { problemType } from "./Errors.ts"

/** The most approvers a quorum can ask for. */
export const MAX_QUORUM = 10

export const Quorum = Schema.Int.check(Schema.isBetween({ minimum: 1, maximum: MAX_QUORUM })).annotate({
  description:
    `How many distinct people must approve (1 to ${MAX_QUORUM}, default 1): the approval stays pending until that many have approved, and one rejection rejects it`
})

/** One person's vote on an approval. */
export const Vote = Schema.Struct({
  decided_by: Schema.String.annotate({
    description: "Who voted, as `decided_by` names deciders: an API key's id, `console:<person>` or `email:<reviewer address>`"
  }),
  decision: Schema.Literals(["approve", "reject"]),
  decided_at: Timestamp,
  reason: Schema.optionalKey(Schema.String.annotate({ description: "Why, when the voter said (recognizable secrets replaced by `[REDACTED]`)" }))
})
export type Vote = typeof Vote.Type

/** The members an approval's snapshot carries when it needs more than one approval. */
export const QuorumFields = {
  quorum: Schema.optionalKey(Schema.Int.check(Schema.isBetween({ minimum: 2, maximum: MAX_QUORUM })).annotate({
    description: "How many distinct people must approve; present when more than one must (absent: one decision decides)"
  })),
  votes: Schema.optionalKey(Schema.Array(Vote).annotate({
    description: "The votes cast so far, oldest first (with `quorum`); the last one is the decision that closed the approval"
  })),
  approvals_remaining: Schema.optionalKey(Schema.Int.check(Schema.isBetween({ minimum: 0, maximum: MAX_QUORUM })).annotate({
    description: "While pending (with `quorum`): how many more distinct people must approve"
  }))
}

export class AlreadyVoted extends HttpApiError.Problem<AlreadyVoted>()("AlreadyVoted", {
  type: problemType("ALREADY_VOTED"),
  status: 409,
  title: "This decider has already voted on this approval"
}, {
  code: Schema.tag("ALREADY_VOTED"),
  decided_by: Schema.String.annotate({ description: "The decider whose vote is already recorded" })
}) {}
