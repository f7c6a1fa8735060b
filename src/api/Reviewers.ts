/**
 * Reviewer groups (docs/approvals.md, "Reviewer groups"): named sets of
 * people who decide the approvals assigned to the group, and the one HTTP
 * group of the reviewer endpoints, groups beside delegations
 * (`Delegations.ts`) and a person's own address (`ReviewerAddresses.ts`).
 */
import { Schema } from "effect"
import { HttpApiEndpoint, HttpApiGroup, HttpApiSchema, OpenApi } from "effect/http-api"
import { GroupName } from "./Assignment.ts"
import { EmailAddress, Timestamp } from "./Common.ts"
import { deciderOf, isOneReviewer, ReviewerFields } from "./Deciders.ts"
import { delegateEndpoint, endDelegationEndpoint, listDelegationsEndpoint } from "./Delegations.ts"
import { documented, notFound } from "./Documentation.ts"
import { InvalidRequest, LimitReached, NotFound, Problem } from "./Errors.ts"
import { AddressStatus, ownAddressEndpoint, setOwnAddressEndpoint } from "./ReviewerAddresses.ts"
import { Authentication, requireScope } from "./Security.ts"

/** The most members a reviewer group can have. */
export const MAX_GROUP_MEMBERS = 50

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
const GroupMember = Schema.Struct({
  ...ReviewerFields,
  email: Schema.NullOr(Schema.String).annotate({
    description: "The person's own reviewer address; null: none (mail for the group goes to its other members)"
  }),
  email_status: Schema.NullOr(AddressStatus)
})
export type GroupMember = typeof GroupMember.Type

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

/** A group a policy names, or that pending approvals are assigned to, cannot be deleted. */
export class GroupInUse extends Problem<GroupInUse>()("GroupInUse", {
  code: "GROUP_IN_USE",
  status: 409,
  title: "The reviewer group is in use"
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
    delegateEndpoint,
    listDelegationsEndpoint,
    ownAddressEndpoint,
    setOwnAddressEndpoint,
    endDelegationEndpoint
  )
  .middleware(Authentication)
  .annotate(OpenApi.Title, "Reviewer groups")
{}
