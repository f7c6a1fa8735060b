/**
 * Whom an approval is assigned to: a reviewer group by name, the escalation
 * chain its deadlines hand it along, and the problem a person outside the
 * group gets (docs/approvals.md, "Reviewer groups"). Policies and rules
 * name them; approvals show them.
 */
import { Schema } from "effect"
import { Text } from "./Common.ts"
import { Problem } from "./Errors.ts"

/** A reviewer group's name: what policies, rules and approvals call it. */
export const GroupName = Text.check(
  Schema.isPattern(/^[A-Za-z0-9][A-Za-z0-9._:-]{0,63}$/u, {
    message: "Expected 1 to 64 letters, digits, '.', '_', ':' or '-', starting with a letter or digit"
  })
).annotate({ description: "A reviewer group's name (1 to 64 letters, digits, '.', '_', ':' or '-')" })

/** The most groups an escalation chain names. */
export const MAX_ESCALATION_CHAIN = 5

/** The first entry of `chain` that repeats an earlier one, named by its index. */
const repeatedGroup = Schema.makeFilter(
  (chain: ReadonlyArray<string>) => {
    const i = chain.findIndex((name, j) => chain.indexOf(name) !== j)
    return i < 0
      ? undefined
      : {
        path: [i],
        issue: `Expected each group once: ${JSON.stringify(chain[i])} is also entry ${
          chain.indexOf(chain[i]!)
        } of the chain`
      }
  },
  { toJsonSchema: () => ({ uniqueItems: true }) }
)

/** The groups an approval is handed to, one per deadline, in order. */
const EscalationChain = Schema.Array(GroupName).check(
  Schema.isMinLength(1),
  Schema.isMaxLength(MAX_ESCALATION_CHAIN),
  repeatedGroup
).annotate({
  description:
    `With \`escalation_seconds\`: the reviewer groups the approval is handed to, in order, 1 to ${MAX_ESCALATION_CHAIN} distinct names. Each deadline hands it to the next one (\`approval.escalated\`) and opens another \`escalation_seconds\` window; after the last group's window it expires`
})

/** Who reviews an approval: its reviewer group, and the groups its escalations hand it to. */
export const AssignmentFields = {
  group: Schema.optionalKey(GroupName.annotate({
    description:
      "The reviewer group the approval is assigned to: only its members (or their active delegates) may decide it"
  })),
  escalation_chain: Schema.optionalKey(EscalationChain)
}

/**
 * How many escalations an approval gets: none without `escalation_seconds`;
 * with it, one per group of the chain, or one that keeps the group without a chain.
 */
export const escalationCount = (
  input: {
    readonly escalation_seconds?: number | null | undefined
    readonly escalation_chain?: ReadonlyArray<string> | null | undefined
  }
) => input.escalation_seconds == null ? 0 : Math.max(1, input.escalation_chain?.length ?? 0)

/** An `escalation_chain` needs escalations to happen; documented as JSON Schema's `dependentRequired`. */
export const escalationChainFits = Schema.makeFilter(
  (input: { readonly escalation_chain?: ReadonlyArray<string>; readonly escalation_seconds?: number }) =>
    input.escalation_chain === undefined || input.escalation_seconds !== undefined
      ? undefined
      : {
        path: ["escalation_chain"],
        issue: "escalation_chain needs escalation_seconds: each deadline is what escalates."
      },
  { toJsonSchema: () => ({ dependentRequired: { escalation_chain: ["escalation_seconds"] } }) }
)

/** The snapshot's members naming who reviews the approval now. */
export const AssignmentSnapshotFields = {
  assigned_group: Schema.optionalKey(Schema.String.annotate({
    description:
      "The reviewer group the approval is assigned to now: only its members (or their active delegates) may decide it; absent when anyone with `approvals.decide` may"
  })),
  escalation_level: Schema.optionalKey(
    Schema.Int.check(Schema.isBetween({ minimum: 0, maximum: MAX_ESCALATION_CHAIN })).annotate({
      description:
        `With \`assigned_group\`: how many groups of its \`escalation_chain\` it has been handed along, 0 to ${MAX_ESCALATION_CHAIN}: 0 while with its first group, n once the n-th deadline handed it to the chain's n-th group (an escalation without a chain keeps the group and the level)`
    })
  )
}

/** The approvals list's filter for the caller's inbox. */
export const AssignedToQuery = Schema.optionalKey(
  Schema.Literal("me").annotate({
    description:
      "`me`: only approvals assigned to a reviewer group the caller is in, or a member of which delegated to the caller for now"
  })
)

/** A decision by someone outside the approval's assigned group (nor a member's active delegate). */
export class NotAssigned extends Problem<NotAssigned>()("NotAssigned", {
  code: "NOT_ASSIGNED",
  status: 403,
  title: "The approval is assigned to a reviewer group this decider is not in"
}, {
  assigned_group: Schema.String.annotate({ description: "The group the approval is assigned to" })
}) {}
