/**
 * `warmStart` (`SVC_WARM_START`, on by default): before it answers, a
 * service starts its worker threads and sends requests through its own
 * application (`src/server/WarmRequest.ts`), which the request metrics
 * count: `POST /v1/feedback` with a made-up key (401) and with a key of no
 * organization that lasts as long as the rehearsal (404: no such run), and
 * `GET /ready`.
 * The test kit's `SvcTest.layer` skips it unless its `config` asks.
 */
import { assert, describe, layer } from "@effect/vitest"
import { Effect, Option, Redacted } from "effect"
import { SvcTest } from "../../../src/testing.ts"
import { histogram, scrape } from "../../support/prometheus.ts"

const TOKEN = "metrics-token-0123456789-abcdef"
const metricsToken = Option.some(Redacted.make(TOKEN))

/** Requests the service answered before the test sent any: its warm-up's. */
const rehearsed = Effect.gen(function*() {
  const svc = yield* SvcTest
  const scraped = yield* scrape(`${svc.baseUrl}/metrics`, TOKEN)
  const count = (method: string, route: string, status: string) =>
    histogram(scraped, "http_server_request_duration_seconds", {
      http_request_method: method,
      http_route: route,
      http_response_status_code: status
    })?.count ?? 0
  return {
    feedback: count("POST", "/v1/feedback", "401"),
    authenticated: count("POST", "/v1/feedback", "404"),
    ready: count("GET", "/ready", "200")
  }
})

describe("warming up before answering", () => {
  layer(SvcTest.layer({ config: { metricsToken, warmStart: true } }), { excludeTestServices: true })(
    "with warmStart",
    (it) => {
      it.effect("the service rehearses its first requests before it answers", () =>
        Effect.gen(function*() {
          const { authenticated, feedback, ready } = yield* rehearsed
          assert.isAbove(feedback, 0)
          assert.isAbove(authenticated, 0)
          assert.isAbove(ready, 0)
        }))

      it.effect("the rehearsal's key belongs to no organization and is never stored", () =>
        Effect.gen(function*() {
          const svc = yield* SvcTest
          // Nothing was provisioned in this database: the warm-up wrote no organization and no key.
          assert.deepStrictEqual(
            yield* svc
              .sql`SELECT (SELECT count(*) FROM orgs)::int AS orgs, (SELECT count(*) FROM api_keys)::int AS keys`,
            [{ orgs: 0, keys: 0 }]
          )
        }))
    }
  )

  layer(SvcTest.layer({ config: { metricsToken } }), { excludeTestServices: true })(
    "the test kit, by default",
    (it) => {
      it.effect("answers without a warm-up: no request went through it before the test's", () =>
        Effect.gen(function*() {
          assert.deepStrictEqual(yield* rehearsed, { feedback: 0, authenticated: 0, ready: 0 })
        }))
    }
  )
})
