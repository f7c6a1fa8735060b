/**
 * Named reviewers: reviewer groups, delegations, and the problem a person
 * outside an approval's group gets (docs/approvals.md, "Reviewer groups").
 */
import { Schema } from "effect"
import { HttpApiEndpoint, HttpApiError, HttpApiGroup, HttpApiSchema, OpenApi } from "effect/http-api"
import { EmailAddress, Instant, Text, Timestamp, Uuid } from "./Common.ts"
import { documented, notFound } from "./Documentation.ts"
import { InvalidRequest, LimitReached, NotFound, problemType, RateLimited } from "./Errors.ts"
import { Authentication, requireScope } from "./Security.ts"

/** The most members a reviewer group can have. */
export const MAX_GROUP_MEMBERS = 50

/** The longest delegation window, in days. */
export const MAX_DELEGATION_DAYS = 90

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
export const EscalationChain = Schema.Array(GroupName).check(
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

/**
 * A console person's name, as `console login --name` gives it: no control
 * character (U+0000-U+001F, U+007F-U+009F), the first not a space either
 * (`\s` written out, see `SPACE_CHARACTERS`).
 */
const PersonName = Text.check(
  Schema.isPattern(
    /^[^\x00-\x20\x7f-\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000\ufeff][^\x00-\x1f\x7f-\x9f]{0,127}$/u,
    {
      message: "Expected 1 to 128 characters, no control characters, not starting with a space"
    }
  )
)

const ReviewerFields = {
  key_id: Schema.optionalKey(
    Uuid.annotate({ description: "An API key of the organization holding `approvals.decide`" })
  ),
  console_user: Schema.optionalKey(
    PersonName.annotate({ description: "A console person, as `decided_by` names them after `console:`" })
  )
}

/**
 * A person who may decide: an API key (by id) or a console person (by
 * name), exactly one of the two members. One object with both optional and
 * one property, rather than a union of two, so that a refused `key_id` is
 * named as `key_id` (a union's refusal names its last variant's member).
 */
export const Reviewer = Schema.Struct(ReviewerFields).check(Schema.isMinProperties(1), Schema.isMaxProperties(1))
  .annotate({
    description: "An API key (`key_id`) or a console person (`console_user`): exactly one of them"
  })
export type Reviewer = typeof Reviewer.Type

/** The decider a record names for a reviewer: the key's id, or `console:<person>`. */
export const deciderOf = (reviewer: Reviewer): string =>
  reviewer.key_id !== undefined ? reviewer.key_id : `console:${reviewer.console_user ?? ""}`

/** The reviewer a stored decider names. */
export const reviewerOf = (decider: string): Reviewer =>
  decider.startsWith("console:") ? { console_user: decider.slice("console:".length) } : { key_id: decider }

/** Exactly one of `key_id` and `console_user` (beside which `email` may stand); documented as the `oneOf` of the two. */
const isOneReviewer = Schema.makeFilter(
  (member: { readonly key_id?: string; readonly console_user?: string }) =>
    (member.key_id === undefined) !== (member.console_user === undefined) ||
    "Expected exactly one of key_id and console_user",
  { toJsonSchema: () => ({ oneOf: [{ required: ["key_id"] }, { required: ["console_user"] }] }) }
)

/** A member's own address's state. */
const AddressStatus = Schema.Literals(["invited", "pending", "confirmed"]).annotate({
  description:
    "`invited`: an administrator named the address and the person has not accepted it: it receives no mail and decides nothing; `pending`: the person set or accepted it, and it receives no approval mail until the link of its confirmation mail is used; `confirmed`: it receives the mail of approvals assigned to the person's groups, each with a link that decides as the person. Null without an address."
})

/**
 * A group member as `PUT` sets it: the person (exactly one of `key_id` and
 * `console_user`) and, optionally, their own reviewer address.
 */
export const GroupMemberInput = Schema.Struct({
  ...ReviewerFields,
  email: Schema.optionalKey(
    Schema.NullOr(EmailAddress).annotate({
      description:
        "An invitation to the person's own reviewer address (at most 254 characters): it is `invited` until the person accepts it themselves (`PUT /v1/reviewer-address`, signed in as themselves or with their own key), then `pending` until its confirmation mail's link is used; only then does mail about approvals assigned to a group they are in go to it. One address per person in the organization, whichever group sets it. `null` clears it; absent leaves it as it is."
    })
  )
}).annotate({
  description:
    "A member: an API key (`key_id`) or a console person (`console_user`), exactly one of them, and optionally their `email`"
}).check(Schema.isMinProperties(1), Schema.isMaxProperties(2), isOneReviewer)
export type GroupMemberInput = typeof GroupMemberInput.Type

/** A member as group reads show it: the person, their reviewer address and its state. */
export const GroupMember = Schema.Struct({
  ...ReviewerFields,
  email: Schema.NullOr(Schema.String).annotate({
    description: "The person's own reviewer address; null: none (mail for the group goes to its other members)"
  }),
  email_status: Schema.NullOr(AddressStatus)
})
export type GroupMember = typeof GroupMember.Type

/** The caller's own reviewer address: `GET` and `PUT /v1/reviewer-address`. */
export const OwnReviewerAddress = Schema.Struct({
  ...ReviewerFields,
  email: Schema.NullOr(Schema.String).annotate({ description: "The caller's own reviewer address; null: none" }),
  email_status: Schema.NullOr(AddressStatus)
}).annotate({ description: "The caller (`key_id` or `console_user`), their own reviewer address and its state" })
export type OwnReviewerAddress = typeof OwnReviewerAddress.Type

export const OwnAddressInput = Schema.Struct({
  email: Schema.NullOr(EmailAddress).annotate({
    description:
      "The caller's own reviewer address (at most 254 characters): the address they were invited to, to accept it, or another; `null` clears it"
  })
})

export const GroupInput = Schema.Struct({
  members: Schema.Array(GroupMemberInput).check(
    Schema.isMaxLength(MAX_GROUP_MEMBERS),
    // JSON Schema says the part it can (no two identical entries); the description says the rest (one entry per person).
    Schema.makeFilter(
      (members: ReadonlyArray<GroupMemberInput>) =>
        new Set(members.map(deciderOf)).size === members.length || "Expected each member once",
      { toJsonSchema: () => ({ uniqueItems: true }) }
    )
  ).annotate({ description: `The group's members, at most ${MAX_GROUP_MEMBERS}, each once` })
})
export type GroupInput = typeof GroupInput.Type

export const ReviewerGroup = Schema.Struct({
  name: Schema.String,
  members: Schema.Array(GroupMember),
  created_at: Timestamp,
  updated_at: Timestamp
})
export type ReviewerGroup = typeof ReviewerGroup.Type

export const DelegationInput = Schema.Struct({
  delegate: Reviewer.annotate({
    description: "Who decides in the caller's place: the approvals assigned to the caller's groups"
  }),
  starts_at: Schema.optionalKey(Instant.annotate({ description: "When the delegation starts (default: now)" })),
  ends_at: Instant.annotate({
    description: `When it ends: after \`starts_at\`, at most ${MAX_DELEGATION_DAYS} days after it`
  })
}).check(
  Schema.makeFilter((input) => {
    const ends = Date.parse(input.ends_at)
    const starts = input.starts_at === undefined ? undefined : Date.parse(input.starts_at)
    if (starts !== undefined && ends <= starts) return { path: ["ends_at"], issue: "ends_at must be after starts_at." }
    if (starts !== undefined && ends - starts > MAX_DELEGATION_DAYS * 86_400_000) {
      return { path: ["ends_at"], issue: `A delegation lasts at most ${MAX_DELEGATION_DAYS} days.` }
    }
    return undefined
  })
)
export type DelegationInput = typeof DelegationInput.Type

export const Delegation = Schema.Struct({
  delegation_id: Uuid,
  delegator: Reviewer.annotate({ description: "Who delegated (the caller that created it)" }),
  delegate: Reviewer,
  starts_at: Timestamp,
  ends_at: Timestamp,
  ended_at: Schema.NullOr(Timestamp).annotate({ description: "When the delegator ended it early; null otherwise" })
})
export type Delegation = typeof Delegation.Type

/** A decision by someone outside the approval's assigned group (nor a member's active delegate). */
export class NotAssigned extends HttpApiError.Problem<NotAssigned>()("NotAssigned", {
  type: problemType("NOT_ASSIGNED"),
  status: 403,
  title: "The approval is assigned to a reviewer group this decider is not in"
}, {
  code: Schema.tag("NOT_ASSIGNED"),
  assigned_group: Schema.String.annotate({ description: "The group the approval is assigned to" })
}) {}

/** A group a policy names, or that pending approvals are assigned to, cannot be deleted. */
export class GroupInUse extends HttpApiError.Problem<GroupInUse>()("GroupInUse", {
  type: problemType("GROUP_IN_USE"),
  status: 409,
  title: "The reviewer group is in use"
}, {
  code: Schema.tag("GROUP_IN_USE")
}) {}

const groupExample = {
  name: "payments-leads",
  members: [
    { console_user: "ana", email: "ana@example.com", email_status: "invited" },
    { key_id: "0193b7a2-6f1e-7c3a-9a55-2f4e8c1d0b17", email: null, email_status: null }
  ],
  created_at: "2026-11-22T12:00:00.000Z",
  updated_at: "2026-11-22T12:00:00.000Z"
}
const ownAddressExample = { console_user: "ana", email: "ana@example.com", email_status: "confirmed" }
const delegationExample = {
  delegation_id: "0193b7a2-6f1e-7c3a-9a55-2f4e8c1d0b18",
  delegator: { console_user: "ana" },
  delegate: { console_user: "ben" },
  starts_at: "2026-11-23T00:00:00.000Z",
  ends_at: "2026-11-30T00:00:00.000Z",
  ended_at: null
}

export class ReviewersApi extends HttpApiGroup.make("reviewers")
  .add(
    HttpApiEndpoint.put("putGroup", "/v1/reviewer-groups/:name", {
      params: { name: GroupName },
      payload: GroupInput,
      success: ReviewerGroup,
      error: [InvalidRequest, NotFound, LimitReached]
    }).pipe(
      requireScope(
        "org_config.write",
        `Creates the reviewer group \`name\` or replaces its members: API keys of the organization holding \`approvals.decide\`, and console persons, each optionally with their own reviewer \`email\`. At most ${MAX_GROUP_MEMBERS} members; an organization has at most \`SVC_MAX_REVIEWER_GROUPS_PER_ORG\` groups (default 100). A person has one address in the organization, whichever group sets it. An address given here is an invitation: it is \`invited\`, mailed nothing and decides nothing until the person accepts it themselves (\`PUT /v1/reviewer-address\`); then it is sent a confirmation mail, and once confirmed it receives the mail of approvals assigned to a group the person is in, each with a link that decides as that person. Giving the address a person already has changes nothing; \`null\` clears it; replacing or clearing it ends every link mailed to the previous one. Removing a member from the group leaves their address in place for their other groups.`
      ),
      documented({
        summary: "Set a reviewer group",
        request: {
          members: [{ console_user: "ana", email: "ana@example.com" }, {
            key_id: "0193b7a2-6f1e-7c3a-9a55-2f4e8c1d0b17"
          }]
        },
        response: groupExample,
        errors: {
          404:
            "A member key is not an active key of the organization holding `approvals.decide` (`NOT_FOUND`, the detail naming `members[i].key_id`).",
          409: "One more group than `SVC_MAX_REVIEWER_GROUPS_PER_ORG` allows (`LIMIT_REACHED`)."
        }
      })
    ),
    HttpApiEndpoint.get("listGroups", "/v1/reviewer-groups", {
      success: Schema.Struct({ groups: Schema.Array(ReviewerGroup) })
    }).pipe(
      requireScope("org_config.read", "The organization's reviewer groups, by name."),
      documented({ summary: "List reviewer groups", response: { groups: [groupExample] } })
    ),
    HttpApiEndpoint.get("getGroup", "/v1/reviewer-groups/:name", {
      params: { name: GroupName },
      success: ReviewerGroup,
      error: NotFound
    }).pipe(
      requireScope("org_config.read", "One reviewer group and its members."),
      documented({
        summary: "Get a reviewer group",
        response: groupExample,
        errors: { 404: notFound("reviewer group") }
      })
    ),
    HttpApiEndpoint.delete("deleteGroup", "/v1/reviewer-groups/:name", {
      params: { name: GroupName },
      success: HttpApiSchema.NoContent,
      error: [NotFound, GroupInUse]
    }).pipe(
      requireScope(
        "org_config.write",
        "Deletes a reviewer group no policy names (as `group` or in `escalation_chain`, its own or a rule's) and no pending approval is assigned to or may be handed to."
      ),
      documented({
        summary: "Delete a reviewer group",
        errors: {
          404: notFound("reviewer group"),
          409: "A policy names the group, or a pending approval is assigned to it (`GROUP_IN_USE`)."
        }
      })
    ),
    HttpApiEndpoint.post("delegate", "/v1/reviewer-delegations", {
      payload: DelegationInput,
      success: Delegation,
      error: [InvalidRequest, NotFound, LimitReached]
    }).pipe(
      requireScope(
        "approvals.decide",
        `The caller delegates their reviewing to \`delegate\` from \`starts_at\` (default now) until \`ends_at\` (at most ${MAX_DELEGATION_DAYS} days): in that window the delegate may decide the approvals assigned to the caller's groups. An organization has at most \`SVC_MAX_DELEGATIONS_PER_ORG\` delegations not yet over (default 1000).`
      ),
      documented({
        summary: "Delegate reviewing",
        request: {
          delegate: { console_user: "ben" },
          starts_at: "2026-11-23T00:00:00Z",
          ends_at: "2026-11-30T00:00:00Z"
        },
        response: delegationExample,
        errors: {
          400:
            "The delegate is the caller (`INVALID_REQUEST`, `field`: `delegate`); the window is empty or too long (`field`: `ends_at`).",
          404:
            "The delegate is a key that is not an active key of the organization holding `approvals.decide` (`NOT_FOUND`).",
          409: "One more delegation than `SVC_MAX_DELEGATIONS_PER_ORG` allows (`LIMIT_REACHED`)."
        }
      })
    ),
    HttpApiEndpoint.get("listDelegations", "/v1/reviewer-delegations", {
      success: Schema.Struct({ delegations: Schema.Array(Delegation) })
    }).pipe(
      requireScope(
        "approvals.decide",
        "The organization's delegations not yet over (not ended, `ends_at` to come), by start."
      ),
      documented({ summary: "List delegations", response: { delegations: [delegationExample] } })
    ),
    HttpApiEndpoint.get("ownAddress", "/v1/reviewer-address", {
      success: OwnReviewerAddress
    }).pipe(
      requireScope(
        "approvals.decide",
        "The caller's own reviewer address (the key's, or the console person's) and its state."
      ),
      documented({ summary: "Read my reviewer address", response: ownAddressExample })
    ),
    HttpApiEndpoint.put("setOwnAddress", "/v1/reviewer-address", {
      payload: OwnAddressInput,
      success: OwnReviewerAddress,
      error: RateLimited
    }).pipe(
      requireScope(
        "approvals.decide",
        "The caller sets their own reviewer address, or accepts the one an administrator invited them to by giving that same address: only the person themselves (signed in to the console as themselves, or with their own key) makes an address theirs. A new address is `pending` and is sent a confirmation mail (its one-time link valid for `SVC_REVIEWER_CONFIRMATION_TTL`), counted in the organization's `SVC_REVIEWER_CONFIRMATIONS_PER_HOUR`; the invited address is accepted as it is (an address whose mailbox was confirmed stays confirmed). `null` clears it; replacing or clearing it ends every link mailed to the previous one."
      ),
      documented({
        summary: "Set or accept my reviewer address",
        request: { email: "ana@example.com" },
        response: { ...ownAddressExample, email_status: "pending" },
        errors: {
          400: "Not an address of the documented form and length (`INVALID_REQUEST`, `field`: `email`).",
          429:
            "The confirmation mail would take the organization over `SVC_REVIEWER_CONFIRMATIONS_PER_HOUR` (`RATE_LIMITED`, with `retry_after_seconds`); nothing is changed."
        }
      })
    ),
    HttpApiEndpoint.post("endDelegation", "/v1/reviewer-delegations/:delegation_id/end", {
      params: { delegation_id: Uuid },
      success: Delegation,
      error: NotFound
    }).pipe(
      requireScope(
        "approvals.decide",
        "Ends one of the caller's own delegations now. Ending one already over answers it unchanged."
      ),
      documented({
        summary: "End a delegation",
        response: { ...delegationExample, ended_at: "2026-11-25T09:00:00.000Z" },
        errors: { 404: notFound("delegation of the caller") }
      })
    )
  )
  .middleware(Authentication)
  .annotate(OpenApi.Title, "Reviewer groups")
{}
