import { Effect } from "effect"
import { HttpApiBuilder } from "effect/http-api"
import { Api } from "../api/Api.ts"
import { CurrentPrincipal } from "../api/Security.ts"
import { StreamGuard } from "../identity/StreamGuard.ts"
import { responseHeader } from "../platform/ResponseHeader.ts"
import { resumeAfter, sseResponse } from "../streams/Sse.ts"
import { busyRetryAfter } from "../tasks/ValidationBusy.ts"
import { Approvals } from "./Approvals.ts"
import { ApprovalContexts } from "./Context.ts"
import { ApprovalFeed } from "./OrgStream.ts"

export const ApprovalPoliciesHandlers = HttpApiBuilder.group(
  Api,
  "approvalPolicies",
  Effect.fn(function*(handlers) {
    const approvals = yield* Approvals
    return handlers.handleAll({
      put: ({ params, payload }) =>
        CurrentPrincipal.use((p) => approvals.putPolicy(p.orgId, params.action_class, payload)).pipe(
          Effect.tapErrorTag("ValidationBusy", () => busyRetryAfter)
        ),
      dryRun: ({ params, payload }) =>
        CurrentPrincipal.use((p) => approvals.dryRun(p.orgId, params.action_class, payload)).pipe(
          Effect.tapErrorTag("ValidationBusy", () => busyRetryAfter),
          Effect.tapErrorTag("RateLimited", (error) => responseHeader("retry-after", String(error.retry_after_seconds)))
        ),
      list: () =>
        CurrentPrincipal.use((p) => approvals.listPolicies(p.orgId)).pipe(Effect.map((policies) => ({ policies })))
    })
  })
)

export const ApprovalsHandlers = HttpApiBuilder.group(
  Api,
  "approvals",
  Effect.fn(function*(handlers) {
    const approvals = yield* Approvals
    const feed = yield* ApprovalFeed
    const guard = yield* StreamGuard
    const contexts = yield* ApprovalContexts
    return handlers.handleAll({
      history: ({ query }) => CurrentPrincipal.use((p) => contexts.history(p.orgId, query)),
      context: ({ params }) => CurrentPrincipal.use((p) => contexts.context(p.orgId, params.approval_id)),
      list: ({ query }) =>
        CurrentPrincipal.use((p) =>
          feed.list(p.orgId, { ...query, assignedTo: query.assigned_to === "me" ? p.actor : undefined })
        ),
      stream: ({ query }) =>
        Effect.gen(function*() {
          const principal = yield* CurrentPrincipal
          const after = yield* resumeAfter(query)
          return sseResponse(yield* guard.guard(principal, feed.stream(principal.orgId, after)))
        }),
      get: ({ params }) => CurrentPrincipal.use((p) => approvals.get(p.orgId, params.approval_id)),
      decide: ({ params, payload }) =>
        CurrentPrincipal.use((p) =>
          approvals.decide(p.orgId, p.actor, params.approval_id, {
            decision: payload.decision,
            reason: payload.reason,
            edit: payload
          })
        ).pipe(
          Effect.tapErrorTag("ValidationBusy", () => busyRetryAfter),
          // Only the shared reviewer address's mail link lacks a person; a caller of the API never does.
          Effect.catchTag("PersonRequired", Effect.die)
        )
    })
  })
)
