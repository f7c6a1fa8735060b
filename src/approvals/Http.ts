import { Effect } from "effect"
import { HttpApiBuilder } from "effect/http-api"
import { Api } from "../api/Api.ts"
import { CurrentPrincipal } from "../api/Security.ts"
import { Approvals } from "./Approvals.ts"

export const ApprovalPoliciesHandlers = HttpApiBuilder.group(
  Api,
  "approvalPolicies",
  Effect.fn(function*(handlers) {
    const approvals = yield* Approvals
    return handlers.handleAll({
      put: ({ params, payload }) => CurrentPrincipal.use((p) => approvals.putPolicy(p.orgId, params.action_class, payload)),
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
    return handlers.handleAll({
      list: () => Effect.die("not implemented yet"),
      stream: () => Effect.die("not implemented yet"),
      get: ({ params }) => CurrentPrincipal.use((p) => approvals.get(p.orgId, params.approval_id)),
      decide: ({ params, payload }) =>
        CurrentPrincipal.use((p) => approvals.decide(p.orgId, p.actor, params.approval_id, payload.decision))
    })
  })
)
