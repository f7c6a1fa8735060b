/**
 * Approval policies, approvals and the approval lifecycle events
 * (docs/approvals.md, "Policies", "Deciding"; the snapshot in
 * docs/webhooks.md, "Events").
 */
import { Schema } from "effect"
import { HttpApiEndpoint, HttpApiGroup, HttpApiSchema, OpenApi } from "effect/http-api"
import { Cursor, JsonValue, Limit, NextCursor, Text, Timestamp, ResumeQuery, Uuid } from "./Common.ts"
import {
  AnswerSchemaTooComplex,
  InvalidRequest,
  InvalidTransition,
  LimitReached,
  NotFound,
  PolicyRulesTooComplex,
  RateLimited,
  TooManyStreams,
  ValidationBusy
} from "./Errors.ts"
import { ArgumentsSchema, ArgumentsShapeMismatch, ArgumentsTooComplex, decisionOf, EditSnapshotFields } from "./ApprovalEdits.ts"
import { Authentication, requireScope } from "./Security.ts"
import { documented, notFound } from "./Documentation.ts"
import * as Examples from "./Examples.ts"
import { AlreadyVoted, DeciderFields, Quorum, QuorumFields } from "./Votes.ts"
import { KeyNames, RequestedChain } from "./ApprovalRecord.ts"
import { AssignedToQuery, AssignmentFields, AssignmentSnapshotFields, escalationChainFits, escalationCount, NotAssigned } from "./Reviewers.ts"

export const PolicyMode = Schema.Literals(["allow", "reject", "require_approval"])
export type PolicyMode = typeof PolicyMode.Type

export const TimeoutAction = Schema.Literals(["reject", "allow"])
export type TimeoutAction = typeof TimeoutAction.Type

/** An action class names a kind of tool action, e.g. `payments.refund`. */
export const ActionClass = Text.check(
  Schema.isPattern(/^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$/u, {
    message: "Expected 1 to 128 letters, digits, '.', '_', ':' or '-', starting with a letter or digit"
  })
)

/** The longest decision reason, in characters (UTF-16 code units, as JSON strings count them). */
export const MAX_DECISION_REASON_LENGTH = 1000

const Seconds = (minimum: number) =>
  Schema.Int.check(Schema.isBetween({ minimum, maximum: 30 * 24 * 3600 }))

/** Whether the expiring notice comes before the end of the whole review time (every escalation's window included). */
export const noticeFits = (
  rule: Parameters<typeof escalationCount>[0] & { readonly review_seconds: number; readonly expiring_notice_seconds: number }
) => rule.expiring_notice_seconds < rule.review_seconds + (rule.escalation_seconds ?? 0) * escalationCount(rule)

const EscalationSeconds = Schema.optionalKey(Seconds(1).annotate({
  description: "When set, a deadline escalates (`approval.escalated`) and grants this much more review time: once per group of `escalation_chain`, or once (keeping the group) without a chain"
}))

/** The notice rule, where a person must decide (a policy's `require_approval` mode, or a rule's result). */
const noticeCheck = Schema.makeFilter((input: Parameters<typeof noticeFits>[0] & { readonly mode?: PolicyMode }) =>
  (input.mode ?? "require_approval") !== "require_approval" || noticeFits(input) ? undefined : {
    path: ["expiring_notice_seconds"],
    issue: "expiring_notice_seconds must be shorter than review_seconds plus escalation_seconds for each escalation."
  })

/** The longest rule condition the schema accepts, in characters (`SVC_APPROVAL_RULE_MAX_LENGTH` may lower it). */
export const MAX_RULE_CONDITION_LENGTH = 8000

/** The most rules a policy's schema accepts (`SVC_APPROVAL_RULES_MAX` may lower it). */
export const MAX_POLICY_RULES = 200

/** A rule's deadline settings when a person must decide: as a policy's. */
const RequireApprovalResult = Schema.Struct({
  decision: Schema.Literal("require_approval"),
  review_seconds: Seconds(1).annotate({ description: "Length of the first review window" }),
  expiring_notice_seconds: Seconds(0).annotate({
    description: "`approval.expiring` is sent this long before the approval expires (0: no notice)"
  }),
  escalation_seconds: EscalationSeconds,
  timeout_action: TimeoutAction,
  quorum: Schema.optionalKey(Quorum), ...AssignmentFields
}).check(noticeCheck, escalationChainFits)

