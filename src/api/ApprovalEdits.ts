/**
 * Approve with edits, or answer (docs/approvals.md, "Approve with edits, or
 * answer"): the JSON Schema a policy declares for its tool's arguments, what
 * a decision may carry beside approve or reject, and what the approval and
 * the step then show.
 */
import { Schema } from "effect"
import { JsonObject, JsonValue, Text } from "./Common.ts"
import { FieldIssue, limitFields, Problem } from "./Errors.ts"

export const ArgumentsSchema = JsonObject.annotate({
  description:
    "The JSON Schema of the tool's arguments (draft 2020-12 unless `$schema` says 2019-09 or draft-07), checked and bounded as a task's `answer_schema` (`SVC_ANSWER_SCHEMA_MAX_*`). When set, a person may approve with edited `arguments`, which must fit it; without it, edits are refused."
})

export type ArgumentsSchema = typeof ArgumentsSchema.Type

/** The SHA-256 of arguments as JSON with object members sorted by name, no whitespace: lowercase hex. */
export const ArgumentsDigest = Text.check(
  Schema.isPattern(/^[0-9a-f]{64}$/u, { message: "Expected a SHA-256 digest: 64 lowercase hexadecimal digits" })
)

/** The longest edited `arguments` a decision takes, in characters of compact JSON (escapes not counted). */
export const MAX_EDITED_ARGUMENTS_CHARACTERS = 262_144

/** The longest `response` a rejection takes, in characters of compact JSON (escapes not counted). */
const MAX_RESPONSE_CHARACTERS = 65_536

/**
 * The length of `value` as compact JSON (escapes not counted), counted up
 * to a little past `max`: one iterative walk that stops there, so its cost
 * is bounded by `max`, not by the value.
 */
const jsonLength = (value: unknown, max: number): number => {
  let length = 0
  const stack: Array<unknown> = [value]
  while (stack.length > 0 && length <= max) {
    const item = stack.pop()
    if (typeof item === "string") length += item.length + 2
    else if (typeof item === "number") length += String(item).length
    else if (typeof item === "boolean") length += item ? 4 : 5
    else if (item === null || item === undefined) length += 4
    else if (Array.isArray(item)) {
      length += 1 + item.length
      for (const child of item) stack.push(child)
    } else {
      length += 1
      for (const key in item) {
        length += key.length + 4
        stack.push((item as Record<string, unknown>)[key])
      }
    }
  }
  return length
}

const jsonWithin = (max: number) =>
  Schema.makeFilter<unknown>(
    (value) => jsonLength(value, max) > max ? `Expected at most ${max} characters as JSON` : undefined,
    { description: `at most ${max} characters as compact JSON` }
  )

const notNull = Schema.makeFilter<unknown>(
  (value) => value === null ? "Expected a JSON value other than null" : undefined,
  {
    description: "not null"
  }
)

const EditedArguments = JsonValue.check(notNull, jsonWithin(MAX_EDITED_ARGUMENTS_CHARACTERS)).annotate({
  description:
    `The arguments the tool is to run with instead of the step's (at most ${MAX_EDITED_ARGUMENTS_CHARACTERS} characters as compact JSON), checked against the action class's \`arguments_schema\` (422 \`ARGUMENTS_SHAPE_MISMATCH\` naming the field; refused when the class declares none)`
})

const DecisionResponse = JsonValue.check(notNull, jsonWithin(MAX_RESPONSE_CHARACTERS)).annotate({
  description:
    `An answer for the agent instead of running the tool (any JSON but null, e.g. a text; at most ${MAX_RESPONSE_CHARACTERS} characters as compact JSON). The step is resolved \`reject\` and carries it as \`response\`.`
})

/**
 * A decision: `approve`, optionally with edited `arguments`, or `reject`,
 * optionally with a `response` (a union on `decision`, so the OpenAPI
 * document shows which member goes with which), each with `reason`.
 */
