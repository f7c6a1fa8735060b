/**
 * A person's own reviewer address (docs/approvals.md, "Reviewer groups"):
 * its state, as group reads show it, and the endpoints by which the person
 * reads, sets or accepts it themselves.
 */
import { Schema } from "effect"
import { HttpApiEndpoint } from "effect/http-api"
import { EmailAddress } from "./Common.ts"
import { ReviewerFields } from "./Deciders.ts"
import { documented } from "./Documentation.ts"
import { RateLimited } from "./Errors.ts"
import { requireScope } from "./Security.ts"

/** A member's own address's state. */
export const AddressStatus = Schema.Literals(["invited", "pending", "confirmed"]).annotate({
  description:
    "`invited`: an administrator named the address and the person has not accepted it: it receives no mail and decides nothing; `pending`: the person set or accepted it, and it receives no approval mail until the link of its confirmation mail is used; `confirmed`: it receives the mail of approvals assigned to the person's groups, each with a link that decides as the person. Null without an address."
})

/** The caller's own reviewer address: `GET` and `PUT /v1/reviewer-address`. */
export const OwnReviewerAddress = Schema.Struct({
  ...ReviewerFields,
  email: Schema.NullOr(Schema.String).annotate({ description: "The caller's own reviewer address; null: none" }),
  email_status: Schema.NullOr(AddressStatus)
}).annotate({ description: "The caller (`key_id` or `console_user`), their own reviewer address and its state" })
export type OwnReviewerAddress = typeof OwnReviewerAddress.Type

const OwnAddressInput = Schema.Struct({
  email: Schema.NullOr(EmailAddress).annotate({
    description:
      "The caller's own reviewer address (at most 254 characters): the address they were invited to, to accept it, or another; `null` clears it"
  })
})

const ownAddressExample = { console_user: "ana", email: "ana@example.com", email_status: "confirmed" }

/** `GET /v1/reviewer-address`. */
export const ownAddressEndpoint = HttpApiEndpoint.get("ownAddress", "/v1/reviewer-address", {
  success: OwnReviewerAddress
}).pipe(
  requireScope(
    "approvals.decide",
    "The caller's own reviewer address (the key's, or the console person's) and its state."
  ),
  documented({ summary: "Read my reviewer address", response: ownAddressExample })
)

/** `PUT /v1/reviewer-address`. */
export const setOwnAddressEndpoint = HttpApiEndpoint.put("setOwnAddress", "/v1/reviewer-address", {
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
)
