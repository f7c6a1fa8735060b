/** The server side of `RequestValidation`: decode failures become `400 INVALID_REQUEST`. */
import { Cause, Context, Data, Effect, ErrorReporter, Layer, SchemaIssue, type Types } from "effect"
import { HttpRouter, HttpServerRequest, HttpServerRespondable, type HttpServerResponse } from "effect/http"
import { HttpApiError } from "effect/http-api"
import { findUnstorableStrings, isUnstorableString, UNSTORABLE_STRING_MESSAGE } from "../api/Common.ts"
import { InternalError, InvalidRequest } from "../api/Errors.ts"
import { RequestValidation } from "../api/Validation.ts"

const formatIssues = SchemaIssue.makeFormatterStandardSchemaV1()

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

const schemaErrorProblem = (
  error: HttpApiError.HttpApiSchemaError
): Effect.Effect<HttpServerResponse.HttpServerResponse, InvalidRequest> => {
  // "Body" and "ResponseHeaders" are our own answers failing to encode: a bug.
  if (error.kind === "Body" || error.kind === "ResponseHeaders") {
    return Effect.andThen(
      ErrorReporter.report(Cause.fail(error)),
      HttpServerRespondable.toResponse(new InternalError({}))
    )
  }
  const issues = formatIssues(error.cause.issue).issues.map((issue) => ({
    field: toJsonPath((issue.path ?? []).map((segment) => typeof segment === "object" ? segment.key : segment)),
    message: issue.message
  }))
  const first = issues[0]
  const where = error.kind === "Params" ? "path" : error.kind === "Query" ? "query" : error.kind === "Headers" ? "headers" : "body"
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
 * A request string PostgreSQL cannot store (NUL, unpaired surrogate: see
 * `isUnstorableString`), found while the body was read for decoding.
 */
class UnstorableInput extends Data.TaggedError("UnstorableInput")<{
  readonly where: "body" | "path" | "query"
  readonly fields: ReadonlyArray<string>
}> {}

const unstorableProblem = (error: UnstorableInput) => {
  const issues = error.fields.map((field) => ({ field, message: UNSTORABLE_STRING_MESSAGE }))
  const first = issues[0]!
  return new InvalidRequest({
    detail: `${first.field === "" ? `The request ${error.where}` : first.field}: ${UNSTORABLE_STRING_MESSAGE}`,
    ...(first.field === "" ? {} : { field: first.field }),
    errors: issues
  })
}

/**
 * A JSON escape that may decode to such a string (`\u0000`, `\ud800`-`\udfff`).
 * Raw NUL bytes are not valid JSON anyway, and raw surrogate bytes decode to
 * U+FFFD; so a body without one of these escapes needs no walk.
 */
const SUSPICIOUS_ESCAPE = /\\u(?:0000|[dD][89a-fA-F])/

/** The body's text, or the failure naming every unstorable string in it. */
const checkedText = (text: string): Effect.Effect<string, UnstorableInput> => {
  if (!SUSPICIOUS_ESCAPE.test(text)) return Effect.succeed(text)
  let parsed: unknown
  try {
    parsed = JSON.parse(text)
  } catch {
    // Not JSON: the decoder answers that itself.
    return Effect.succeed(text)
  }
  const found = findUnstorableStrings(parsed)
  return found.length === 0
    ? Effect.succeed(text)
    : Effect.fail(new UnstorableInput({ where: "body", fields: found.map(toJsonPath) }))
}

const allStorable = (record: Readonly<Record<string, string | ReadonlyArray<string> | undefined>>): boolean => {
  for (const name in record) {
    if (isUnstorableString(name)) return false
    const value = record[name]
    if (typeof value === "string") {
      if (isUnstorableString(value)) return false
    } else if (value !== undefined) {
      for (const item of value) if (isUnstorableString(item)) return false
    }
  }
  return true
}

/**
 * Makes reading the request's body as text (what the JSON payload decoder
 * does, after authentication and the path and query) also check it. The failure travels as a defect through the decoder's
 * `orDie` and is turned back into a 400 below.
 */
const checkBody = (request: HttpServerRequest.HttpServerRequest): void => {
  // The request's own `text` is read once and kept; the check is a regular
  // expression test (a walk only for a suspicious escape), cheap enough to
  // repeat on the rare second read rather than pay for caching its result.
  // An own accessor on the request itself, shadowing its class's: a view
  // made with `Object.create(request)` turned every request object into a
  // prototype, which V8 makes slow to create and to read.
  let text: Effect.Effect<string, unknown> | undefined
  const proto = Object.getPrototypeOf(request) as object
  Object.defineProperty(request, "text", {
    configurable: true,
    get: () => text ??= Effect.flatMap(Reflect.get(proto, "text", request) as Effect.Effect<string, unknown>, checkedText)
  })
}

/** Path parameters and query values with an unstorable string, by name. */
const unstorableParameters = (
  params: Readonly<Record<string, string | undefined>>,
  query: Readonly<Record<string, string | ReadonlyArray<string> | undefined>>
): UnstorableInput | undefined => {
  // The common case first, without allocating: every string is storable.
  if (allStorable(params) && allStorable(query)) return undefined
  const path = Object.entries(params).filter(([, value]) => value !== undefined && isUnstorableString(value)).map(([name]) => name)
  if (path.length > 0) return new UnstorableInput({ where: "path", fields: path })
  const inQuery = Object.entries(query).filter(([name, value]) =>
    isUnstorableString(name) ||
    (typeof value === "string" ? isUnstorableString(value) : value !== undefined && value.some(isUnstorableString))
  ).map(([name]) => isUnstorableString(name) ? "" : name)
  if (inQuery.length > 0) return new UnstorableInput({ where: "query", fields: inQuery })
  return undefined
}

/**
 * The answer for a request whose decoding failed, when `cause` says so: a
 * schema failure becomes `400 INVALID_REQUEST` naming the field (or a 500
 * for our own answer failing to encode), an unstorable string in the body
 * `400 INVALID_REQUEST` naming each. The endpoints let both travel as
 * defects (the framework makes a decode failure one); the router's
 * middleware asks here on its failure path only, so a request that decodes
 * pays nothing for this.
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
    if (value instanceof UnstorableInput) return HttpServerRespondable.toResponse(unstorableProblem(value))
  }
  return undefined
}

/**
 * Every endpoint's request validation:
 *
 * - strings PostgreSQL cannot store are refused wherever they are in the
 *   body (member names included), the path or the query: `400
 *   INVALID_REQUEST` naming each (the body's when the JSON decoder reads it,
 *   so authentication still answers first);
 * - decode failures become `400 INVALID_REQUEST` naming the field
 *   (`decodeFailureResponse`, on the router's failure path).
 *
 * What runs per request is plain code: the path and query checked in place
 * (nothing allocated when they are clean), and for a method with a body,
 * the check hooked onto the body's reading.
 */
export const RequestValidationLive = Layer.succeed(RequestValidation, (httpEffect) =>
  Effect.withFiber((fiber) => {
    const request = Context.getUnsafe(fiber.context, HttpServerRequest.HttpServerRequest)
    const route = Context.getUnsafe(fiber.context, HttpRouter.RouteContext)
    const query = Context.getUnsafe(fiber.context, HttpServerRequest.ParsedSearchParams)
    const bad = unstorableParameters(route.params, query)
    if (bad !== undefined) return Effect.fail(unstorableProblem(bad))
    if (request.method !== "GET" && request.method !== "HEAD" && request.method !== "DELETE") checkBody(request)
    return httpEffect as Effect.Effect<HttpServerResponse.HttpServerResponse, Types.unhandled | InvalidRequest>
  }))
