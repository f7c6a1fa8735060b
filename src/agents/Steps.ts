/**
 * A governed step as recorded (`agent_steps`): its columns, the step and
 * answer the API shows for them, and the answers to a step or an outcome
 * sent again: the same one is answered as it was first, another is refused.
 */
import { Effect, Schema } from "effect"
import { GovernedStep, type Step, type StepAnswer, StepDecision, type ToolOutcome } from "../api/Agents.ts"
import { InvalidRequest, InvalidTransition } from "../api/Errors.ts"
import { EditColumns, editStepMembers } from "../approvals/Edits.ts"
import { JsonColumn, rowsOf, Timestamp, TimestampOrNull } from "../platform/Rows.ts"

const StepColumns = Schema.Struct({
  step_id: Schema.String,
  tool: Schema.String,
  action_class: Schema.String,
  arguments: JsonColumn(GovernedStep.fields.arguments),
  decision: StepDecision,
  approval_id: Schema.NullOr(Schema.String),
  rule: Schema.NullOr(Schema.String),
  reason: Schema.NullOr(Schema.String),
  resolution: StepDecision,
  outcome: Schema.NullOr(Schema.Literals(["succeeded", "failed"])),
  outcome_body: Schema.NullOr(JsonColumn(Schema.Struct({
    result: Schema.optionalKey(Schema.Json),
    error: Schema.optionalKey(Schema.String),
    arguments_digest: Schema.optionalKey(Schema.String)
  }))),
  outcome_at: TimestampOrNull,
  approved_arguments: EditColumns.fields.approved_arguments,
  arguments_digest: EditColumns.fields.arguments_digest,
  response: EditColumns.fields.response,
  created_at: Timestamp
})
export type StepRow = typeof StepColumns.Type
export const StepRows = rowsOf("agent_steps", StepColumns)
export const StepPageRows = rowsOf("agent_steps", Schema.Struct({ ...StepColumns.fields, seq: Schema.String }))
export const STEP_COLUMNS =
  "step_id, tool, action_class, arguments, decision, approval_id, rule, reason, resolution, outcome, outcome_body, outcome_at, approved_arguments, arguments_digest, response, created_at"

export const toAnswer = (row: Pick<StepRow, "decision" | "approval_id" | "rule" | "reason">): StepAnswer => ({
  decision: row.decision,
  ...(row.approval_id === null ? {} : { approval_id: row.approval_id }),
  ...(row.rule === null ? {} : { rule: row.rule }),
  ...(row.reason === null ? {} : { reason: row.reason })
})

export const toStep = (row: StepRow): Step => ({
  step_id: row.step_id,
  tool: row.tool,
  action_class: row.action_class,
  arguments: row.arguments,
  decision: row.decision,
  ...(row.approval_id === null ? {} : { approval_id: row.approval_id }),
  resolution: row.resolution,
  ...(row.rule === null ? {} : { rule: row.rule }),
  ...(row.reason === null ? {} : { reason: row.reason }),
  ...editStepMembers(row),
  ...(row.outcome === null ? {} : {
    outcome: {
      status: row.outcome,
      ...(row.outcome_body?.result === undefined ? {} : { result: row.outcome_body.result }),
      ...(row.outcome_body?.error === undefined ? {} : { error: row.outcome_body.error }),
      ...(row.outcome_body?.arguments_digest === undefined
        ? {}
        : { arguments_digest: row.outcome_body.arguments_digest }),
      reported_at: row.outcome_at ?? row.created_at
    }
  }),
  created_at: row.created_at
})

const sameJson = (a: unknown, b: unknown): boolean => {
  if (a === b) return true
  if (typeof a !== "object" || typeof b !== "object" || a === null || b === null) return false
  if (Array.isArray(a) !== Array.isArray(b)) return false
  if (Array.isArray(a)) {
    const bb = b as Array<unknown>
    return a.length === bb.length && a.every((value, i) => sameJson(value, bb[i]))
  }
  const ka = Object.keys(a).sort()
  const kb = Object.keys(b).sort()
  return ka.length === kb.length &&
    ka.every((key, i) =>
      key === kb[i] && sameJson((a as Record<string, unknown>)[key], (b as Record<string, unknown>)[key])
    )
}

/** The original answer to a re-sent step, or 400 when it is not the same step. */
export const replay = (
  existing: Pick<StepRow, "tool" | "action_class" | "arguments" | "decision" | "approval_id" | "rule" | "reason">,
  step: GovernedStep
) =>
  existing.tool === step.tool && existing.action_class === step.action_class &&
    sameJson(existing.arguments, step.arguments)
    ? Effect.succeed(toAnswer(existing))
    : Effect.fail(
      new InvalidRequest({
        field: "step_id",
        detail: "This step_id was already sent in this session with another tool, action class or arguments."
      })
    )

/** An outcome reported again: the step as it is when it is the same outcome, else the transition refused. */
export const reportedAgain = (existing: StepRow, status: ToolOutcome["status"]) =>
  existing.outcome !== null && existing.outcome === status
    ? Effect.succeed(toStep(existing))
    : Effect.fail(
      new InvalidTransition({
        status_now: existing.outcome ?? existing.resolution,
        detail: existing.outcome !== null
          ? `The step's outcome was already reported as ${existing.outcome}.`
          : `The step's resolution is ${existing.resolution}; only an allowed step has a tool outcome.`
      })
    )

/** An outcome whose `arguments_digest` is not the step's (`Edits.ts`): it is bound to the arguments that were approved. */
export const digestRefused = (existing: StepRow) =>
  Effect.fail(
    new InvalidRequest({
      field: "arguments_digest",
      detail: existing.arguments_digest === null
        ? "The step was not approved with edited arguments: its tool runs with the step's own, and its outcome carries no arguments_digest."
        : "A person approved the step with edited arguments: report the outcome of the tool run with its approved_arguments, with their arguments_digest."
    })
  )
