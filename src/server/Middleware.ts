/**
 * Router-wide middleware: request ids, the request log line, and problem
 * details for every error answer, including those the framework makes itself
 * (unknown route, body too large, wrong content type, defects).
 */
import { type ByteSize, type Cause, Context, Effect, Option, References, type Types } from "effect"
import { HttpRouter, HttpServerError, HttpServerRequest, HttpServerRespondable, HttpServerResponse } from "effect/http"
import { problemType } from "../api/Errors.ts"
import { Metrics } from "../observability/Metrics.ts"
import { databaseUnavailable } from "../platform/DatabaseUnavailable.ts"
import { newId } from "../platform/Ids.ts"
import { RequestFacts, withLogAnnotation } from "../platform/Logging.ts"
import { RETRY_AFTER_SECONDS, unavailableProblem } from "./Availability.ts"
import { decodeFailureResponse } from "./Validation.ts"

const PROBLEM_JSON = "application/problem+json"

const problems: Record<number, { code: string; title: string }> = {
  400: { code: "INVALID_REQUEST", title: "The request is invalid" },
  401: { code: "UNAUTHENTICATED", title: "Missing, unknown or revoked API key" },
  403: { code: "FORBIDDEN", title: "Forbidden" },
  404: { code: "NOT_FOUND", title: "Not found" },
  405: { code: "NOT_FOUND", title: "Not found" },
  408: { code: "REQUEST_TIMEOUT", title: "Request timeout" },
  413: { code: "PAYLOAD_TOO_LARGE", title: "The request body is over the limit" },
  415: { code: "UNSUPPORTED_MEDIA_TYPE", title: "The request body must be application/json" },
  500: { code: "INTERNAL", title: "Internal error" },
  503: { code: "SERVICE_UNAVAILABLE", title: "The service is temporarily unavailable" }
}

/** The statuses whose documented problem carries `request_id` (`src/api/Errors.ts`); the header always does. */
const WITH_REQUEST_ID: ReadonlySet<number> = new Set([404, 413, 415, 500])

/**
 * An error answer that is not already problem+json becomes one, keeping
 * status and headers. A body over the limit names it, as every limit does
 * (`limit_bytes`, the same number, is deprecated).
 */
const asProblem = (
  response: HttpServerResponse.HttpServerResponse,
  requestId: string,
  maxBodySize: ByteSize.ByteSize | undefined
) => {
  if (response.status < 400) return response
  const contentType = response.headers["content-type"] ??
    (response.body._tag === "Uint8Array" || response.body._tag === "Raw" ? response.body.contentType : undefined)
  if (contentType?.startsWith(PROBLEM_JSON)) return response
  const status = response.status === 405 ? 404 : response.status
  const known = problems[status] ?? { code: status >= 500 ? "INTERNAL" : "INVALID_REQUEST", title: "Error" }
  const { ["content-type"]: _ct, ["content-length"]: _cl, ...headers } = response.headers
  const bytes = maxBodySize === undefined ? undefined : Number(maxBodySize)
  const limit = status === 413 && bytes !== undefined
    ? {
      detail: `The request body is larger than SVC_MAX_BODY_BYTES (${bytes} bytes).`,
      limit: "SVC_MAX_BODY_BYTES",
      limit_value: bytes,
      limit_bytes: bytes
    }
    : {}
  return HttpServerResponse.jsonUnsafe(
    {
      type: problemType(known.code),
      status,
      title: known.title,
      code: known.code,
      ...limit,
      // Only where the document's problem for the status has it.
      ...(WITH_REQUEST_ID.has(status) ? { request_id: requestId } : {})
    },
    { status, headers, contentType: PROBLEM_JSON }
  )
}

const REQUEST_ID = /^[A-Za-z0-9._-]{1,128}$/

