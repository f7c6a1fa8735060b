/**
 * Approvals and the approval lifecycle events (docs/approvals.md,
 * "Deciding"; the snapshot in docs/webhooks.md, "Events"); their
 * policies are `Policies.ts`.
 */
import { Schema } from "effect"
import { HttpApiEndpoint, HttpApiGroup, HttpApiSchema, OpenApi } from "effect/http-api"
import { ArgumentsShapeMismatch, ArgumentsTooComplex, decisionOf, EditSnapshotFields } from "./ApprovalEdits.ts"
import { AssignedToQuery, AssignmentSnapshotFields, NotAssigned } from "./Assignment.ts"
import { Cursor, JsonValue, Limit, NextCursor, ResumeQuery, Text, Timestamp, Uuid } from "./Common.ts"
import { documented, notFound } from "./Documentation.ts"
import { InvalidRequest, InvalidTransition, NotFound, TooManyStreams, ValidationBusy } from "./Errors.ts"
import * as Examples from "./Examples.ts"
import { MAX_DECISION_REASON_LENGTH, TimeoutAction } from "./Policies.ts"
import { Authentication, requireScope } from "./Security.ts"
import { AlreadyVoted, DeciderFields, QuorumFields } from "./Votes.ts"

// What the approvals list (and its stream, an approval's context and the
// history) tells a person beyond the snapshot: the escalation chain the
// approval was requested with, and the names of the API keys that decided it.
const RequestedChain = Schema.optionalKey(
  Schema.Array(Schema.String).annotate({
    description:
      "The reviewer groups its deadlines hand it to, in order (the chain of the policy or rule that required it, as it was then); the groups still to come are those after the first `escalation_level`. Absent without a chain"
  })
)

const KeyNames = Schema.optionalKey(
  Schema.Record(Schema.String, Schema.String).annotate({
    description:
      "The names of the API keys it names as deciders (`decided_by`, `decided_by_person`, `decided_for`, and those of `votes`), by key id, so a person reads who acted; keys without a name are left out. Absent when there are none"
  })
)

export const ApprovalStatus = Schema.Literals(["pending", "approved", "rejected", "expired"])
export type ApprovalStatus = typeof ApprovalStatus.Type

/** The approval snapshot: `GET /v1/agent-approvals/:id` and `approval` of every webhook event. */
export const ApprovalSnapshot = Schema.Struct({
  approval_id: Uuid,
  session_id: Uuid,
  step_id: Schema.String,
  task_id: Schema.NullOr(Uuid),
  status: ApprovalStatus,
  deadline_at: Timestamp.annotate({ description: "End of the current review window" }),
  expires_at: Timestamp.annotate({ description: "When the approval expires if nobody decides" }),
  timeout_action: TimeoutAction,
  rule: Schema.optionalKey(Schema.String.annotate({
    description:
      "The policy's rule on arguments that required this approval (its name); absent when the action class's settings did"
  })),
  decided_at: Schema.optionalKey(Timestamp),
  decided_by: Schema.optionalKey(Schema.String.annotate({
    description:
      "Who decided: the id of the API key, `console:<person>` for a console person, or `email:<reviewer address>` for a decision made through the link of a mail to the organization's reviewer address (the link of a mail to a group member's own address decides as that member)"
  })),
  ...DeciderFields,
  decision_reason: Schema.optionalKey(Schema.String.annotate({
    description:
      "Why, in the decider's words, when a reason was given with the decision (recognizable secrets in it are replaced by `[REDACTED]`)"
  })),
  ...QuorumFields,
  ...AssignmentSnapshotFields,
  ...EditSnapshotFields
})
export type ApprovalSnapshot = typeof ApprovalSnapshot.Type

export const ApprovalEventTypes = [
  "approval.requested",
  "approval.expiring",
  "approval.escalated",
  "approval.approved",
  "approval.rejected",
  "approval.expired"
] as const
export const ApprovalEventType = Schema.Literals(ApprovalEventTypes)
export type ApprovalEventType = typeof ApprovalEventType.Type

export const DecisionReason = Text.check(
  Schema.isMaxLength(MAX_DECISION_REASON_LENGTH, {
    message: `Expected a reason of at most ${MAX_DECISION_REASON_LENGTH} characters`
  })
).annotate({
  description:
    "Why (optional, at most 1 000 characters): carried by the snapshot as `decision_reason`, so it reaches the `approval.approved`/`approval.rejected` webhooks and the session's `approval:decided` event. Recognizable secrets in it are replaced by `[REDACTED]` before it is stored."
})

export const Decision = decisionOf({ reason: Schema.optionalKey(DecisionReason) })

/**
 * An approval in the organization's list and stream: the snapshot plus the
 * step it governs and where its deadlines stand.
 */
