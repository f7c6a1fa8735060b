/**
 * Deciding from a reviewer mail. A mail about a pending approval
 * (`approval.requested`, `approval.expiring`, `approval.escalated`) links
 * to `/console/decide#<token>` under `SVC_PUBLIC_URL`. The token is in the
 * URL fragment, which browsers never send, so it reaches no server log; the
 * page posts it here. The token opens that one approval and nothing else:
 * reading it changes nothing, it signs nobody in, and only a person
 * pressing Approve or Reject on the page decides, named
 * `email:<reviewer address>` in `decided_by`, or the member a reviewer
 * group member's mail went to.
 */
import { Schema } from "effect"
import { HttpApiEndpoint, HttpApiGroup, OpenApi } from "effect/http-api"
import { ArgumentsShapeMismatch, ArgumentsTooComplex, decisionOf } from "./ApprovalEdits.ts"
import { ApprovalContext, DecisionReason } from "./Approvals.ts"
import { NotAssigned } from "./Assignment.ts"
import { Text, Timestamp } from "./Common.ts"
import { documented } from "./Documentation.ts"
import { CrossSiteRequest, InvalidTransition, Problem, ValidationBusy } from "./Errors.ts"
import * as Examples from "./Examples.ts"
import { AlreadyVoted, PersonRequired } from "./Votes.ts"

const ApprovalLinkToken = Text.check(Schema.isMinLength(1), Schema.isMaxLength(200)).annotate({
  description: "The secret of the mail's link: the part after `#` in `/console/decide#<token>`"
})

const OpenApprovalLink = Schema.Struct({ token: ApprovalLinkToken })

const DecideByLink = decisionOf({ token: ApprovalLinkToken, reason: Schema.optionalKey(DecisionReason) })

/** The approval a mail's link opens, and who a decision through it names. */
export const ApprovalLinkView = Schema.Struct({
  ...ApprovalContext.fields,
  decider: Schema.String.annotate({
    description:
      "How a decision through this link is recorded in `decided_by`: `email:<reviewer address>` (the organization's address the mail went to), or, for a mail to a reviewer group member's own address, that member (`console:<name>` or the API key's id)"
  })
})
export type ApprovalLinkView = typeof ApprovalLinkView.Type

export class ApprovalLinkInvalid extends Problem<ApprovalLinkInvalid>()("ApprovalLinkInvalid", {
  code: "APPROVAL_LINK_INVALID",
  status: 404,
  title: "This is not the link of an approval of this service"
}) {}

export class ReviewerAddressReplaced extends Problem<ReviewerAddressReplaced>()("ReviewerAddressReplaced", {
  code: "REVIEWER_ADDRESS_REPLACED",
  status: 410,
  title: "The address this link was mailed to is no longer the organization's reviewer address"
}, {}) {}

const ConfirmationToken = Text.check(Schema.isMinLength(1), Schema.isMaxLength(200)).annotate({
  description: "The secret of the confirmation mail's link: the part after `#` in `/console/confirm-address#<token>`"
})

const ConfirmReviewerAddress = Schema.Struct({ token: ConfirmationToken })

/** The reviewer address a confirmation link confirmed. */
const ReviewerAddressConfirmed = Schema.Struct({
  reviewer_email: Schema.String.annotate({
    description: "The address confirmed: it now receives approval requests and deadline notices"
  }),
  reviewer_email_status: Schema.Literal("confirmed").annotate({
    description: "Always `confirmed`, as in `GET /v1/notification-settings`"
  }),
  confirmed_at: Timestamp.annotate({
    description: "When the address was confirmed (the first use of any of its links)"
  })
})

export class ConfirmationLinkInvalid extends Problem<ConfirmationLinkInvalid>()("ConfirmationLinkInvalid", {
  code: "CONFIRMATION_LINK_INVALID",
  status: 404,
  title: "This is not the confirmation link of a reviewer address of this service"
}, {}) {}

export class ConfirmationLinkUsed extends Problem<ConfirmationLinkUsed>()("ConfirmationLinkUsed", {
  code: "CONFIRMATION_LINK_USED",
  status: 410,
  title: "The confirmation link was already used"
}, {
  used_at: Timestamp
}) {}

export class ConfirmationLinkExpired extends Problem<ConfirmationLinkExpired>()("ConfirmationLinkExpired", {
  code: "CONFIRMATION_LINK_EXPIRED",
  status: 410,
  title: "The confirmation link has expired"
}, {
  expired_at: Timestamp
}) {}

