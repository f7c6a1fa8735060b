import { HttpApiMiddleware } from "effect/http-api"
import { InternalError, InvalidRequest, PayloadTooLarge, UnsupportedMediaType } from "./Errors.ts"

/**
 * Turns request decode failures into `400 INVALID_REQUEST` problems naming
 * the field at fault. Declared on the whole API so every endpoint (and the
 * typed client) knows the error; implemented in `src/server`.
 *
 * It also declares what the server answers around decoding for every
 * endpoint: a body over the limit (413), a body that is not JSON (415) and
 * a defect (500). The OpenAPI document keeps 413 and 415 only on operations
 * that read a body (`Documentation.ts`).
 */
export class RequestValidation extends HttpApiMiddleware.Service<RequestValidation>()("svc/api/RequestValidation", {
  error: [InvalidRequest, PayloadTooLarge, UnsupportedMediaType, InternalError]
}) {}
