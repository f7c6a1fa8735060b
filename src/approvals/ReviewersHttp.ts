/** Handlers of reviewer groups (`Reviewers.ts`), delegations (`Delegations.ts`) and a person's own address. */
import { Effect } from "effect"
import { HttpApiBuilder } from "effect/http-api"
import { Api } from "../api/Api.ts"
import { CurrentPrincipal } from "../api/Security.ts"
import { Delegations } from "./Delegations.ts"
import { Reviewers } from "./Reviewers.ts"

export const ReviewersHandlers = HttpApiBuilder.group(
  Api,
  "reviewers",
  Effect.fn(function*(handlers) {
    const reviewers = yield* Reviewers
    const delegations = yield* Delegations
    return handlers.handleAll({
      putGroup: ({ params, payload }) => CurrentPrincipal.use((p) => reviewers.putGroup(p.orgId, params.name, payload)),
      listGroups: () =>
        CurrentPrincipal.use((p) => reviewers.listGroups(p.orgId)).pipe(Effect.map((groups) => ({ groups }))),
      getGroup: ({ params }) => CurrentPrincipal.use((p) => reviewers.getGroup(p.orgId, params.name)),
      deleteGroup: ({ params }) => CurrentPrincipal.use((p) => reviewers.deleteGroup(p.orgId, params.name)),
      delegate: ({ payload }) => CurrentPrincipal.use((p) => delegations.delegate(p.orgId, p.actor, payload)),
      listDelegations: () =>
        CurrentPrincipal.use((p) => delegations.list(p.orgId)).pipe(
          Effect.map((delegations) => ({ delegations }))
        ),
      endDelegation: ({ params }) =>
        CurrentPrincipal.use((p) => delegations.end(p.orgId, p.actor, params.delegation_id)),
      // The caller's own: the principal's actor (the key, or the console person), never a name from the request.
      ownAddress: () => CurrentPrincipal.use((p) => reviewers.ownAddress(p.orgId, p.actor)),
      setOwnAddress: ({ payload }) =>
        CurrentPrincipal.use((p) => reviewers.setOwnAddress(p.orgId, p.actor, payload.email))
    })
  })
)