export const ApprovalListItem = Schema.Struct({
  ...ApprovalSnapshot.fields,
  tool: Schema.String,
  action_class: Schema.String,
  arguments: JsonValue,
  escalation: Schema.Literals(["none", "pending", "escalated"]).annotate({
    description:
      "`none`: the policy has no escalation; `pending`: another escalation is still to come at `deadline_at` (the approval gains review time and, with a chain, goes to the chain's next group); `escalated`: no escalation remains (the last one has fired) and `deadline_at` is its expiry"
  }),
  escalation_chain: RequestedChain,
  requested_at: Timestamp,
  key_names: KeyNames
})
export type ApprovalListItem = typeof ApprovalListItem.Type

/** One of the session's steps before the one an approval governs. */
export const EarlierStep = Schema.Struct({
  step_id: Schema.String,
  tool: Schema.String,
  action_class: Schema.String,
  resolution: Schema.Literals(["allow", "reject", "pending"]).annotate({
    description:
      "Where the step stands: `allow` or `reject` once decided (by policy, a person or a timeout action), else `pending`"
  }),
  rule: Schema.optionalKey(Schema.String.annotate({
    description:
      "The policy's rule on arguments that decided the step (its name); absent when the action class's settings did"
  })),
  outcome: Schema.optionalKey(
    Schema.Literals(["succeeded", "failed"]).annotate({
      description: "How its tool run ended, when the agent reported it"
    })
  ),
  created_at: Timestamp
})
export type EarlierStep = typeof EarlierStep.Type

/** The most earlier steps an approval's context lists (the latest ones). */
export const MAX_EARLIER_STEPS = 20

/** What a person needs to decide an approval: the approval, its task's name and the session's earlier steps. */
export const ApprovalContext = Schema.Struct({
  approval: ApprovalListItem,
  task_name: Schema.NullOr(Schema.String).annotate({
    description: "The name of the session's task; null when the session has none"
  }),
  earlier_steps: Schema.Array(EarlierStep).annotate({
    description: `The session's steps before this one, oldest first: the latest ${MAX_EARLIER_STEPS} of them`
  }),
  earlier_steps_total: Schema.Int.annotate({
    description: "How many steps the session had before this one (all of them, listed or not)"
  })
})
export type ApprovalContext = typeof ApprovalContext.Type

/** A closed approval in the history: the list item and its task's name. */
export const ApprovalHistoryItem = Schema.Struct({
  ...ApprovalListItem.fields,
  task_name: Schema.NullOr(Schema.String)
})
export type ApprovalHistoryItem = typeof ApprovalHistoryItem.Type

/** A stream event id: a number that grows with each event of the organization (not consecutive). */
const ApprovalStreamEventId = Text.check(
  Schema.isPattern(/^[0-9]{1,18}$/u, { message: "Expected an event id (a non-negative integer)" })
)

/** One event of the organization's approval stream, as the typed client yields it. */
const ApprovalStreamEvent = Schema.Struct({
  id: ApprovalStreamEventId,
  event: ApprovalEventType,
  data: Schema.fromJsonString(ApprovalListItem)
})
export type ApprovalStreamEvent = typeof ApprovalStreamEvent.Type