export const decisionOf = <F extends Schema.Struct.Fields>(fields: F) =>
  Schema.Union([
    Schema.Struct({
      ...fields,
      decision: Schema.Literal("approve"),
      arguments: Schema.optionalKey(EditedArguments)
    }).annotate({ description: "Approve, optionally with edited arguments" }),
    Schema.Struct({
      ...fields,
      decision: Schema.Literal("reject"),
      response: Schema.optionalKey(DecisionResponse)
    }).annotate({ description: "Reject, optionally with a response for the agent" })
  ])

const ApprovedArguments = JsonValue.annotate({
  description:
    "The arguments a person approved the tool to run with when they edited the step's: the tool runs with these, not the step's"
})
const ArgumentsChanged = Schema.Array(Schema.String).annotate({
  description:
    "With `approved_arguments`: what the edit changed, as JSON Pointers (RFC 6901) into the arguments, each a member or item added, removed or replaced (`\"\"` when the whole value was). At most 100 pointers of 8 192 characters together: a longer diff collapses to the top-level members or items that differ, or to `[\"\"]`"
})
const DigestMember = Schema.String.annotate({
  description:
    "With `approved_arguments`: their SHA-256 (JSON with members sorted by name, no whitespace), lowercase hex. The step's outcome must carry it (`arguments_digest`)"
})
const Response = JsonValue.annotate({
  description: "A person's answer to the agent instead of running the tool (with a rejection)"
})

/** The approval snapshot's members of an edit or an answer. */
export const EditSnapshotFields = {
  approved_arguments: Schema.optionalKey(ApprovedArguments),
  arguments_changed: Schema.optionalKey(ArgumentsChanged),
  arguments_digest: Schema.optionalKey(DigestMember),
  response: Schema.optionalKey(Response)
}

/** The step's members of an edit or an answer. */
export const EditStepFields = {
  approved_arguments: Schema.optionalKey(ApprovedArguments),
  arguments_digest: Schema.optionalKey(DigestMember),
  response: Schema.optionalKey(Response)
}

/** Edited arguments that do not fit the action class's `arguments_schema`, or edits where it declares none. */
export class ArgumentsShapeMismatch extends Problem<ArgumentsShapeMismatch>()("ArgumentsShapeMismatch", {
  code: "ARGUMENTS_SHAPE_MISMATCH",
  status: 422,
  title: "The edited arguments do not fit the action class's arguments schema"
}, {
  field: Schema.String,
  errors: Schema.Array(FieldIssue)
}) {}

/** Edited arguments whose check against the arguments schema went over the time or memory budget. */
export class ArgumentsTooComplex extends Problem<ArgumentsTooComplex>()("ArgumentsTooComplex", {
  code: "ARGUMENTS_TOO_COMPLEX",
  status: 422,
  title: "Checking the edited arguments against the arguments schema went over its budget"
}, {
  field: Schema.String,
  ...limitFields
}) {}

/** The examples of these problems, and of a second vote's (`Votes.ts`), in the OpenAPI document (`Documentation.ts`). */
export const decisionProblemExamples = {
  ALREADY_VOTED: () => ({
    detail: "This person has already voted on this approval; a person votes once.",
    decided_by: "console:ana@example.com"
  }),
  PERSON_REQUIRED: () => ({
    detail:
      "This approval needs several distinct people to approve it, and a decision through the organization's shared reviewer address names no person."
  }),
  NOT_ASSIGNED: () => ({
    detail:
      "The approval is assigned to the reviewer group \"payments-leads\": only its members and their active delegates decide it.",
    assigned_group: "payments-leads"
  }),
  GROUP_IN_USE: () => ({
    detail: "A policy names this group, or a pending approval is assigned to it: change those first."
  }),
  ARGUMENTS_SHAPE_MISMATCH: () => ({
    detail: "arguments.amount must be <= 5000",
    field: "arguments.amount",
    errors: [{ field: "arguments.amount", message: "must be <= 5000" }]
  }),
  ARGUMENTS_TOO_COMPLEX: () => ({
    detail: "checking arguments against its schema took longer than 1000 ms (SVC_ANSWER_VALIDATION_TIMEOUT).",
    field: "arguments",
    limit: "SVC_ANSWER_VALIDATION_TIMEOUT",
    limit_value: 1000
  })
}