export class ApprovalLinksApi extends HttpApiGroup.make("approvalLinks")
  .add(
    HttpApiEndpoint.post("open", "/v1/approval-links/open", {
      payload: OpenApprovalLink,
      success: ApprovalLinkView,
      error: [ApprovalLinkInvalid, ReviewerAddressReplaced]
    }).pipe(
      documented({
        summary: "Read the approval of a mail's link",
        description:
          "The approval a reviewer mail's link opens, with the task's name and the session's earlier steps, as it stands now: pending, or closed with who decided, when and why. Reading changes nothing and signs nobody in. No authentication: the link's token is the credential, for this approval only.",
        request: Examples.openApprovalLink,
        response: Examples.approvalLinkView,
        errors: {
          404: "The token is not the link of an approval of this service (`APPROVAL_LINK_INVALID`).",
          410:
            "The address the mail went to was replaced or removed since, or is not confirmed (`REVIEWER_ADDRESS_REPLACED`): the link opens nothing."
        }
      })
    ),
    HttpApiEndpoint.post("decide", "/v1/approval-links/decision", {
      payload: DecideByLink,
      success: ApprovalLinkView,
      error: [
        ApprovalLinkInvalid,
        ReviewerAddressReplaced,
        InvalidTransition,
        AlreadyVoted,
        NotAssigned,
        PersonRequired,
        CrossSiteRequest,
        ArgumentsShapeMismatch,
        ArgumentsTooComplex,
        ValidationBusy
      ]
    }).pipe(
      documented({
        summary: "Approve or reject through a mail's link",
        description:
          "The person who opened a reviewer mail's link approves or rejects that approval, optionally saying why (`reason`, at most 1 000 characters), approving with edited `arguments` or rejecting with a `response` for the agent as `POST /v1/agent-approvals/{approval_id}/decision` does. The record names them `email:<reviewer address>`, or, for a mail to a reviewer group member's own address, that member (`console:<name>` or the key's id), whose one vote it is under a quorum. A link of the organization's shared address decides only an approval one person decides (`quorum` 1): it names no person. The link works until the approval closes, and only while the address it was mailed to is still the organization's confirmed reviewer address (or that member's own address, set or accepted by the member and confirmed); after the approval closes this answers 409 `INVALID_TRANSITION` and the link shows the final state. Like every state-changing console request it must carry the `X-Svc-Console: 1` header and must not come from another site. No authentication: the link's token is the credential, for this approval only.",
        request: Examples.decideByLink,
        response: Examples.approvalLinkDecided,
        errors: {
          400: "`reason` is longer than 1 000 characters or holds a string that cannot be stored (`INVALID_REQUEST`).",
          403:
            "No `X-Svc-Console` header, or a request from another site (`CROSS_SITE_REQUEST`); the approval is assigned to a reviewer group the link's decider is not in, nor delegated to by a member: an organization address's link, or a member's who was removed from the group (`NOT_ASSIGNED`); the approval needs several distinct people and this is a link of the organization's shared reviewer address, which names none (`PERSON_REQUIRED`).",
          404: "The token is not the link of an approval of this service (`APPROVAL_LINK_INVALID`).",
          409:
            "The approval is no longer pending (`INVALID_TRANSITION`), or it needs several approvals and this member has already voted, or the member a delegate of theirs stood in for (`ALREADY_VOTED`).",
          410:
            "The address the mail went to was replaced or removed since, the organization's or the member's (`REVIEWER_ADDRESS_REPLACED`): nothing is decided.",
          422:
            "Edited `arguments` do not fit the action class's `arguments_schema`, or it declares none (`ARGUMENTS_SHAPE_MISMATCH`, `field` naming the first at fault), or checking them went over its budget (`ARGUMENTS_TOO_COMPLEX`).",
          429: "Too many schema checks of this organization are waiting (`VALIDATION_BUSY`, with `Retry-After`)."
        }
      })
    )
  )
  .annotate(OpenApi.Title, "Approval links")
{}

/**
 * Confirming a reviewer address: the page a confirmation mail links to
 * posts the link's token here. No authentication: the token is the
 * credential, for that address only.
 */
export class ReviewerConfirmationApi extends HttpApiGroup.make("reviewerConfirmation")
  .add(
    HttpApiEndpoint.post("confirmAddress", "/v1/approval-links/address-confirmation", {
      payload: ConfirmReviewerAddress,
      success: ReviewerAddressConfirmed,
      error: [
        ConfirmationLinkInvalid,
        ConfirmationLinkUsed,
        ConfirmationLinkExpired,
        ReviewerAddressReplaced,
        CrossSiteRequest
      ]
    }).pipe(
      documented({
        summary: "Confirm a reviewer address",
        description:
          "The person who received a confirmation mail (sent when `PUT /v1/notification-settings` sets a new reviewer address) confirms that address: from then on it receives approval requests and deadline notices, each with its decision link. The mail links to `/console/confirm-address#<token>`; that page posts the token here when the person presses Confirm. A link works once, within `SVC_REVIEWER_CONFIRMATION_TTL` (default 24 hours), and only for the address it was mailed to. Like every state-changing console request it must carry the `X-Svc-Console: 1` header and must not come from another site. No authentication: the link's token is the credential, for this address only.",
        request: Examples.confirmReviewerAddress,
        response: Examples.reviewerAddressConfirmed,
        errors: {
          403: "No `X-Svc-Console` header, or a request from another site (`CROSS_SITE_REQUEST`).",
          404: "The token is not a confirmation link of this service (`CONFIRMATION_LINK_INVALID`).",
          410:
            "The link was used already (`CONFIRMATION_LINK_USED`), its time ran out (`CONFIRMATION_LINK_EXPIRED`), or the address it was mailed to was replaced or removed since (`REVIEWER_ADDRESS_REPLACED`)."
        }
      })
    )
  )
  .annotate(OpenApi.Title, "Reviewer address confirmation")
{}
