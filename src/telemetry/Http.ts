import { Effect } from "effect"
import { HttpApiBuilder } from "effect/http-api"
import { Api } from "../api/Api.ts"
import { CurrentPrincipal } from "../api/Security.ts"
import { TelemetryDestinations } from "./Destinations.ts"

export const TelemetryHandlers = HttpApiBuilder.group(
  Api,
  "telemetry",
  Effect.fn(function*(handlers) {
    const destinations = yield* TelemetryDestinations
    return handlers.handleAll({
      list: () =>
        CurrentPrincipal.use((p) => destinations.list(p.orgId)).pipe(Effect.map((list) => ({ destinations: list }))),
      create: ({ payload }) => CurrentPrincipal.use((p) => destinations.create(p.orgId, payload)),
      test: ({ params }) => CurrentPrincipal.use((p) => destinations.test(p.orgId, params.id)),
      remove: ({ params }) => CurrentPrincipal.use((p) => destinations.remove(p.orgId, params.id)),
      deliveries: ({ params, query }) =>
        CurrentPrincipal.use((p) => destinations.deliveries(p.orgId, params.id, query)),
      replay: ({ params }) => CurrentPrincipal.use((p) => destinations.replay(p.orgId, params.id, params.delivery))
    })
  })
)
