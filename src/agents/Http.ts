import { Effect } from "effect"
import { HttpApiBuilder } from "effect/http-api"
import { Api } from "../api/Api.ts"
import { CurrentPrincipal } from "../api/Security.ts"
import { StreamGuard } from "../identity/StreamGuard.ts"
import { resumeAfter, sseResponse } from "../streams/Sse.ts"
import { busyRetryAfter } from "../tasks/ValidationBusy.ts"
import { AgentSessions } from "./Sessions.ts"

export const AgentSessionsHandlers = HttpApiBuilder.group(
  Api,
  "agentSessions",
  Effect.fn(function*(handlers) {
    const sessions = yield* AgentSessions
    const guard = yield* StreamGuard
    return handlers.handleAll({
      create: ({ payload }) => CurrentPrincipal.use((p) => sessions.create(p.orgId, payload)),
      get: ({ params, query }) => CurrentPrincipal.use((p) => sessions.get(p.orgId, params.session_id, query)),
      governStep: ({ params, payload }) =>
        CurrentPrincipal.use((p) => sessions.governStep(p.orgId, params.session_id, payload)).pipe(
          Effect.tapErrorTag("ValidationBusy", () => busyRetryAfter)
        ),
      reportOutcome: ({ params, payload }) =>
        CurrentPrincipal.use((p) => sessions.reportOutcome(p.orgId, params.session_id, params.step_id, payload)),
      stream: ({ params, query }) =>
        Effect.gen(function*() {
          const principal = yield* CurrentPrincipal
          const after = yield* resumeAfter(query)
          const frames = yield* sessions.stream(principal.orgId, params.session_id, after)
          return sseResponse(yield* guard.guard(principal, frames))
        })
    })
  })
)
