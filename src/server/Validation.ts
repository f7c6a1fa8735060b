/** The server side of `RequestValidation`: decode failures become `400 INVALID_REQUEST`. */
import { Cause, Effect, ErrorReporter, SchemaIssue } from "effect"
import { HttpServerRespondable } from "effect/http"
import { HttpApiMiddleware } from "effect/http-api"
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

export const RequestValidationLive = HttpApiMiddleware.layerSchemaErrorTransform(RequestValidation, (error) => {
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
})
