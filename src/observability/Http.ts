/**
 * Where Prometheus reads `/metrics`:
 *
 * - `SVC_METRICS_PORT`: a listener of its own (on `SVC_METRICS_HOST`,
 *   default `HOST`) that serves `GET /metrics` to anyone who can reach it,
 *   and nothing else (404). Keep it on a network only the monitoring reaches.
 * - `SVC_METRICS_TOKEN`: `GET /metrics` on the API port, for
 *   `Authorization: Bearer <token>` only (401 without a bearer token, 403
 *   with another one). The token is compared in constant time and never
 *   logged.
 *
 * With neither, `/metrics` does not exist (404, like any unknown route).
 */
import * as NodeHttpServer from "@effect/platform-node/NodeHttpServer"
import { Effect, Layer, Option, Redacted } from "effect"
import { HttpRouter, HttpServerRequest, HttpServerResponse } from "effect/http"
import { createHash, timingSafeEqual } from "node:crypto"
import { createServer } from "node:http"
import { problemType } from "../api/Errors.ts"
import { SvcConfig } from "../platform/Config.ts"
import { listenFailed } from "../platform/StartFailure.ts"
import { MetricsScrape } from "./Scrape.ts"

const PROBLEM_JSON = "application/problem+json"

const problem = (
  status: 401 | 403 | 404,
  code: string,
  title: string,
  detail: string,
  headers: Record<string, string> = {}
) =>
  HttpServerResponse.jsonUnsafe(
    { type: problemType(code), status, title, code, detail },
    { status, contentType: PROBLEM_JSON, headers }
  )

const digest = (text: string) => createHash("sha256").update(text, "utf8").digest()

/** `Bearer <token>` with the expected token, compared in constant time (digests have one length). */
const bearerMatches = (header: string | undefined, expected: Buffer): "missing" | "wrong" | "ok" => {
  const match = header === undefined ? null : /^Bearer[ \t]+(\S+)[ \t]*$/i.exec(header)
  if (match === null) return "missing"
  return timingSafeEqual(digest(match[1]!), expected) ? "ok" : "wrong"
}

const answer = (metrics: MetricsScrape["Service"]) =>
  Effect.map(
    metrics.scrape,
    ({ body, contentType }) => HttpServerResponse.text(body, { contentType, headers: { "cache-control": "no-store" } })
  )

/** `GET /metrics` on the API port, behind `SVC_METRICS_TOKEN`; absent when the token is unset. */
export const MetricsRoute = Layer.effectDiscard(Effect.gen(function*() {
  const config = yield* SvcConfig
  if (Option.isNone(config.metricsToken)) return
  const expected = digest(Redacted.value(config.metricsToken.value))
  const scrape = yield* MetricsScrape
  const router = yield* HttpRouter.HttpRouter
  yield* router.add(
    "GET",
    "/metrics",
    Effect.gen(function*() {
      const request = yield* HttpServerRequest.HttpServerRequest
      switch (bearerMatches(request.headers["authorization"], expected)) {
        case "missing":
          return problem(
            401,
            "UNAUTHENTICATED",
            "Missing bearer token",
            "GET /metrics needs Authorization: Bearer <SVC_METRICS_TOKEN>.",
            {
              "www-authenticate": "Bearer realm=\"metrics\""
            }
          )
        case "wrong":
          return problem(
            403,
            "FORBIDDEN",
            "This token cannot read metrics",
            "The bearer token is not SVC_METRICS_TOKEN."
          )
        case "ok":
          return yield* answer(scrape)
      }
    })
  )
}))

/** The separate `/metrics` listener on `SVC_METRICS_PORT`; nothing when it is unset. */
export const MetricsListener = Layer.effectDiscard(Effect.gen(function*() {
  const config = yield* SvcConfig
  if (Option.isNone(config.metricsPort)) return
  const scrape = yield* MetricsScrape
  const server = yield* NodeHttpServer.make(() => createServer({ headersTimeout: 10_000, requestTimeout: 30_000 }), {
    port: config.metricsPort.value,
    host: config.metricsHost,
    gracefulShutdownTimeout: "2 seconds"
  }).pipe(
    Effect.mapError(
      listenFailed({ port: "SVC_METRICS_PORT", host: "SVC_METRICS_HOST" }, {
        port: config.metricsPort.value,
        host: config.metricsHost
      })
    )
  )
  const app = Effect.gen(function*() {
    const request = yield* HttpServerRequest.HttpServerRequest
    const path = request.url.split("?")[0]
    if (path === "/metrics" && (request.method === "GET" || request.method === "HEAD")) return yield* answer(scrape)
    return problem(404, "NOT_FOUND", "Not found", "This listener serves GET /metrics only.")
  })
  // Scrapes are not work worth tracing.
  yield* server.serve(app).pipe(Effect.withTracerEnabled(false))
  const address = server.address._tag === "UnixPathAddress"
    ? server.address.path
    : `http://${String(server.address.address)}:${server.address.port}`
  yield* Effect.logInfo("svc metrics listening").pipe(Effect.annotateLogs({ address }))
}))
