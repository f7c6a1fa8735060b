/**
 * Quorum: an approval that k distinct people must approve, and the votes
 * cast on it (docs/approvals.md, "Quorum").
 */
import { Schema } from "effect"
import { Timestamp } from "./Common.ts"
import { Problem } from "./Errors.ts"

/** The most approvers a quorum can ask for. */
const MAX_QUORUM = 10

export const Quorum = Schema.Int.check(Schema.isBetween({ minimum: 1, maximum: MAX_QUORUM })).annotate({
  description:
    `How many distinct people must approve (1 to ${MAX_QUORUM}, default 1): the approval stays pending until that many have approved, and one rejection rejects it`
})

/**
 * Who a decision stands for, beside `decided_by` (the credential that
 * acted): the person behind it and the person it counts for, each only
 * where it differs (docs/approvals.md, "Who counts as whom").
 */
export const DeciderFields = {
  decided_by_person: Schema.optionalKey(Schema.String.annotate({
    description:
      "The person behind `decided_by` when it is not that name itself: for an API key made by a console person, `console:<name>`; for a key made by another key, that key's person. Absent when `decided_by` is the person (a console person, a key made with the CLI)"
  })),
  decided_for: Schema.optionalKey(Schema.String.annotate({
    description:
      "The person this decision counts for when it is not the one who made it: the reviewer group member (as `decided_by` names them) a delegate decided in place of. Absent when it counts for the decider"
  }))
}

/** One person's vote on an approval. */
export const Vote = Schema.Struct({
  decided_by: Schema.String.annotate({
    description:
      "Who voted, as `decided_by` names deciders: an API key's id, `console:<person>` or `email:<reviewer address>`"
  }),
  ...DeciderFields,
  decision: Schema.Literals(["approve", "reject"]),
  decided_at: Timestamp,
  reason: Schema.optionalKey(
    Schema.String.annotate({ description: "Why, when the voter said (recognizable secrets replaced by `[REDACTED]`)" })
  )
})
export type Vote = typeof Vote.Type

/** The members an approval's snapshot carries when it needs more than one approval. */
export const QuorumFields = {
  quorum: Schema.optionalKey(
    Schema.Int.check(Schema.isBetween({ minimum: 2, maximum: MAX_QUORUM })).annotate({
      description:
        "How many distinct people must approve; present when more than one must (absent: one decision decides)"
    })
  ),
  votes: Schema.optionalKey(
    Schema.Array(Vote).annotate({
      description:
        "The votes cast so far, oldest first (with `quorum`); the last one is the decision that closed the approval"
    })
  ),
  approvals_remaining: Schema.optionalKey(
    Schema.Int.check(Schema.isBetween({ minimum: 0, maximum: MAX_QUORUM })).annotate({
      description: "While pending (with `quorum`): how many more distinct people must approve"
    })
  )
}

export class AlreadyVoted extends Problem<AlreadyVoted>()("AlreadyVoted", {
  code: "ALREADY_VOTED",
  status: 409,
  title: "This person has already voted on this approval"
}, {
  decided_by: Schema.String.annotate({
    description:
      "The decider whose vote was refused: they, the person behind them, or the person they would vote for has voted already"
  })
}) {}

/** A decision through the organization's shared reviewer address on an approval that needs several people. */
export class PersonRequired extends Problem<PersonRequired>()("PersonRequired", {
  code: "PERSON_REQUIRED",
  status: 403,
  title: "This approval needs several distinct people, and this link names none"
}) {}
