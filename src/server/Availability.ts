/**
 * While the database cannot be reached, requests answer `503
 * SERVICE_UNAVAILABLE` with `Retry-After`, not `500 INTERNAL`: the client
 * learns that nothing was done and that trying again later is right.
 *
 * Database failures are defects in the services (STYLE: infrastructure
 * failures are not domain errors); the router's middleware recognizes the
 * ones that mean "unreachable for now" (`databaseUnavailable`) and turns
 * them into the declared problem. Every other defect stays a 500.
 */
import { Layer } from "effect"
import { Availability } from "../api/Availability.ts"
import { ServiceUnavailable } from "../api/Errors.ts"

/** Seconds a client is asked to wait before retrying. */
export const RETRY_AFTER_SECONDS = 5

/** The problem for an outage, for the client: why, and when to retry (never the driver's text). */
export const unavailableProblem = (because: string) =>
  new ServiceUnavailable({
    detail:
      `The service cannot reach its database at the moment (${because}). Nothing was done; retry after ${RETRY_AFTER_SECONDS} seconds.`
  })

/**
 * Nothing per request: the router's middleware (`Middleware.ts`), which
 * sees every failure of every route, answers an outage with this problem
 * and `Retry-After` on its failure path. The tag stays declared on the API
 * so the contract (and the typed client) knows the 503.
 */
export const AvailabilityLive = Layer.succeed(Availability, (httpEffect) => httpEffect)
