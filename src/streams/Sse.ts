/**
 * Server-Sent Events answers and where a resumed stream starts, for every
 * stream the API serves (an agent session's events, an organization's
 * approval changes).
 */
import { Effect, Schema, Stream } from "effect"
import { HttpServerRequest, HttpServerResponse } from "effect/http"
import { LastEventId } from "../api/Common.ts"
import { InvalidRequest } from "../api/Errors.ts"

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

/**
 * Where a stream resumes. `Last-Event-ID` wins over `after`: a browser's
 * `EventSource` reconnects to the URL it was opened with (and its `after`)
 * and sends the id of the last event it received in that header.
 */
export const resumeAfter = (query: { readonly after?: string | undefined }) =>
  Effect.gen(function*() {
    const request = yield* HttpServerRequest.HttpServerRequest
    const header = request.headers["last-event-id"]?.trim()
    if (header !== undefined && header !== "") {
      if (!isLastEventId(header)) {
        return yield* new InvalidRequest({
          field: "Last-Event-ID",
          detail: "Last-Event-ID must be an event id from this stream."
        })
      }
      return BigInt(header).toString()
    }
    return query.after === undefined ? "0" : BigInt(query.after).toString()
  })

const isLastEventId = Schema.is(LastEventId)
