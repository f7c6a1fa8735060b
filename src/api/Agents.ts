/**
 * Agent sessions, governed steps, tool outcomes and the session event stream
 * (docs/approvals.md, "Governed steps", "Tool outcomes", "The session stream").
 */
import { Schema } from "effect"
import { HttpApiEndpoint, HttpApiGroup, HttpApiSchema, OpenApi } from "effect/http-api"
import { ArgumentsDigest, EditStepFields } from "./ApprovalEdits.ts"
import { Cursor, IntegerFromDigits, JsonValue, NextCursor, ResumeQuery, Text, Timestamp, Uuid } from "./Common.ts"
import { documented, notFound } from "./Documentation.ts"
import { InvalidRequest, InvalidTransition, NotFound, TooManyStreams, ValidationBusy } from "./Errors.ts"
import * as Examples from "./Examples.ts"
import { ActionClass } from "./Policies.ts"
import { Authentication, requireScope } from "./Security.ts"

export const StepId = Text.check(Schema.isMinLength(1), Schema.isMaxLength(200))

export const StepDecision = Schema.Literals(["allow", "reject", "pending"])
export type StepDecision = typeof StepDecision.Type

export const Session = Schema.Struct({
  id: Uuid,
  task_id: Schema.NullOr(Uuid),
  created_at: Timestamp
})
export type Session = typeof Session.Type

const CreateSession = Schema.Struct({
  task_id: Schema.optionalKey(Uuid)
})

export const GovernedStep = Schema.Struct({
  step_id: StepId.annotate({ description: "The agent's id for the step; re-sending it returns the original answer" }),
  tool: Text.check(Schema.isMinLength(1), Schema.isMaxLength(200)),
  action_class: ActionClass,
  arguments: JsonValue
})
export type GovernedStep = typeof GovernedStep.Type

/** The governed-step answer: `allow` or `reject` at once, or `pending` with the approval to wait for. */
export const StepAnswer = Schema.Struct({
  decision: StepDecision,
  approval_id: Schema.optionalKey(Uuid),
  rule: Schema.optionalKey(Schema.String.annotate({
    description: "The name of the policy's rule on arguments that decided; absent when the action class's settings did"
  })),
  reason: Schema.optionalKey(
    Schema.String.annotate({ description: "Why a rule rejected the step, in the rule's words" })
  )
})
export type StepAnswer = typeof StepAnswer.Type

const OutcomeStatus = Schema.Literals(["succeeded", "failed"])

export const ToolOutcome = Schema.Struct({
  status: OutcomeStatus,
  result: Schema.optionalKey(JsonValue),
  error: Schema.optionalKey(Text.check(Schema.isMaxLength(4000))),
  arguments_digest: Schema.optionalKey(ArgumentsDigest.annotate({
    description:
      "The `arguments_digest` of the arguments the tool ran with, as the step carries it: required when a person approved the step with edited arguments (the outcome is then bound to them), refused otherwise"
  }))
})
export type ToolOutcome = typeof ToolOutcome.Type

export const Step = Schema.Struct({
  step_id: Schema.String,
  tool: Schema.String,
  action_class: Schema.String,
  arguments: JsonValue,
  decision: StepDecision,
  approval_id: Schema.optionalKey(Uuid),
  resolution: StepDecision.annotate({
    description:
      "Where the step stands now: `allow` or `reject` once decided (by policy, a person or the timeout action), else `pending`"
  }),
  rule: Schema.optionalKey(Schema.String.annotate({
    description:
      "The policy's rule on arguments that decided the step (its name); absent when the action class's settings did"
  })),
  reason: Schema.optionalKey(Schema.String.annotate({ description: "A rejecting rule's reason" })),
  ...EditStepFields,
  outcome: Schema.optionalKey(Schema.Struct({ ...ToolOutcome.fields, reported_at: Timestamp })),
  created_at: Timestamp
})
export type Step = typeof Step.Type

/** Steps per page of a session: at most 100; without `limit`, 100 (a session of up to 100 steps reads as it always did). */
export const STEPS_PAGE_DEFAULT = 100

const StepsLimit = Schema.optionalKey(
  IntegerFromDigits({ minimum: 1, maximum: 100, description: "Steps per page, 1 to 100 (default 100)" })
)

export const SessionDetail = Schema.Struct({
  ...Session.fields,
  steps: Schema.Array(Step).annotate({
    description: "A page of the session's steps, oldest first: the first page without `cursor`"
  }),
  next_cursor: NextCursor.annotate({
    description: "Pass as `cursor` for the next page of steps; `null` on the last page"
  })
})
export type SessionDetail = typeof SessionDetail.Type

/** A stream event id: the session's event sequence number (1, 2, 3, ...). */
const EventId = Text.check(
  Schema.isPattern(/^[0-9]{1,18}$/u, { message: "Expected an event id (a non-negative integer)" })
)

export const SessionEventNames = [
  "step:governed",
  "tool:succeeded",
  "tool:failed",
  "approval:decided",
  "approval:voted",
  "approval:expired"
] as const

