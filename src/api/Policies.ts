/**
 * Approval policies: an action class's settings, its rules on arguments,
 * and the dry run that tries them on a sample step (docs/approvals.md,
 * "Policies", "Rules on arguments").
 */
import { Schema } from "effect"
import { HttpApiEndpoint, HttpApiGroup, OpenApi } from "effect/http-api"
import { ArgumentsSchema } from "./ApprovalEdits.ts"
import { AssignmentFields, escalationChainFits, escalationCount } from "./Assignment.ts"
import { JsonValue, Text, Timestamp, Uuid } from "./Common.ts"
import { documented } from "./Documentation.ts"
import {
  AnswerSchemaTooComplex,
  InvalidRequest,
  LimitReached,
  NotFound,
  PolicyRulesTooComplex,
  RateLimited,
  ValidationBusy
} from "./Errors.ts"
import * as Examples from "./Examples.ts"
import { Authentication, requireScope } from "./Security.ts"
import { Quorum } from "./Votes.ts"

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

/** The longest decision reason, in characters (UTF-16 code units, as JSON strings count them); a rejecting rule's reason too. */
export const MAX_DECISION_REASON_LENGTH = 1000

const Seconds = (minimum: number) => Schema.Int.check(Schema.isBetween({ minimum, maximum: 30 * 24 * 3600 }))

/** Whether the expiring notice comes before the end of the whole review time (every escalation's window included). */
export const noticeFits = (
  rule: Parameters<typeof escalationCount>[0] & {
    readonly review_seconds: number
    readonly expiring_notice_seconds: number
  }
) => rule.expiring_notice_seconds < rule.review_seconds + (rule.escalation_seconds ?? 0) * escalationCount(rule)

const EscalationSeconds = Schema.optionalKey(
  Seconds(1).annotate({
    description:
      "When set, a deadline escalates (`approval.escalated`) and grants this much more review time: once per group of `escalation_chain`, or once (keeping the group) without a chain"
  })
)

/** The notice rule, where a person must decide (a policy's `require_approval` mode, or a rule's result). */
const noticeCheck = Schema.makeFilter((input: Parameters<typeof noticeFits>[0] & { readonly mode?: PolicyMode }) =>
  (input.mode ?? "require_approval") !== "require_approval" || noticeFits(input) ? undefined : {
    path: ["expiring_notice_seconds"],
    issue: "expiring_notice_seconds must be shorter than review_seconds plus escalation_seconds for each escalation."
  }
)

/** The longest rule condition the schema accepts, in characters (`SVC_APPROVAL_RULE_MAX_LENGTH` may lower it). */
const MAX_RULE_CONDITION_LENGTH = 8000

/** The most rules a policy's schema accepts (`SVC_APPROVAL_RULES_MAX` may lower it). */
const MAX_POLICY_RULES = 200

/** A rule's deadline settings when a person must decide: as a policy's. */
const RequireApprovalResult = Schema.Struct({
  decision: Schema.Literal("require_approval"),
  review_seconds: Seconds(1).annotate({ description: "Length of the first review window" }),
  expiring_notice_seconds: Seconds(0).annotate({
    description: "`approval.expiring` is sent this long before the approval expires (0: no notice)"
  }),
  escalation_seconds: EscalationSeconds,
  timeout_action: TimeoutAction,
  quorum: Schema.optionalKey(Quorum),
  ...AssignmentFields
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
]).annotate({
  description:
    "What a matching rule decides: `allow`, `reject` with a reason, or `require_approval` with its own deadlines"
})
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

const PolicyRules = Schema.Array(PolicyRule).check(
  Schema.isMaxLength(MAX_POLICY_RULES),
  Schema.makeFilter((rules: ReadonlyArray<{ readonly name: string }>) =>
    new Set(rules.map((rule) => rule.name)).size === rules.length || "Expected rule names unique within the policy"
  )
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
    description:
      "`approval.expiring` is sent this long before the approval expires (0: no notice); with `require_approval`, shorter than the whole review time: `review_seconds` plus `escalation_seconds` times the escalations (the chain's length, at least 1)"
  }),
  escalation_seconds: EscalationSeconds,
  timeout_action: TimeoutAction,
  rules: Schema.optionalKey(PolicyRules),
  quorum: Schema.optionalKey(Quorum),
  ...AssignmentFields,
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
  session: Schema.optionalKey(
    Schema.Struct({
      id: Schema.optionalKey(Uuid)
    }).annotate({ description: "The session the conditions see as `session` (default: the zero UUID)" })
  ),
  policy: Schema.optionalKey(
    PolicyInput.annotate({ description: "A policy to try instead of the stored one; it is not stored" })
  )
})

export type DryRunInput = typeof DryRunInput.Type

export const DryRunAnswer = Schema.Struct({
  decision: Schema.Literals(["allow", "reject", "pending"]),
  rule: Schema.NullOr(Schema.String).annotate({
    description: "The rule that decided; null when the class's settings did"
  }),
  reason: Schema.optionalKey(Schema.String.annotate({ description: "A rejecting rule's reason" })),
  approval: Schema.optionalKey(
    Schema.Struct({
      review_seconds: Schema.Int,
      expiring_notice_seconds: Schema.Int,
      escalation_seconds: Schema.NullOr(Schema.Int),
      timeout_action: TimeoutAction,
      quorum: Schema.optionalKey(
        Schema.Int.annotate({ description: "How many distinct people must approve, when more than one" })
      ),
      ...AssignmentFields
    }).annotate({ description: "For `pending`: the deadline settings the approval would get" })
  ),
  error: Schema.optionalKey(
    Schema.Struct({ rule: Schema.String, message: Schema.String }).annotate({
      description: "A rule that could not be evaluated for this step (the class's settings decided)"
    })
  ),
  policy: Schema.Literals(["stored", "given", "default"]).annotate({
    description: "Which policy was evaluated: the stored one, the one in the request, or the default (no policy stored)"
  })
})
export type DryRunAnswer = typeof DryRunAnswer.Type

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
          400:
            "A rule's condition does not parse or type-check (`INVALID_REQUEST`, `field`: `rules[i].condition`, the detail naming the rule and the position), or is over a limit (`POLICY_RULES_TOO_COMPLEX`, `limit` naming the setting); `arguments_schema` is not JSON Schema (`INVALID_REQUEST`, `field`: `arguments_schema`) or is over a limit (`ANSWER_SCHEMA_TOO_COMPLEX`).",
          404:
            "A `group` or an `escalation_chain` entry names no reviewer group of the organization (`NOT_FOUND`, the detail naming the field, e.g. `escalation_chain[1]`).",
          409: "A policy for one more action class than `SVC_MAX_APPROVAL_POLICIES_PER_ORG` allows (`LIMIT_REACHED`)."
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
          400:
            "A rule of the given policy does not compile or is over a limit (`INVALID_REQUEST` or `POLICY_RULES_TOO_COMPLEX`, `field` naming the rule), or its `arguments_schema` is not JSON Schema or is over a limit (`INVALID_REQUEST` or `ANSWER_SCHEMA_TOO_COMPLEX`); evaluating the rules for the sample step went over their time or memory budget (`POLICY_RULES_TOO_COMPLEX`, `limit`: `SVC_APPROVAL_RULES_TIMEOUT` or `SVC_APPROVAL_RULES_HEAP_MB`, `field` naming the rule that was running).",
          429:
            "Over `SVC_APPROVAL_DRY_RUNS_PER_MINUTE` (`RATE_LIMITED`, with `Retry-After`), or the rule workers' queue holds this organization's share (`VALIDATION_BUSY`)."
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
