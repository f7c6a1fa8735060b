/** The server side of `RequestValidation`: decode failures become `400 INVALID_REQUEST`. */
import { Cause, Effect, ErrorReporter, Layer, Result, Schema, SchemaAST, SchemaIssue, SchemaParser } from "effect"
import { HttpServerRespondable, type HttpServerResponse } from "effect/http"
import { HttpApiError } from "effect/http-api"
import { ANSWERED_AS, type AnsweredAs } from "../api/Common.ts"
import { InvalidUrl } from "../api/Deliveries.ts"
import { InternalError, InvalidHeaders, InvalidRequest } from "../api/Errors.ts"
import { EventTypes, InvalidWebhookEvents } from "../api/Notifications.ts"
import { RequestValidation } from "../api/Validation.ts"
import { headerField } from "../outbound/HeaderRules.ts"

/** A map's refused keys: each key's own issue by its key schema, found by the unexpected-key issue Effect reports instead. */
type KeyIssues = WeakMap<SchemaIssue.Issue, SchemaIssue.Issue>

/**
 * Effect reports a key its map's key schema refuses only as an unexpected
 * key; decoding the key with that schema again gives the rule it breaks
 * (its message, and the code the rule is answered with).
 */
const keyIssues = (issue: SchemaIssue.Issue, out: KeyIssues = new WeakMap()): KeyIssues => {
  switch (issue._tag) {
    case "Pointer": {
      const inner = issue.issue
      const key = issue.path.at(-1)
      const index = inner._tag === "UnexpectedKey" && SchemaAST.isObjects(inner.ast)
        ? inner.ast.indexSignatures[0]
        : undefined
      if (index !== undefined && typeof key === "string") {
        const decoded = SchemaParser.decodeUnknownResult(Schema.make<Schema.Codec<unknown, unknown>>(index.parameter))(
          key
        )
        if (Result.isFailure(decoded)) out.set(inner, decoded.failure)
      } else {
        keyIssues(inner, out)
      }
      break
    }
    case "Filter":
    case "Encoding":
      keyIssues(issue.issue, out)
      break
    case "Composite":
    case "AnyOf":
      for (const inner of issue.issues) keyIssues(inner, out)
      break
  }
  return out
}

/**
 * Each refusal says what the rule is: where Effect's default message only
 * says that something failed ("Expected no excess property", "Missing
 * key"), the message names the rule: the members an object has, or the
 * rule of its key schema a map's key breaks (e.g. a header name's token
 * grammar).
 */
const formatIssues = (issue: SchemaIssue.Issue) => {
  const keys = keyIssues(issue)
  const leafHook: SchemaIssue.LeafHook = (leaf) => {
    if (
      leaf._tag === "UnexpectedKey" && typeof leaf.ast.annotations?.messageUnexpectedKey !== "string" &&
      SchemaAST.isObjects(leaf.ast)
    ) {
      const explained = keys.get(leaf)
      if (explained !== undefined) return formatter(explained).issues[0]?.message ?? "Not an allowed key"
      const members = leaf.ast.propertySignatures.map((property) => String(property.name))
      return members.length === 0
        ? "Not a member: this object has no members"
        : `Not a member: this object's members are ${members.join(", ")}`
    }
    if (leaf._tag === "MissingKey" && typeof leaf.annotations?.messageMissingKey !== "string") {
      return "Missing: a required member"
    }
    return SchemaIssue.defaultLeafHook(leaf)
  }
  const formatter = SchemaIssue.makeFormatterStandardSchemaV1({ leafHook })
  return { ...formatter(issue), keys }
}

/** `["correction", "items", 2, "price"]` → `correction.items[2].price`. */
export const toJsonPath = (segments: ReadonlyArray<PropertyKey>): string => {
  let out = ""
  for (const segment of segments) {
    if (typeof segment === "number" || (typeof segment === "string" && /^\d+$/.test(segment) && out !== "")) {
      out += `[${String(segment)}]`
    } else {
      const key = String(segment)
      out += /^[A-Za-z_$][A-Za-z0-9_$]*$/.test(key)
        ? (out === "" ? key : `.${key}`)
        : `[${JSON.stringify(key)}]`
    }
  }
  return out
}

type Path = ReadonlyArray<PropertyKey>

const answeredAsOf = (annotations: object | undefined): AnsweredAs | undefined =>
  (annotations as Record<string, AnsweredAs | undefined> | undefined)?.[ANSWERED_AS]

/**
 * The fields whose every failure comes from a rule annotated `answeredAs`
 * (the innermost annotation wins), with that rule's problem code; `null`
 * for a field that also breaks a rule without one (`INVALID_REQUEST`).
 */