export class ApprovalsApi extends HttpApiGroup.make("approvals")
  .add(
    HttpApiEndpoint.get("list", "/v1/agent-approvals", {
      query: {
        status: Schema.optionalKey(ApprovalStatus.annotate({ description: "Only approvals with this status" })),
        assigned_to: AssignedToQuery,
        limit: Limit,
        cursor: Cursor
      },
      success: Schema.Struct({ approvals: Schema.Array(ApprovalListItem), next_cursor: NextCursor }),
      error: InvalidRequest
    }).pipe(
      requireScope(
        "agents.read",
        "The organization's approvals, oldest request first (pending ones in the order they must be decided), with the step's tool, action class and arguments, the deadlines, the escalation state and the timeout action."
      ),
      documented({ summary: "List approvals", response: Examples.approvalList })
    ),
    HttpApiEndpoint.get("stream", "/v1/agent-approvals/events/stream", {
      query: ResumeQuery,
      success: HttpApiSchema.StreamSse({ events: ApprovalStreamEvent }),
      error: [InvalidRequest, TooManyStreams]
    }).pipe(
      requireScope(
        "agents.read",
        "Server-sent events of every approval change in the organization: `approval.requested`, `approval.expiring`, `approval.escalated`, `approval.approved`, `approval.rejected`, `approval.expired`. Each has an `id:` (a number that grows with every event; not consecutive) and the approval as JSON `data` (as in the list). Resume with the `Last-Event-ID` header or `after`: exactly the later events are replayed, then live ones follow; `after=0` replays what is kept. Comment lines keep idle streams open. The stream ends when its key or console session is revoked (within `SVC_STREAM_AUTH_RECHECK`); open streams are capped per key or session, per organization and per server (429 `TOO_MANY_STREAMS`)."
      ),
      documented({
        summary: "Follow the organization's approval changes",
        response: Examples.approvalStreamEvent,
        errors: { 429: "Too many open streams (`TOO_MANY_STREAMS`; `limit` names the setting)." }
      })
    ),
    HttpApiEndpoint.get("history", "/v1/agent-approvals/history", {
      query: { limit: Limit, cursor: Cursor },
      success: Schema.Struct({ approvals: Schema.Array(ApprovalHistoryItem), next_cursor: NextCursor }),
      error: InvalidRequest
    }).pipe(
      requireScope(
        "agents.read",
        "The organization's closed approvals (approved, rejected, expired), the latest request first, with who decided, when and why (`decided_by`, `decided_at`, `decision_reason`), the step's tool and the task's name. An expired one names no decider: its `timeout_action` applied at `expires_at`."
      ),
      documented({ summary: "History of closed approvals", response: Examples.approvalHistory })
    ),
    HttpApiEndpoint.get("context", "/v1/agent-approvals/:approval_id/context", {
      params: { approval_id: Uuid },
      success: ApprovalContext,
      error: NotFound
    }).pipe(
      requireScope(
        "agents.read",
        `What a person needs to decide an approval: the approval (as in the list), the name of the session's task, and the session's steps before this one (the latest ${MAX_EARLIER_STEPS}, oldest first, with their resolution and reported outcome).`
      ),
      documented({
        summary: "Context of an approval",
        response: Examples.approvalContext,
        errors: { 404: notFound("approval") }
      })
    ),
    HttpApiEndpoint.get("get", "/v1/agent-approvals/:approval_id", {
      params: { approval_id: Uuid },
      success: ApprovalSnapshot,
      error: NotFound
    }).pipe(
      requireScope("agents.read", "The current snapshot of an approval."),
      documented({
        summary: "Get an approval",
        response: Examples.approval,
        errors: { 404: notFound("approval") }
      })
    ),
    HttpApiEndpoint.post("decide", "/v1/agent-approvals/:approval_id/decision", {
      params: { approval_id: Uuid },
      payload: Decision,
      success: ApprovalSnapshot,
      error: [
        NotFound,
        InvalidTransition,
        AlreadyVoted,
        NotAssigned,
        ArgumentsShapeMismatch,
        ArgumentsTooComplex,
        ValidationBusy
      ]
    }).pipe(
      requireScope(
        "approvals.decide",
        "A person approves or rejects a pending approval, optionally saying why (`reason`, at most 1 000 characters; the snapshot carries it as `decision_reason`). Approving may carry edited `arguments` (checked against the action class's `arguments_schema`; the snapshot then carries `approved_arguments`, `arguments_changed` and `arguments_digest`); rejecting may carry a `response` for the agent instead of running the tool. A decision on a closed approval is 409 INVALID_TRANSITION. When the approval needs several approvals (`quorum`), a decision is one vote: it stays pending until `quorum` distinct people have approved, one rejection rejects it, and the answer shows the `votes` so far and `approvals_remaining`; a person votes once, whichever of their credentials they use, and a delegate's vote is the delegator's (a second is 409 ALREADY_VOTED); such an approval takes no edited `arguments` (422 ARGUMENTS_SHAPE_MISMATCH): every approver approves the same arguments. An approval assigned to a reviewer group (`assigned_group`) is decided only by its members and their active delegates (403 NOT_ASSIGNED)."
      ),
      documented({
        summary: "Approve or reject",
        request: Examples.decision,
        response: Examples.decidedApproval,
        errors: {
          400:
            "`reason` is longer than 1 000 characters or holds a string that cannot be stored (`INVALID_REQUEST`, `field`: `reason`).",
          403:
            "The approval is assigned to a reviewer group the caller is not in, nor delegated to by a member (`NOT_ASSIGNED`, naming `assigned_group`).",
          409:
            "The approval is no longer pending (`INVALID_TRANSITION`), or, when it needs several approvals (`quorum`), this person, or the member this delegate stands in for, has already voted on it (`ALREADY_VOTED`).",
          422:
            "Edited `arguments` do not fit the action class's `arguments_schema`, or it declares none (`ARGUMENTS_SHAPE_MISMATCH`, `field` naming the first at fault, `errors` each), or checking them went over its budget (`ARGUMENTS_TOO_COMPLEX`).",
          429: "Too many schema checks of this organization are waiting (`VALIDATION_BUSY`, with `Retry-After`)."
        }
      })
    )
  )
  .middleware(Authentication)
  .annotate(OpenApi.Title, "Approvals")
{}
