import { Effect } from "effect"
import { HttpApiBuilder } from "effect/http-api"
import { FeedbackUsage } from "../api/Admission.ts"
import { Api } from "../api/Api.ts"
import { CurrentPrincipal } from "../api/Security.ts"
import { responseHeader } from "../platform/ResponseHeader.ts"
import { Feedback } from "./Feedback.ts"

export const FeedbackHandlers = HttpApiBuilder.group(
  Api,
  "feedback",
  Effect.fn(function*(handlers) {
    const feedback = yield* Feedback
    return handlers.handleAll({
      submit: ({ payload }) =>
        FeedbackUsage.use((usage) => CurrentPrincipal.use((p) => feedback.submit(p.orgId, payload, usage.bytes))),
      list: ({ query }) => CurrentPrincipal.use((p) => feedback.list(p.orgId, query)),
      stage: ({ params }) => CurrentPrincipal.use((p) => feedback.stage(p.orgId, params.feedback_id)),
      reject: ({ params }) => CurrentPrincipal.use((p) => feedback.reject(p.orgId, params.feedback_id)),
      promotePreview: ({ params, query }) =>
        CurrentPrincipal.use((p) => feedback.preview(p.orgId, params.task_id, query)),
      promote: ({ params, payload }) =>
        CurrentPrincipal.use((p) => feedback.promote(p.orgId, params.task_id, payload)).pipe(
          Effect.tapErrorTag("RateLimited", (error) => responseHeader("retry-after", String(error.retry_after_seconds)))
        )
    })
  })
)
