import { HttpApiMiddleware } from "effect/http-api"
import { ValidationBusy } from "./Errors.ts"
import type { CurrentPrincipal } from "./Security.ts"

/**
 * Admission to the validation workers, decided once the caller is known and
 * before the request's body is read: when the validation queue is full and
 * the organization holds at least its share of it, `429 VALIDATION_BUSY`
 * with `Retry-After`. Declared on the endpoints whose work runs in those
 * workers; implemented in `src/server`.
 */
export class ValidationAdmission extends HttpApiMiddleware.Service<ValidationAdmission, {
  requires: CurrentPrincipal
}>()("svc/api/ValidationAdmission", {
  error: ValidationBusy
}) {}