export const RuleResult = Schema.Union([
  Schema.Struct({ decision: Schema.Literal("allow") }),
  Schema.Struct({
    decision: Schema.Literal("reject"),
    reason: Text.check(Schema.isMinLength(1), Schema.isMaxLength(MAX_DECISION_REASON_LENGTH)).annotate({
      description: "Why the step is refused: the step's answer carries it as `reason`"
    })
  }),
  RequireApprovalResult
]).annotate({ description: "What a matching rule decides: `allow`, `reject` with a reason, or `require_approval` with its own deadlines" })
export type RuleResult = typeof RuleResult.Type

export const PolicyRule = Schema.Struct({
  name: Text.check(
    Schema.isPattern(/^[A-Za-z0-9][A-Za-z0-9._:-]{0,63}$/u, {
      message: "Expected 1 to 64 letters, digits, '.', '_', ':' or '-', starting with a letter or digit"
    })
  ).annotate({ description: "Names the rule in the answers it decides (`rule`); unique within the policy" }),
  condition: Text.check(Schema.isMinLength(1), Schema.isMaxLength(MAX_RULE_CONDITION_LENGTH)).annotate({
    description:
      "A CEL expression of type bool over `tool` (string), `arguments` (the step's arguments, dynamic) and `session` (a map with the session's `id`), e.g. `arguments.amount > 100.0`"
  }),
  result: RuleResult
})
export type PolicyRule = typeof PolicyRule.Type

export const PolicyRules = Schema.Array(PolicyRule).check(
  Schema.isMaxLength(MAX_POLICY_RULES),
  Schema.makeFilter((rules: ReadonlyArray<{ readonly name: string }>) =>
    new Set(rules.map((rule) => rule.name)).size === rules.length || "Expected rule names unique within the policy")
).annotate({
  description:
    "Evaluated in order before the class's settings: the first rule whose condition holds decides the step; when none does (or one cannot be evaluated for the step), the settings above decide"
})

// The notice rule compares members, which JSON Schema cannot: the
// description of `expiring_notice_seconds` states it, and the typed client checks it.
export const PolicyInput = Schema.Struct({
  mode: PolicyMode,
  review_seconds: Seconds(1).annotate({ description: "Length of the first review window" }),
  expiring_notice_seconds: Seconds(0).annotate({
    description: "`approval.expiring` is sent this long before the approval expires (0: no notice); with `require_approval`, shorter than the whole review time: `review_seconds` plus `escalation_seconds` times the escalations (the chain's length, at least 1)"
  }),
  escalation_seconds: EscalationSeconds,
  timeout_action: TimeoutAction,
  rules: Schema.optionalKey(PolicyRules),
  quorum: Schema.optionalKey(Quorum), ...AssignmentFields,
  arguments_schema: Schema.optionalKey(ArgumentsSchema)
}).check(escalationChainFits).check(noticeCheck)
export type PolicyInput = typeof PolicyInput.Type

export const Policy = Schema.Struct({
  action_class: Schema.String,
  ...PolicyInput.fields,
  rules: PolicyRules,
  updated_at: Timestamp
})
export type Policy = typeof Policy.Type

/** A policy's dry run: a sample step, and the policy to try (the stored one when absent). */
export const DryRunInput = Schema.Struct({
  tool: Text.check(Schema.isMinLength(1), Schema.isMaxLength(200)),
  arguments: JsonValue,
  session: Schema.optionalKey(Schema.Struct({
    id: Schema.optionalKey(Uuid)
  }).annotate({ description: "The session the conditions see as `session` (default: the zero UUID)" })),
  policy: Schema.optionalKey(PolicyInput.annotate({ description: "A policy to try instead of the stored one; it is not stored" }))
})

export type DryRunInput = typeof DryRunInput.Type

