import { HttpApiMiddleware } from "effect/http-api"
import { ServiceUnavailable } from "./Errors.ts"

/**
 * Declares `503 SERVICE_UNAVAILABLE` (with `Retry-After`) on every
 * endpoint: while the database cannot be reached, a request answers that
 * instead of a 500, and the typed client can catch it by tag. Implemented
 * in `src/server`.
 */
export class Availability extends HttpApiMiddleware.Service<Availability>()("svc/api/Availability", {
  error: ServiceUnavailable
}) {}
