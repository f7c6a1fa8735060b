import { HttpApiMiddleware } from "effect/http-api"
import { InvalidRequest } from "./Errors.ts"

/**
 * Turns request decode failures into `400 INVALID_REQUEST` problems naming
 * the field at fault. Declared on the whole API so every endpoint (and the
 * typed client) knows the error; implemented in `src/server`.
 */
export class RequestValidation extends HttpApiMiddleware.Service<RequestValidation>()("svc/api/RequestValidation", {
  error: InvalidRequest
}) {}