export const DryRunAnswer = Schema.Struct({
  decision: Schema.Literals(["allow", "reject", "pending"]),
  rule: Schema.NullOr(Schema.String).annotate({ description: "The rule that decided; null when the class's settings did" }),
  reason: Schema.optionalKey(Schema.String.annotate({ description: "A rejecting rule's reason" })),
  approval: Schema.optionalKey(Schema.Struct({
    review_seconds: Schema.Int,
    expiring_notice_seconds: Schema.Int,
    escalation_seconds: Schema.NullOr(Schema.Int),
    timeout_action: TimeoutAction,
    quorum: Schema.optionalKey(Schema.Int.annotate({ description: "How many distinct people must approve, when more than one" })), ...AssignmentFields
  }).annotate({ description: "For `pending`: the deadline settings the approval would get" })),
  error: Schema.optionalKey(Schema.Struct({ rule: Schema.String, message: Schema.String }).annotate({
    description: "A rule that could not be evaluated for this step (the class's settings decided)"
  })),
  policy: Schema.Literals(["stored", "given", "default"]).annotate({
    description: "Which policy was evaluated: the stored one, the one in the request, or the default (no policy stored)"
  })
})
export type DryRunAnswer = typeof DryRunAnswer.Type

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
    description: "The policy's rule on arguments that required this approval (its name); absent when the action class's settings did"
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
    description: "Where the step stands: `allow` or `reject` once decided (by policy, a person or a timeout action), else `pending`"
  }),
  rule: Schema.optionalKey(Schema.String.annotate({
    description: "The policy's rule on arguments that decided the step (its name); absent when the action class's settings did"
  })),
  outcome: Schema.optionalKey(Schema.Literals(["succeeded", "failed"]).annotate({
    description: "How its tool run ended, when the agent reported it"
  })),
  created_at: Timestamp
})
export type EarlierStep = typeof EarlierStep.Type

/** The most earlier steps an approval's context lists (the latest ones). */
export const MAX_EARLIER_STEPS = 20

/** What a person needs to decide an approval: the approval, its task's name and the session's earlier steps. */
export const ApprovalContext = Schema.Struct({
  approval: ApprovalListItem,
  task_name: Schema.NullOr(Schema.String).annotate({ description: "The name of the session's task; null when the session has none" }),
  earlier_steps: Schema.Array(EarlierStep).annotate({
    description: `The session's steps before this one, oldest first: the latest ${MAX_EARLIER_STEPS} of them`
  }),
  earlier_steps_total: Schema.Int.annotate({ description: "How many steps the session had before this one (all of them, listed or not)" })
})
export type ApprovalContext = typeof ApprovalContext.Type

/** A closed approval in the history: the list item and its task's name. */
export const ApprovalHistoryItem = Schema.Struct({
  ...ApprovalListItem.fields,
  task_name: Schema.NullOr(Schema.String)
})
export type ApprovalHistoryItem = typeof ApprovalHistoryItem.Type

/** A stream event id: a number that grows with each event of the organization (not consecutive). */
export const ApprovalStreamEventId = Text.check(
  Schema.isPattern(/^[0-9]{1,18}$/u, { message: "Expected an event id (a non-negative integer)" })
)

/** The events of the organization's approval stream: the webhook event types. */
export const ApprovalStreamEventNames = ApprovalEventTypes

/** One event of the organization's approval stream, as the typed client yields it. */
export const ApprovalStreamEvent = Schema.Struct({
  id: ApprovalStreamEventId,
  event: ApprovalEventType,
  data: Schema.fromJsonString(ApprovalListItem)
})
export type ApprovalStreamEvent = typeof ApprovalStreamEvent.Type