const answeredFields = (
  issue: SchemaIssue.Issue,
  keys: KeyIssues,
  path: Path = [],
  code?: AnsweredAs,
  out = new Map<string, AnsweredAs | null>()
): Map<string, AnsweredAs | null> => {
  const explained = keys.get(issue)
  if (explained !== undefined) return answeredFields(explained, keys, path, code, out)
  const astCode = (ast: SchemaAST.AST) => answeredAsOf(ast.annotations) ?? code
  const leaf = (answered: AnsweredAs | undefined) => {
    const field = toJsonPath(path)
    const before = out.get(field)
    out.set(
      field,
      answered === undefined || before === null || (before !== undefined && before !== answered) ? null : answered
    )
  }
  switch (issue._tag) {
    case "Filter":
      answeredFields(issue.issue, keys, path, answeredAsOf(issue.filter.annotations) ?? code, out)
      break
    case "Pointer":
      answeredFields(issue.issue, keys, [...path, ...issue.path], code, out)
      break
    case "Encoding":
      answeredFields(issue.issue, keys, path, astCode(issue.ast), out)
      break
    case "Composite":
    case "AnyOf":
      for (const inner of issue.issues) answeredFields(inner, keys, path, astCode(issue.ast), out)
      if (issue.issues.length === 0) leaf(astCode(issue.ast))
      break
    case "InvalidType":
    case "OneOf":
      leaf(astCode(issue.ast))
      break
    default:
      leaf(code)
  }
  return out
}

/** `headers["X-Key"]` → `headers.X-Key`, as the service's own header checks name it (`headerField`). */
const asHeaderField = (field: string) => {
  const name = /^headers\[(".*")\]$/.exec(field)?.[1]
  return name === undefined ? field : headerField(JSON.parse(name) as string)
}

/** The problem of a rule the schema states and the documentation answers with a code of its own. */
const answeredProblem = (
  code: AnsweredAs,
  field: string,
  detail: string,
  issues: ReadonlyArray<{ readonly field: string; readonly message: string }>
) => {
  switch (code) {
    case "INVALID_WEBHOOK_EVENTS":
      return new InvalidWebhookEvents({ field, detail, supported: [...EventTypes] })
    case "INVALID_URL":
      return new InvalidUrl({ field, detail })
    case "INVALID_HEADERS":
      return new InvalidHeaders({
        field: asHeaderField(field),
        detail: `${asHeaderField(field)}${detail.slice(field.length)}`,
        errors: issues.map((issue) => ({ ...issue, field: asHeaderField(issue.field) }))
      })
  }
}

const schemaErrorProblem = (
  error: HttpApiError.HttpApiSchemaError
): Effect.Effect<
  HttpServerResponse.HttpServerResponse,
  InvalidRequest | InvalidWebhookEvents | InvalidUrl | InvalidHeaders
> => {
  // "Body" and "ResponseHeaders" are our own answers failing to encode: a bug.
  if (error.kind === "Body" || error.kind === "ResponseHeaders") {
    return Effect.andThen(
      ErrorReporter.report(Cause.fail(error)),
      HttpServerRespondable.toResponse(new InternalError({}))
    )
  }
  const formatted = formatIssues(error.cause.issue)
  const issues = formatted.issues.map((issue) => ({
    field: toJsonPath((issue.path ?? []).map((segment) => typeof segment === "object" ? segment.key : segment)),
    message: issue.message
  }))
  const first = issues[0]
  if (first !== undefined) {
    const answered = answeredFields(error.cause.issue, formatted.keys)
    const code = answered.get(first.field)
    if (code !== undefined && code !== null) {
      const same = issues.filter((issue) => answered.get(issue.field) === code)
      return Effect.fail(answeredProblem(code, first.field, `${first.field}: ${first.message}`, same))
    }
  }
  const where = error.kind === "Params"
    ? "path"
    : error.kind === "Query"
    ? "query"
    : error.kind === "Headers"
    ? "headers"
    : "body"
  return Effect.fail(
    new InvalidRequest({
      detail: first === undefined
        ? `The request ${where} is invalid.`
        : `${first.field === "" ? `The request ${where}` : first.field}: ${first.message}`,
      ...(first !== undefined && first.field !== "" ? { field: first.field } : {}),
      errors: issues
    })
  )
}

/**
 * The answer for a request whose decoding failed, when `cause` says so: a
 * schema failure becomes `400 INVALID_REQUEST` naming each field (or a 500
 * for our own answer failing to encode). The framework makes a decode
 * failure a defect; the router's middleware asks here on its failure path
 * only, so a request that decodes pays nothing for this.
 */
export const decodeFailureResponse = (
  cause: Cause.Cause<unknown>
): Effect.Effect<HttpServerResponse.HttpServerResponse> | undefined => {
  for (const reason of cause.reasons) {
    const value = Cause.isDieReason(reason) ? reason.defect : Cause.isFailReason(reason) ? reason.error : undefined
    if (HttpApiError.HttpApiSchemaError.is(value)) {
      return schemaErrorProblem(value).pipe(
        Effect.catch((problem) => HttpServerRespondable.toResponse(problem))
      )
    }
  }
  return undefined
}

/**
 * Every endpoint's request validation is its schemas: strings PostgreSQL
 * cannot store are refused by them where they are declared (`Text`,
 * `JsonValue`, `JsonObject` in `src/api/Common.ts`), and a decode failure
 * becomes `400 INVALID_REQUEST` naming each field (`decodeFailureResponse`,
 * on the router's failure path). Nothing runs per request here: the
 * middleware stays declared on the API for the errors it documents.
 */
export const RequestValidationLive = Layer.succeed(RequestValidation, (httpEffect) => httpEffect)
