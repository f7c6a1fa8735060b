/**
 * The typed errors every part of the API shares. Each one is an RFC 9457
 * problem (`application/problem+json`) carrying its `code` (docs/api.md,
 * "Errors") and, where
 * one field is at fault, `field` (a JSON path such as `correction.items[2]`).
 * Capability-specific errors live beside their group (e.g. `Feedback.ts`).
 */
import { Schema } from "effect"
import { HttpApiError } from "effect/http-api"

/** The problem `type` URI for a code: `urn:svc:problem:invalid-request`. */
export const problemType = <const Code extends string>(code: Code) =>
  `urn:svc:problem:${code.toLowerCase().replaceAll("_", "-")}` as `urn:svc:problem:${string}`

/**
 * A problem class of svc: `HttpApiError.Problem` whose `type` URI and `code`
 * member both come from the one spec code, so they cannot disagree.
 */
export const Problem = <Self>() =>
<
  const Tag extends string,
  const Code extends string,
  const Status extends number,
  const Fields extends HttpApiError.ProblemExtensionFields = {}
>(
  tag: Tag,
  declaration: { readonly code: Code; readonly status: Status; readonly title: string },
  fields?: Fields
) =>
  HttpApiError.Problem<Self>()(
    tag,
    { type: problemType(declaration.code), status: declaration.status, title: declaration.title },
    { code: Schema.tag(declaration.code), ...fields }
  ) as unknown as HttpApiError.ProblemClass<
    Self,
    Tag,
    `urn:svc:problem:${string}`,
    Status,
    { readonly code: Schema.tag<Code> } & Fields,
    {}
  >

/**
 * Problems the server makes itself (body over the limit, wrong content type,
 * a defect) also carry the request id, as in the `x-request-id` header.
 */
const RequestIdMember = Schema.optionalKey(
  Schema.String.annotate({ description: "The request's id, also in the `x-request-id` header" })
)

/** One decode issue: the JSON path of the value at fault and what was expected. */
export const FieldIssue = Schema.Struct({
  field: Schema.String,
  message: Schema.String
})

export class InvalidRequest extends Problem<InvalidRequest>()("InvalidRequest", {
  code: "INVALID_REQUEST",
  status: 400,
  title: "The request is invalid"
}, {
  field: Schema.optionalKey(Schema.String),
  errors: Schema.optionalKey(Schema.Array(FieldIssue))
}) {}

/**
 * Headers to add to what svc sends (a collector's, a webhook endpoint's)
 * break a rule (`src/outbound/HeaderRules.ts`); `field` names the header,
 * never its value.
 */
export class InvalidHeaders extends Problem<InvalidHeaders>()("InvalidHeaders", {
  code: "INVALID_HEADERS",
  status: 400,
  title: "The headers are not accepted"
}, {
  field: Schema.optionalKey(Schema.String.annotate({ description: "The first refused header, e.g. `headers.Host`" })),
  errors: Schema.optionalKey(
    Schema.Array(FieldIssue).annotate({ description: "Every refused header, each with its reason" })
  )
}) {}

/** The problem of refused headers: the one at fault, or each of them. */
export const headersRefused = (verdict: {
  readonly field: string
  readonly message: string
  readonly problems: ReadonlyArray<{ readonly field: string; readonly message: string }>
}) =>
  new InvalidHeaders({
    field: verdict.field,
    errors: verdict.problems,
    detail: verdict.problems.length === 1
      ? `${verdict.field}: ${verdict.message}.`
      : `${verdict.problems.length} headers are refused: ${
        verdict.problems.map((p) => `${p.field} (${p.message})`).join("; ")
      }.`
  })

export class Unauthenticated extends Problem<Unauthenticated>()("Unauthenticated", {
  code: "UNAUTHENTICATED",
  status: 401,
  title: "Missing, unknown or revoked API key"
}) {}

export class InsufficientScope extends Problem<InsufficientScope>()("InsufficientScope", {
  code: "INSUFFICIENT_SCOPE",
  status: 403,
  title: "The API key lacks the scope this operation needs"
}, {
  required_scope: Schema.String
}) {}

/**
 * A state-changing request authenticated by the console session cookie that
 * lacks the `X-Svc-Console` header or comes from another site (`Origin`,
 * `Sec-Fetch-Site: cross-site`). Bearer-key requests never get it.
 */
export class CrossSiteRequest extends Problem<CrossSiteRequest>()("CrossSiteRequest", {
  code: "CROSS_SITE_REQUEST",
  status: 403,
  title: "A console request that changes state must come from the console itself"
}) {}

export class NotFound extends Problem<NotFound>()("NotFound", { code: "NOT_FOUND", status: 404, title: "Not found" }, {
  // The router's own 404 (no such route) is made by the server, like a 413.
  request_id: RequestIdMember
}) {}