export class ApprovalPoliciesApi extends HttpApiGroup.make("approvalPolicies")
  .add(
    HttpApiEndpoint.put("put", "/v1/approval-policies/:action_class", {
      params: { action_class: ActionClass },
      payload: PolicyInput,
      success: Policy,
      error: [InvalidRequest, NotFound, LimitReached, PolicyRulesTooComplex, AnswerSchemaTooComplex, ValidationBusy]
    }).pipe(
      requireScope(
        "org_config.write",
        "Sets the organization's approval policy for an action class. An action class without a policy requires approval (review 900 s, expiring notice 300 s, no escalation, timeout action reject). An organization has policies for at most `SVC_MAX_APPROVAL_POLICIES_PER_ORG` action classes (default 1000)."
      ),
      documented({
        summary: "Set an approval policy",
        request: Examples.policyInput,
        response: Examples.policy,
        errors: {
          400: "A rule's condition does not parse or type-check (`INVALID_REQUEST`, `field`: `rules[i].condition`, the detail naming the rule and the position), or is over a limit (`POLICY_RULES_TOO_COMPLEX`, `limit` naming the setting); `arguments_schema` is not JSON Schema (`INVALID_REQUEST`, `field`: `arguments_schema`) or is over a limit (`ANSWER_SCHEMA_TOO_COMPLEX`).",
          404: "A `group` or an `escalation_chain` entry names no reviewer group of the organization (`NOT_FOUND`, the detail naming the field, e.g. `escalation_chain[1]`).", 409: "A policy for one more action class than `SVC_MAX_APPROVAL_POLICIES_PER_ORG` allows (`LIMIT_REACHED`)."
        }
      })
    ),
    HttpApiEndpoint.post("dryRun", "/v1/approval-policies/:action_class/dry-run", {
      params: { action_class: ActionClass },
      payload: DryRunInput,
      success: DryRunAnswer,
      error: [InvalidRequest, PolicyRulesTooComplex, AnswerSchemaTooComplex, ValidationBusy, RateLimited]
    }).pipe(
      requireScope(
        "org_config.read",
        "Evaluates the action class's policy (the stored one, or `policy` from the request) against a sample step, as a governed step would be decided: which rule decides and what it answers. Nothing is created or stored. An organization makes at most `SVC_APPROVAL_DRY_RUNS_PER_MINUTE` dry runs a minute (default 60); the rules run within `SVC_APPROVAL_RULES_TIMEOUT` in all and the rule workers' heap (`SVC_APPROVAL_RULES_HEAP_MB`)."
      ),
      documented({
        summary: "Try a policy on a sample step",
        request: Examples.dryRunInput,
        response: Examples.dryRunAnswer,
        errors: {
          400: "A rule of the given policy does not compile or is over a limit (`INVALID_REQUEST` or `POLICY_RULES_TOO_COMPLEX`, `field` naming the rule), or its `arguments_schema` is not JSON Schema or is over a limit (`INVALID_REQUEST` or `ANSWER_SCHEMA_TOO_COMPLEX`); evaluating the rules for the sample step went over their time or memory budget (`POLICY_RULES_TOO_COMPLEX`, `limit`: `SVC_APPROVAL_RULES_TIMEOUT` or `SVC_APPROVAL_RULES_HEAP_MB`, `field` naming the rule that was running).",
          429: "Over `SVC_APPROVAL_DRY_RUNS_PER_MINUTE` (`RATE_LIMITED`, with `Retry-After`), or the rule workers' queue holds this organization's share (`VALIDATION_BUSY`)."
        }
      })
    ),
    HttpApiEndpoint.get("list", "/v1/approval-policies", {
      success: Schema.Struct({ policies: Schema.Array(Policy) })
    }).pipe(
      requireScope("org_config.read", "Lists the organization's approval policies by action class."),
      documented({ summary: "List approval policies", response: Examples.policyList })
    )
  )
  .middleware(Authentication)
  .annotate(OpenApi.Title, "Approval policies")
{}

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
      documented({ summary: "Context of an approval", response: Examples.approvalContext, errors: { 404: notFound("approval") } })
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
      error: [NotFound, InvalidTransition, AlreadyVoted, NotAssigned, ArgumentsShapeMismatch, ArgumentsTooComplex, ValidationBusy]
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
          400: "`reason` is longer than 1 000 characters or holds a string that cannot be stored (`INVALID_REQUEST`, `field`: `reason`).",
          403: "The approval is assigned to a reviewer group the caller is not in, nor delegated to by a member (`NOT_ASSIGNED`, naming `assigned_group`).",
          409: "The approval is no longer pending (`INVALID_TRANSITION`), or, when it needs several approvals (`quorum`), this person, or the member this delegate stands in for, has already voted on it (`ALREADY_VOTED`).",
          422: "Edited `arguments` do not fit the action class's `arguments_schema`, or it declares none (`ARGUMENTS_SHAPE_MISMATCH`, `field` naming the first at fault, `errors` each), or checking them went over its budget (`ARGUMENTS_TOO_COMPLEX`).",
          429: "Too many schema checks of this organization are waiting (`VALIDATION_BUSY`, with `Retry-After`)."

        }
      })
    )
  )
  .middleware(Authentication)
  .annotate(OpenApi.Title, "Approvals")
{}
