/**
 * Approve with edits, or answer. An action class's policy may declare the
 * JSON Schema of its tool's arguments (`arguments_schema`), checked and
 * bounded as answer schemas are (`../tasks/SchemaCheck.ts`). A person who
 * approves may send edited arguments: they are checked against that schema
 * by the validation workers, before the decision's transaction, and the
 * approval and its step then carry them (`approved_arguments`), what they
 * changed (JSON Pointers, bounded: `ArgumentsDiff.ts`) and their digest,
 * computed in a rule worker under a deadline and a heap, which the step's
 * outcome must carry. A person who rejects may send a response for the
 * agent instead. Both are bounded in size by the request schema
 * (`../api/ApprovalEdits.ts`), and `Approvals.decide` refuses what costs
 * nothing to check (missing, closed, not a member, a quorum) before any of
 * this runs.
 */
import { Effect, Schema } from "effect"
import type { SqlClient } from "effect/sql"
import { randomBytes } from "node:crypto"
import { ArgumentsShapeMismatch, ArgumentsTooComplex } from "../api/ApprovalEdits.ts"
import { JsonColumn, rowsOf } from "../platform/Rows.ts"
import type { AnswerSchemas } from "../tasks/AnswerSchema.ts"
import { checkSchema } from "../tasks/SchemaCheck.ts"
import { validationBusy } from "../tasks/ValidationBusy.ts"
import { argumentsDigest } from "./ArgumentsDiff.ts"
import { rulesBusy, type RuleWorkers } from "./RuleWorkers.ts"

type Json = Schema.Json

/** What a decision carries beside approve or reject (already checked against the request schema). */
export interface DecisionEdit {
  readonly arguments?: Json | undefined
  readonly response?: Json | undefined
}

/** What a decision settles, as stored on the approval and its step (`null`: none). */
export interface Settled {
  readonly approved_arguments: Json | null
  readonly arguments_changed: ReadonlyArray<string> | null
  readonly arguments_digest: string | null
  readonly response: Json | null
}

export const NOTHING_SETTLED: Settled = {
  approved_arguments: null,
  arguments_changed: null,
  arguments_digest: null,
  response: null
}

/** The `approvals` columns of an edit or an answer. */
export const EditColumns = Schema.Struct({
  approved_arguments: Schema.NullOr(JsonColumn(Schema.Json)),
  arguments_changed: Schema.NullOr(JsonColumn(Schema.Array(Schema.String))),
  arguments_digest: Schema.NullOr(Schema.String),
  response: Schema.NullOr(JsonColumn(Schema.Json))
})

/** The snapshot's members of an edit or an answer, in their fixed order; none when the decision carried neither. */
export const editSnapshot = (row: {
  readonly approved_arguments?: Json | null | undefined
  readonly arguments_changed?: ReadonlyArray<string> | null | undefined
  readonly arguments_digest?: string | null | undefined
  readonly response?: Json | null | undefined
}) => ({
  ...(row.approved_arguments == null ? {} : {
    approved_arguments: row.approved_arguments,
    arguments_changed: row.arguments_changed ?? [],
    arguments_digest: row.arguments_digest ?? ""
  }),
  ...(row.response == null ? {} : { response: row.response })
})

/** The step's members of an edit or an answer; none when the decision carried neither. */
export const editStepMembers = (row: {
  readonly approved_arguments: Json | null
  readonly arguments_digest: string | null
  readonly response: Json | null
}) => ({
  ...(row.approved_arguments === null
    ? {}
    : { approved_arguments: row.approved_arguments, arguments_digest: row.arguments_digest ?? "" }),
  ...(row.response === null ? {} : { response: row.response })
})

/** A budget of a rule worker or of the schema check that `field` went over, as its `422 ARGUMENTS_TOO_COMPLEX`. */
const tooComplex =
  (field: string) => (over: { readonly limit: string; readonly value: number; readonly message: string }) =>
    Effect.fail(
      new ArgumentsTooComplex({
        field,
        limit: over.limit,
        limit_value: over.value,
        detail: `${over.message} (${over.limit}).`
      })
    )

/** A violation's path inside the request body: `arguments.amount`. */
const argumentsPath = (path: string) =>
  path === "" ? "arguments" : path.startsWith("[") ? `arguments${path}` : `arguments.${path}`

const StepRows = rowsOf(
  "agent_steps",
  Schema.Struct({
    arguments: JsonColumn(Schema.Json),
    action_class: Schema.String,
    arguments_schema: Schema.NullOr(JsonColumn(Schema.Json))
  })
)

/** The validators' key of a class's arguments schema: a changed schema is another validator. */
const schemaKey = (orgId: string, actionClass: string, schema: Json) =>
  `arguments:${orgId}:${actionClass}:${argumentsDigest(schema)}`

/** Whether a decision carries edited arguments or a response. */
export const hasEdit = (edit: DecisionEdit | undefined): edit is DecisionEdit =>
  edit !== undefined && (edit.arguments !== undefined || edit.response !== undefined)