/** The answer for a request that failed: a database outage is a 503 with Retry-After, anything else what the failure says. */
const failureResponse = (cause: Cause.Cause<unknown>, requestId: string) =>
  Effect.suspend((): Effect.Effect<HttpServerResponse.HttpServerResponse> => {
    const undecodable = decodeFailureResponse(cause)
    if (undecodable !== undefined) return undecodable
    const outage = databaseUnavailable(cause)
    if (Option.isSome(outage)) {
      // A database outage, wherever it was met (authentication included):
      // a 503 with Retry-After, not a 500 (`Availability.ts`).
      return Effect.logWarning(`service unavailable: ${outage.value}`, cause).pipe(
        Effect.annotateLogs({ request_id: requestId }),
        Effect.andThen(HttpServerRespondable.toResponse(unavailableProblem(outage.value))),
        Effect.map((response) => HttpServerResponse.setHeader(response, "retry-after", String(RETRY_AFTER_SECONDS)))
      )
    }
    return Effect.flatMap(HttpServerError.causeResponse(cause), ([failed]) =>
      // 503s were logged with their cause where they were answered.
      failed.status >= 500 && failed.status !== 503
        ? Effect.as(
          Effect.logError("request failed", cause).pipe(Effect.annotateLogs({ request_id: requestId })),
          failed
        )
        : Effect.succeed(failed))
  })

/**
 * One request: its id, its facts, and once it has an answer, the answer's
 * problem form, the duration metric and the log line, in one `onExit`-like
 * step of plain code (no generator, no extra fiber-context frames on the
 * success path: every request pays for this layer).
 */
export const RequestMiddleware = HttpRouter.middleware<{ handles: unknown }>()(
  Effect.map(Metrics, (metrics) => (httpEffect) =>
    Effect.withFiber((fiber) => {
      const request = Context.getUnsafe(fiber.context, HttpServerRequest.HttpServerRequest)
      const incoming = request.headers["x-request-id"]
      const requestId = incoming !== undefined && REQUEST_ID.test(incoming) ? incoming : newId()
      const facts: { orgId?: string } = {}
      const started = performance.now()
      let route: string | undefined
      const finish = (answer: HttpServerResponse.HttpServerResponse) => {
        const response = HttpServerResponse.setHeader(
          asProblem(answer, requestId, fiber.getRef(HttpServerRequest.MaxBodySize)),
          "x-request-id",
          requestId
        )
        const seconds = (performance.now() - started) / 1000
        metrics.httpRequest(request.method, route, response.status, seconds)
        const query = request.url.indexOf("?")
        const annotations: Record<string, unknown> = { request_id: requestId }
        if (facts.orgId !== undefined) annotations.org_id = facts.orgId
        annotations["http.request.method"] = request.method
        annotations["url.path"] = query < 0 ? request.url : request.url.slice(0, query)
        annotations["http.response.status_code"] = response.status
        annotations.duration_ms = Math.round(seconds * 10_000) / 10
        return Effect.as(Effect.annotateLogs(Effect.logInfo("request"), annotations), response)
      }
      return httpEffect.pipe(
        // The router leaves the matched route in the request fiber's context
        // until the request ends: its template labels the duration metric.
        Effect.onExit(() =>
          Effect.withFiber((inner) => {
            route = Context.getOrUndefined(inner.context, HttpRouter.RouteContext)?.route.path
            return Effect.void
          })
        ),
        // The request's facts and its log annotation in one context step
        // (`provideService` and `annotateLogs` would take one each).
        Effect.updateContext((context: Context.Context<HttpServerRequest.HttpServerRequest>) =>
          withLogAnnotation(
            Context.add(context, RequestFacts, facts),
            fiber.getRef(References.CurrentLogAnnotations),
            "request_id",
            requestId
          )
        ),
        // Every failure is answered here; the cast keeps the router's
        // "unhandled" marker, which only a partial handler would need.
        Effect.matchCauseEffect({
          onSuccess: finish,
          onFailure: (cause) => Effect.flatMap(failureResponse(cause, requestId), finish)
        })
      ) as Effect.Effect<HttpServerResponse.HttpServerResponse, Types.unhandled, HttpServerRequest.HttpServerRequest>
    })),
  {
    global: true
  }
)
