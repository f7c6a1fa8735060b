/** The server side of `RequestValidation`: decode failures become `400 INVALID_REQUEST`. */
import { Cause, Effect, ErrorReporter, Layer, SchemaIssue } from "effect"
import { HttpServerRespondable, type HttpServerResponse } from "effect/http"
import { HttpApiError } from "effect/http-api"
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
