import { Effect, Stream } from "effect"
import { HttpServerRequest, HttpServerResponse } from "effect/http"
import { HttpApiBuilder } from "effect/http-api"
import { Api } from "../api/Api.ts"
import { InvalidRequest } from "../api/Errors.ts"
import { CurrentPrincipal } from "../api/Security.ts"
import { StreamGuard } from "../identity/StreamGuard.ts"
import { AgentSessions } from "./Sessions.ts"

/** An SSE answer carrying `frames`. */
export const sseResponse = (frames: Stream.Stream<string>) =>
  HttpServerResponse.stream(Stream.encodeText(frames), {
    contentType: "text/event-stream",
    headers: {
      "cache-control": "no-cache, no-store",
      // Tell buffering proxies (nginx) to pass events through at once.
      "x-accel-buffering": "no"
    }
  })

const EVENT_ID = /^\d{1,18}$/

/**
 * Where a stream resumes. `Last-Event-ID` wins over `after`: a browser's
 * `EventSource` reconnects to the URL it was opened with (and its `after`)
 * and sends the id of the last event it received in that header.
 */
export const resumeAfter = (query: { readonly after?: string }) =>
  Effect.gen(function*() {
    const request = yield* HttpServerRequest.HttpServerRequest
    const header = request.headers["last-event-id"]
    if (header !== undefined && header.trim() !== "") {
      const value = header.trim()
      if (!EVENT_ID.test(value)) {
        return yield* new InvalidRequest({ field: "Last-Event-ID", detail: "Last-Event-ID must be an event id from this stream." })
      }
      return BigInt(value).toString()
    }
    return query.after === undefined ? "0" : BigInt(query.after).toString()
  })

export const AgentSessionsHandlers = HttpApiBuilder.group(
  Api,
  "agentSessions",
  Effect.fn(function*(handlers) {
    const sessions = yield* AgentSessions
    const guard = yield* StreamGuard
    return handlers.handleAll({
      create: ({ payload }) => CurrentPrincipal.use((p) => sessions.create(p.orgId, payload)),
      get: ({ params }) => CurrentPrincipal.use((p) => sessions.get(p.orgId, params.session_id)),
      governStep: ({ params, payload }) =>
        CurrentPrincipal.use((p) => sessions.governStep(p.orgId, params.session_id, payload)),
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
