/**
 * Requests through the whole HTTP application before the socket opens,
 * over a loopback port of its own (`HttpListener.rehearse`): Node's HTTP
 * server, the router, the request middleware, authentication, the body's
 * decoding, the feedback handler, the problem answers and their encoding
 * run before the first client's request, which otherwise pays for their
 * first run (tens of milliseconds on a shared two-core machine).
 *
 * What they touch: nothing a tenant can see. `POST /v1/feedback` with a
 * sample correction is sent twice: with a key no organization has (made up
 * here, never stored), answered 401 without reading any organization's
 * data; and with `Identity.rehearsalKey`, a key of an organization that
 * does not exist, held in this process's memory while the rehearsal lasts,
 * answered 404 (that organization has no run). `GET /ready` reads nothing.
 * No log line is written for them; the request metrics count them
 * (`http_server_*`, as any answered request).
 *
 * Bounded: `WARM_PASSES` rounds, at most `WARM_TIMEOUT_MS` in all; a failure
 * is logged and the start goes on (the first request then pays as before).
 */
import { Duration, Effect, Layer } from "effect"
import * as Http from "node:http"
import { Identity } from "../identity/Identity.ts"
import { KEY_PREFIX } from "../identity/KeyFormat.ts"
import { SvcConfig } from "../platform/Config.ts"
import { randomToken } from "../platform/Crypto.ts"
import { HttpListener } from "./Listener.ts"

/** Rounds of the requests below (the first run compiles, the next ones let the JIT see the path). */
const WARM_PASSES = 3
/** The most a start waits for them. */
const WARM_TIMEOUT_MS = 1_000

const SAMPLE_FEEDBACK = JSON.stringify({
  inference_log_id: "4bf92f3577b34da6a3ce929d0e0e4736",
  score: -1,
  correction: { answer: "sample", items: [{ sku: "a-1", quantity: 1 }] }
})

interface Sample {
  readonly method: string
  readonly path: string
  readonly headers: Record<string, string>
  readonly body?: string
}

const feedback = (key: string): Sample => ({
  method: "POST",
  path: "/v1/feedback",
  headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
  body: SAMPLE_FEEDBACK
})

const samples = (keys: { readonly unknown: string; readonly rehearsal: string }): ReadonlyArray<Sample> => [
  feedback(keys.unknown),
  feedback(keys.rehearsal),
  { method: "GET", path: "/ready", headers: {} }
]

/** One request on `agent`'s kept-alive connection; answers the status once the body is read. */
const send = (port: number, agent: Http.Agent, sample: Sample) =>
  Effect.callback<number, Error>((resume) => {
    const request = Http.request({
      host: "127.0.0.1",
      port,
      agent,
      method: sample.method,
      path: sample.path,
      headers: sample.headers
    }, (response) => {
      response.resume()
      response.on("end", () => resume(Effect.succeed(response.statusCode ?? 0)))
      response.on("error", (error) => resume(Effect.fail(error)))
    })
    request.on("error", (error) => resume(Effect.fail(error)))
    request.end(sample.body)
    return Effect.sync(() => request.destroy())
  })

/** Build it after the application is attached and before `ListenLater.listen`. */
export const WarmRequestsLive = Layer.effectDiscard(
  Effect.scoped(Effect.gen(function*() {
    const listener = yield* HttpListener
    if (!(yield* SvcConfig).warmStart) return
    const keys = {
      // A key of the right shape that no organization has: authentication looks it up and refuses it.
      unknown: randomToken(KEY_PREFIX),
      // A key of no organization, in this process's memory while the rehearsal lasts: the body is
      // decoded and the handler runs until it finds no run of that id.
      rehearsal: yield* (yield* Identity).rehearsalKey(["feedback.write"])
    }
    yield* listener.rehearse((port) =>
      Effect.acquireUseRelease(
        Effect.sync(() => new Http.Agent({ keepAlive: true, maxSockets: 1 })),
        (agent) =>
          Effect.gen(function*() {
            for (let pass = 0; pass < WARM_PASSES; pass++) {
              for (const sample of samples(keys)) yield* send(port, agent, sample)
            }
          }),
        (agent) => Effect.sync(() => agent.destroy())
      )
    )
  })).pipe(
    Effect.timeout(Duration.millis(WARM_TIMEOUT_MS)),
    Effect.catchCause((cause) => Effect.logWarning("HTTP warm-up at start did not finish", cause))
  )
)
