/** Handlers of the approval links of reviewer mails. */
import { Effect } from "effect"
import { HttpApiBuilder } from "effect/http-api"
import { Api } from "../api/Api.ts"
import { publicHostOf, requireConsoleOrigin } from "../console/Csrf.ts"
import { SvcConfig } from "../platform/Config.ts"
import { busyRetryAfter } from "../tasks/ValidationBusy.ts"
import { ApprovalMailLinks } from "./MailLinks.ts"

export const ApprovalLinksHandlers = HttpApiBuilder.group(
  Api,
  "approvalLinks",
  Effect.fn(function*(handlers) {
    const links = yield* ApprovalMailLinks
    const publicHost = publicHostOf((yield* SvcConfig).publicUrl)
    return handlers.handleAll({
      open: ({ payload }) => links.open(payload.token),
      // A decision changes state: the console's request rules apply (its
      // header, its own origin), so no other site can post one.
      decide: ({ payload }) =>
        Effect.andThen(
          requireConsoleOrigin(publicHost),
          links.decide(payload.token, payload.decision, payload.reason, payload)
        ).pipe(
          Effect.tapErrorTag("ValidationBusy", () => busyRetryAfter)
        )
    })
  })
)