export const makeEdits = (
  sql: SqlClient.SqlClient,
  schemas: AnswerSchemas["Service"],
  workers: RuleWorkers["Service"],
  queueCapacity: number
) => {
  /** A policy's `arguments_schema`, checked and bounded as a task's answer schema. */
  const checkArgumentsSchema = (orgId: string, actionClass: string, schema: Json | undefined) =>
    schema === undefined
      ? Effect.void
      : checkSchema(schemas, orgId, schemaKey(orgId, actionClass, schema), schema, "arguments_schema")

  /**
   * What a decision with `edit` settles: edited arguments checked against
   * the class's current `arguments_schema` (422 naming the field; refused
   * when it declares none), or the response. `undefined` when the approval
   * does not exist (the decision answers 404).
   */
  const settle = Effect.fnUntraced(function*(orgId: string, approvalId: string, edit: DecisionEdit | undefined) {
    if (!hasEdit(edit)) return NOTHING_SETTLED
    // The response reaches the agent, the webhooks and the console: recognizable secrets go first, as from a reason.
    if (edit.arguments === undefined) {
      if (edit.response === undefined) return NOTHING_SETTLED
      // In a rule worker: a response of 65 536 characters may hold the event loop tens of milliseconds.
      const response = yield* workers.scrub(orgId, edit.response).pipe(
        Effect.catchTags({
          OverBudget: tooComplex("response"),
          RuleWorkersBusy: (busy) => Effect.fail(rulesBusy(busy))
        })
      )
      return { ...NOTHING_SETTLED, response }
    }
    const edited = edit.arguments
    const step = yield* StepRows.one(sql`
      SELECT s.arguments, s.action_class, p.arguments_schema FROM approvals a
      JOIN agent_steps s ON s.session_id = a.session_id AND s.step_id = a.step_id
      LEFT JOIN approval_policies p ON p.org_id = a.org_id AND p.action_class = s.action_class
      WHERE a.id = ${approvalId} AND a.org_id = ${orgId}
    `)
    if (step === undefined) return undefined
    if (step.arguments_schema === null) {
      const message =
        `the action class ${step.action_class} declares no arguments_schema: edited arguments cannot be checked, so they are refused`
      return yield* new ArgumentsShapeMismatch({
        field: "arguments",
        errors: [{ field: "arguments", message }],
        detail: `arguments: ${message}.`
      })
    }
    const schema = step.arguments_schema
    const violations = yield* schemas.validate(
      orgId,
      schemaKey(orgId, step.action_class, schema),
      Effect.succeed(schema),
      edited,
      "arguments"
    ).pipe(
      Effect.catchTags({
        OverLimit: tooComplex("arguments"),
        ValidationQueueFull: () => Effect.fail(validationBusy(queueCapacity, "schema checks"))
      })
    )
    if (violations.length > 0) {
      const errors = violations.map((v) => ({ field: argumentsPath(v.path), message: v.message }))
      return yield* new ArgumentsShapeMismatch({
        field: errors[0]!.field,
        errors,
        detail: `${errors[0]!.field} ${errors[0]!.message}`
      })
    }
    // What changed and the digest: in a rule worker, under the deadline of the schema check.
    const { changed, digest } = yield* workers.edit(orgId, step.arguments, edited).pipe(
      Effect.catchTags({
        OverBudget: tooComplex("arguments"),
        RuleWorkersBusy: (busy) => Effect.fail(rulesBusy(busy))
      })
    )
    return {
      ...NOTHING_SETTLED,
      approved_arguments: edited,
      arguments_changed: changed,
      arguments_digest: digest
    } satisfies Settled
  })

  return { checkArgumentsSchema, settle }
}

export type SettledValues = ReturnType<typeof valuesOf>

const valuesOf = (settled: Settled) => ({
  approvedArguments: settled.approved_arguments === null ? null : JSON.stringify(settled.approved_arguments),
  changed: settled.arguments_changed === null ? null : JSON.stringify(settled.arguments_changed),
  digest: settled.arguments_digest,
  response: settled.response === null ? null : JSON.stringify(settled.response)
})

const computed = new WeakMap<Settled, SettledValues>()

/**
 * SQL values of what a decision settled, for the approval's and the step's
 * columns: its JSON text, made once per `settled` (before the decision's
 * transaction, so that the transaction does not hold the database for it).
 */
export const settledValues = (settled: Settled): SettledValues => {
  let values = computed.get(settled)
  if (values === undefined) {
    values = valuesOf(settled)
    computed.set(settled, values)
  }
  return values
}

/**
 * Edited arguments and a response stand in the event copies of a decision
 * (the webhook event, the session's event, the approval stream's) as these
 * marks, each replaced by the JSON text made once (`settledValues`): up to
 * 256 KiB is not written out again for each copy. A mark is a string no
 * request can hold (a NUL character is refused in every JSON value,
 * `api/Common.ts`), with a token of the process's own.
 */
const MARK_TOKEN = randomBytes(12).toString("hex")
const ARGUMENTS_MARK = `\u0000svc-approved-arguments-${MARK_TOKEN}`
const RESPONSE_MARK = `\u0000svc-response-${MARK_TOKEN}`

/** `row` with what `settled` holds replaced by the marks, and the splice that puts its JSON text back in JSON holding them. */
export const markedEdit = <R extends { readonly approved_arguments: Json | null; readonly response: Json | null }>(
  row: R,
  settled: Settled
) => {
  const values = settledValues(settled)
  const marked: R = {
    ...row,
    approved_arguments: values.approvedArguments === null ? row.approved_arguments : ARGUMENTS_MARK,
    response: values.response === null ? row.response : RESPONSE_MARK
  }
  const splice = (json: string) => {
    let out = json
    if (values.approvedArguments !== null) {
      out = out.replace(JSON.stringify(ARGUMENTS_MARK), () => values.approvedArguments!)
    }
    if (values.response !== null) out = out.replace(JSON.stringify(RESPONSE_MARK), () => values.response!)
    return out
  }
  return { marked, splice }
}
