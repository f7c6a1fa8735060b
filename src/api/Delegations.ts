/**
 * Delegations (docs/approvals.md, "Reviewer groups"): a member hands their
 * reviewing to another person for a time window, in which the delegate may
 * decide the approvals assigned to the member's groups.
 */
import { Schema } from "effect"
import { HttpApiEndpoint } from "effect/http-api"
import { Instant, Timestamp, Uuid } from "./Common.ts"
import { Reviewer } from "./Deciders.ts"
import { documented, notFound } from "./Documentation.ts"
import { InvalidRequest, LimitReached, NotFound } from "./Errors.ts"
import { requireScope } from "./Security.ts"

/** The longest delegation window, in days. */
export const MAX_DELEGATION_DAYS = 90

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
  ended_at: Schema.NullOr(Timestamp).annotate({ description: "When the delegator ended it early; null otherwise" }),
  key_names: Schema.optionalKey(
    Schema.Record(Schema.String, Schema.String).annotate({
      description:
        "The names of the API keys it names (`delegator`, `delegate`), by key id, so a person without `keys.manage` reads who they are; only keys of the organization, never their material; keys without a name are left out. Absent when there are none"
    })
  )
})
export type Delegation = typeof Delegation.Type

const delegationExample = {
  delegation_id: "0193b7a2-6f1e-7c3a-9a55-2f4e8c1d0b18",
  delegator: { console_user: "ana" },
  delegate: { key_id: "0193b7a2-9c41-7d02-8e6b-5a3f1c2d4e60" },
  starts_at: "2026-11-23T00:00:00.000Z",
  ends_at: "2026-11-30T00:00:00.000Z",
  ended_at: null,
  key_names: { "0193b7a2-9c41-7d02-8e6b-5a3f1c2d4e60": "night-shift" }
}

/** `POST /v1/reviewer-delegations`. */
export const delegateEndpoint = HttpApiEndpoint.post("delegate", "/v1/reviewer-delegations", {
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
      delegate: { key_id: "0193b7a2-9c41-7d02-8e6b-5a3f1c2d4e60" },
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
)

/** `GET /v1/reviewer-delegations`. */
export const listDelegationsEndpoint = HttpApiEndpoint.get("listDelegations", "/v1/reviewer-delegations", {
  success: Schema.Struct({ delegations: Schema.Array(Delegation) })
}).pipe(
  requireScope(
    "approvals.decide",
    "The organization's delegations not yet over (not ended, `ends_at` to come), by start."
  ),
  documented({ summary: "List delegations", response: { delegations: [delegationExample] } })
)

/** `POST /v1/reviewer-delegations/:delegation_id/end`. */
export const endDelegationEndpoint = HttpApiEndpoint.post(
  "endDelegation",
  "/v1/reviewer-delegations/:delegation_id/end",
  {
    params: { delegation_id: Uuid },
    success: Delegation,
    error: NotFound
  }
).pipe(
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
