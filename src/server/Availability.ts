/**
 * While the database cannot be reached, requests answer `503
 * SERVICE_UNAVAILABLE` with `Retry-After`, not `500 INTERNAL`: the client
 * learns that nothing was done and that trying again later is right.
 *
 * Database failures are defects in the services (STYLE: infrastructure
 * failures are not domain errors); the router's middleware recognizes the
 * ones that mean "unreachable for now" and turns them into the declared
 * problem. Every other defect stays a 500.
 */
import { Cause, Effect, Layer, Option } from "effect"
import { HttpEffect, HttpServerResponse } from "effect/http"
import { SqlError } from "effect/sql"
import { Availability } from "../api/Availability.ts"
import { ServiceUnavailable } from "../api/Errors.ts"

/** Seconds a client is asked to wait before retrying. */
export const RETRY_AFTER_SECONDS = 5

// PostgreSQL SQLSTATE classes and codes that mean the server is not there
// for the moment (https://www.postgresql.org/docs/current/errcodes-appendix.html):
// 08 connection exception, 53 insufficient resources (too many connections),
// 57P01-57P05 shutdown, crash, starting up, idle session timeout.
const UNAVAILABLE_STATE = /^(08|53|57P0[1-5])/

const sqlState = (value: unknown): string | undefined => {
  if (typeof value !== "object" || value === null) return undefined
  const code = (value as { code?: unknown }).code
  return typeof code === "string" ? code : undefined
}

/** Why a `SqlError` means the database is unavailable for now, or `undefined` when it means something else. */
const unavailableBecause = (error: SqlError.SqlError): string | undefined => {
  const reason = error.reason
  const code = sqlState(reason.cause)
  switch (reason._tag) {
    case "ConnectionError":
      return `the database cannot be reached${code === undefined ? "" : ` (${code})`}`
    case "StatementTimeoutError":
      return "the database did not answer in time"
    case "UnknownError":
      return code !== undefined && UNAVAILABLE_STATE.test(code) ? `the database is not available (${code})` : undefined
    default:
      return undefined
  }
}

/** Why `cause` means the database is unavailable for now, if it does. */
export const databaseUnavailable = (cause: Cause.Cause<unknown>): Option.Option<string> => {
  for (const reason of cause.reasons) {
    const value = Cause.isDieReason(reason) ? reason.defect : Cause.isFailReason(reason) ? reason.error : undefined
    if (SqlError.isSqlError(value)) {
      const because = unavailableBecause(value)
      if (because !== undefined) return Option.some(because)
    }
  }
  return Option.none()
}

/** Adds `Retry-After` to the response of the current request, whatever it becomes. */
export const retryAfter = HttpEffect.appendPreResponseHandler((_request, response) =>
  Effect.succeed(HttpServerResponse.setHeader(response, "retry-after", String(RETRY_AFTER_SECONDS)))
)

/** The problem for an outage, for the client: why, and when to retry (never the driver's text). */
export const unavailableProblem = (because: string) =>
  new ServiceUnavailable({
    detail: `The service cannot reach its database at the moment (${because}). Nothing was done; retry after ${RETRY_AFTER_SECONDS} seconds.`
  })

/**
 * Nothing per request: the router's middleware (`Middleware.ts`), which
 * sees every failure of every route, answers an outage with this problem
 * and `Retry-After` on its failure path. The tag stays declared on the API
 * so the contract (and the typed client) knows the 503.
 */
export const AvailabilityLive = Layer.succeed(Availability, (httpEffect) => httpEffect)