export class InvalidTransition extends Problem<InvalidTransition>()("InvalidTransition", {
  code: "INVALID_TRANSITION",
  status: 409,
  title: "The resource is not in a state that allows this"
}, {
  status_now: Schema.optionalKey(Schema.String)
}) {}

/**
 * The limits a problem can name: the `SVC_*` variable that sets it and its
 * value in force. Every limit of the service is answered with these two
 * members, so a client can tell which one it ran into.
 */
export const limitFields = {
  limit: Schema.String.annotate({ description: "The `SVC_*` setting whose limit was reached" }),
  limit_value: Schema.Finite.annotate({ description: "Its value in force" })
}

/**
 * A body over `SVC_MAX_BODY_BYTES`: `limit` and `limit_value` name it like
 * every other limit. `limit_bytes` (the same number) is kept for clients
 * written against 0.1.0 and is deprecated.
 */
export class PayloadTooLarge extends Problem<PayloadTooLarge>()("PayloadTooLarge", {
  code: "PAYLOAD_TOO_LARGE",
  status: 413,
  title: "The request body is over the limit"
}, {
  ...limitFields,
  limit_bytes: Schema.optionalKey(Schema.Finite.annotate({
    description: "Deprecated: the same number as `limit_value`, which to read instead"
  })),
  request_id: RequestIdMember
}) {}

export class UnsupportedMediaType extends Problem<UnsupportedMediaType>()("UnsupportedMediaType", {
  code: "UNSUPPORTED_MEDIA_TYPE",
  status: 415,
  title: "The request body must be application/json"
}, {
  request_id: RequestIdMember
}) {}

export class InternalError extends HttpApiError.Problem<InternalError>()("InternalError", {
  type: problemType("INTERNAL"),
  status: 500,
  title: "Internal error"
}, {
  code: Schema.tag("INTERNAL"),
  request_id: RequestIdMember
}) {}

/**
 * The database cannot be reached for the moment (or `/ready` is not
 * ready): nothing was done; retry after the `Retry-After` header's seconds.
 */
export class ServiceUnavailable extends Problem<ServiceUnavailable>()("ServiceUnavailable", {
  code: "SERVICE_UNAVAILABLE",
  status: 503,
  title: "The service is temporarily unavailable"
}) {}

/** A per-organization collection is full (endpoints, approval policies, tasks...). */
export class LimitReached extends Problem<LimitReached>()("LimitReached", {
  code: "LIMIT_REACHED",
  status: 409,
  title: "The organization has reached a limit of this resource"
}, {
  ...limitFields
}) {}

/** A policy's rules over a documented size or complexity limit (`field` names the rule: `rules[2].condition`). */
export class PolicyRulesTooComplex extends Problem<PolicyRulesTooComplex>()("PolicyRulesTooComplex", {
  code: "POLICY_RULES_TOO_COMPLEX",
  status: 400,
  title: "The policy's rules are over a size or complexity limit"
}, {
  field: Schema.String,
  ...limitFields
}) {}

/** An answer schema over a documented size or complexity limit. */
export class AnswerSchemaTooComplex extends Problem<AnswerSchemaTooComplex>()("AnswerSchemaTooComplex", {
  code: "ANSWER_SCHEMA_TOO_COMPLEX",
  status: 400,
  title: "The answer schema is over a size or complexity limit"
}, {
  field: Schema.String,
  ...limitFields
}) {}

/** A correction whose check against its answer schema went over the time or memory budget. */
export class CorrectionTooComplex extends Problem<CorrectionTooComplex>()("CorrectionTooComplex", {
  code: "CORRECTION_TOO_COMPLEX",
  status: 422,
  title: "Checking the correction against the answer schema went over its budget"
}, {
  field: Schema.String,
  ...limitFields
}) {}

/** An operation with a rate bound was asked for too often; retry after `retry_after_seconds`. */
export class RateLimited extends Problem<RateLimited>()("RateLimited", {
  code: "RATE_LIMITED",
  status: 429,
  title: "Too many requests of this kind; retry later"
}, {
  ...limitFields,
  retry_after_seconds: Schema.Int
}) {}

/** Too many answer-schema checks of this organization are waiting. */
export class ValidationBusy extends Problem<ValidationBusy>()("ValidationBusy", {
  code: "VALIDATION_BUSY",
  status: 429,
  title: "Too many schema checks of this organization are waiting; retry later"
}, {
  ...limitFields
}) {}

/**
 * Too many open event streams: for the API key or console session, for the
 * organization, or for the whole server (`limit` names which).
 */
export class TooManyStreams extends Problem<TooManyStreams>()("TooManyStreams", {
  code: "TOO_MANY_STREAMS",
  status: 429,
  title: "Too many open event streams"
}, {
  ...limitFields
}) {}
