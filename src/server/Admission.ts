/**
 * Admission to the validation workers over HTTP: the server side of
 * `ValidationAdmission`, and the answer every refusal gets.
 *
 * The middleware runs after authentication and before the body is read,
 * so a refusal costs a map lookup, not a parse: under a flood from one
 * organization the process keeps its CPU for the requests it accepted.
 */
import { Effect, Layer, type Types } from "effect"
import type { HttpServerRequest, HttpServerResponse } from "effect/http"
import { FeedbackQuota, FeedbackUsage, ValidationAdmission } from "../api/Admission.ts"
import type { ValidationBusy } from "../api/Errors.ts"
import { CurrentPrincipal } from "../api/Security.ts"
import { Feedback } from "../feedback/Feedback.ts"
import { SvcConfig } from "../platform/Config.ts"
import { busyRetryAfter, validationBusy } from "../tasks/ValidationBusy.ts"

export const ValidationAdmissionLive = Layer.effect(
  ValidationAdmission,
  Effect.gen(function*() {
    const feedback = yield* Feedback
    const capacity = (yield* SvcConfig).answerValidationQueue
    const refused = Effect.andThen(busyRetryAfter, Effect.fail(validationBusy(capacity, "correction checks")))
    return ValidationAdmission.of((httpEffect) =>
      CurrentPrincipal.use(
        (
          principal
        ): Effect.Effect<
          HttpServerResponse.HttpServerResponse,
          ValidationBusy | Types.unhandled,
          HttpServerRequest.HttpServerRequest
        > => {
          const release = feedback.admit(principal.orgId)
          if (release === undefined) return refused
          return Effect.ensuring(httpEffect, Effect.sync(release))
        }
      )
    )
  })
)

/**
 * The feedback quota before the body: the organization's usage (read at
 * most once per organization every two seconds, `UsageHint.ts`), handed to
 * the handler so a correction is weighed against it before any worker sees
 * it. The body's length does
 * not decide more than this: what counts is the correction's JSON once
 * parsed and scrubbed, which may be shorter or longer than the body.
 */
export const FeedbackQuotaLive = Layer.effect(
  FeedbackQuota,
  Effect.gen(function*() {
    const feedback = yield* Feedback
    return FeedbackQuota.of((httpEffect) =>
      CurrentPrincipal.use((principal) =>
        Effect.flatMap(
          feedback.usage(principal.orgId),
          (bytes) => Effect.provideService(httpEffect, FeedbackUsage, { bytes })
        )
      )
    )
  })
)
