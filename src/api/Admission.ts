import { Context } from "effect"
import { HttpApiMiddleware } from "effect/http-api"
import { LimitReached, ValidationBusy } from "./Errors.ts"
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

/** The organization's stored feedback bytes, read before the request's body. */
export class FeedbackUsage
  extends Context.Service<FeedbackUsage, { readonly bytes: number }>()("svc/api/FeedbackUsage")
{}

/**
 * The organization's feedback quota (`SVC_MAX_FEEDBACK_BYTES_PER_ORG`),
 * decided once the caller is known and before the body is read: an
 * organization that cannot store even a bare score is answered
 * `409 LIMIT_REACHED` without its body being parsed. It provides the usage
 * it read, so that a correction that would pass the quota is refused before
 * it is checked against the answer schema. Implemented in `src/server`.
 */
export class FeedbackQuota extends HttpApiMiddleware.Service<FeedbackQuota, {
  requires: CurrentPrincipal
  provides: FeedbackUsage
}>()("svc/api/FeedbackQuota", {
  error: LimitReached
}) {}