/** One event of the session stream, as the typed client yields it. */
const SessionStreamEvent = Schema.Struct({
  id: EventId,
  event: Schema.Literals(SessionEventNames),
  data: Schema.fromJsonString(JsonValue)
})
export type SessionStreamEvent = typeof SessionStreamEvent.Type

const SessionParams = { session_id: Uuid }

export class AgentSessionsApi extends HttpApiGroup.make("agentSessions")
  .add(
    HttpApiEndpoint.post("create", "/v1/agent-sessions", {
      payload: CreateSession,
      success: Session.pipe(HttpApiSchema.status(201)),
      error: NotFound
    }).pipe(
      requireScope("agents.write", "Starts an agent session, optionally for a task."),
      documented({
        summary: "Start an agent session",
        request: Examples.createSession,
        response: Examples.session,
        errors: { 404: "`task_id` names no task in your organization." }
      })
    ),
    HttpApiEndpoint.get("get", "/v1/agent-sessions/:session_id", {
      params: SessionParams,
      query: { limit: StepsLimit, cursor: Cursor },
      success: SessionDetail,
      error: [NotFound, InvalidRequest]
    }).pipe(
      requireScope(
        "agents.read",
        "A session with its governed steps, oldest first, a page at a time: `limit` steps (default and most 100), then `next_cursor` for the next page (`null` on the last)."
      ),
      documented({
        summary: "Get a session",
        response: Examples.sessionDetail,
        errors: { 404: notFound("session") }
      })
    ),
    HttpApiEndpoint.post("governStep", "/v1/agent-sessions/:session_id/steps", {
      params: SessionParams,
      payload: GovernedStep,
      success: StepAnswer,
      error: [NotFound, InvalidRequest, ValidationBusy]
    }).pipe(
      requireScope(
        "agents.write",
        "Asks whether a step may run. The answer follows the organization's policy for the action class (its rules on arguments first: `rule` names the one that decided, `reason` gives a rejecting rule's reason): `allow`, `reject`, or `pending` with an `approval_id`. The policy's rules run within `SVC_APPROVAL_RULES_TIMEOUT` in all and the rule workers' heap; a rule that cannot be evaluated, or runs out of that budget, leaves the decision to the class's settings. Re-sending a `step_id` returns the original answer (without evaluating the rules again); re-sending it with another tool, action class or arguments is 400."
      ),
      documented({
        summary: "Ask to run a governed step",
        request: Examples.governedStep,
        response: Examples.stepAnswer,
        errors: {
          429:
            "The rule workers' queue holds this organization's share (`VALIDATION_BUSY`, `limit`: `SVC_APPROVAL_RULES_QUEUE`, with `Retry-After`)."
        }
      })
    ),
    HttpApiEndpoint.post("reportOutcome", "/v1/agent-sessions/:session_id/steps/:step_id/outcome", {
      params: { ...SessionParams, step_id: StepId },
      payload: ToolOutcome,
      success: Step,
      error: [NotFound, InvalidTransition, InvalidRequest]
    }).pipe(
      requireScope(
        "agents.write",
        "Reports how an allowed step's tool run ended (`tool:succeeded` or `tool:failed` on the session stream). Only a step whose resolution is `allow` has an outcome; reporting the same status again returns the step. A step a person approved with edited arguments carries `approved_arguments` and `arguments_digest`: its tool runs with those, and its outcome must carry that `arguments_digest` (400 `INVALID_REQUEST`, `field`: `arguments_digest`, when it is missing or another; also when the step has no digest)."
      ),
      documented({
        summary: "Report a step's outcome",
        request: Examples.toolOutcome,
        response: Examples.step,
        errors: {
          400:
            "`arguments_digest` is missing for a step approved with edited arguments, or is not the step's (`INVALID_REQUEST`, `field`: `arguments_digest`)."
        }
      })
    ),
    HttpApiEndpoint.get("stream", "/v1/agent-sessions/:session_id/events/stream", {
      params: SessionParams,
      query: ResumeQuery,
      success: HttpApiSchema.StreamSse({ events: SessionStreamEvent }),
      error: [NotFound, InvalidRequest, TooManyStreams]
    }).pipe(
      requireScope(
        "agents.read",
        "Server-sent events of the session: `step:governed`, `tool:succeeded`, `tool:failed`, `approval:decided`, `approval:voted` (one vote of several an approval needs, when it stays pending), `approval:expired`. Each has an `id:` (the session's event number) and JSON `data`. Resume with the `Last-Event-ID` header or `after`: exactly the later events are replayed, then live ones follow. Comment lines keep idle streams open. The stream ends when its key or console session is revoked (within `SVC_STREAM_AUTH_RECHECK`); open streams are capped per key or session, per organization and per server (429 `TOO_MANY_STREAMS`)."
      ),
      documented({
        summary: "Follow a session's events",
        response: Examples.sessionEvent,
        errors: {
          404: notFound("session"),
          429: "Too many open streams (`TOO_MANY_STREAMS`; `limit` names the setting)."
        }
      })
    )
  )
  .middleware(Authentication)
  .annotate(OpenApi.Title, "Agent sessions")
{}
