/**
 * An endpoint's `rate_limit` (docs/webhooks.md, "Rate limit"), end to end
 * with real HTTPS receivers on loopback: a burst of N events reaches the
 * limited endpoint over at least (N - burst) / rate seconds, while another
 * endpoint of the same organization gets the same burst at once; a bulk
 * replay is paced alike; the field's bounds are a 400 naming it.
 */
import { assert, describe, layer } from "@effect/vitest"
import { Duration, Effect } from "effect"
import { MAX_RATE_LIMIT } from "../../../src/api/Notifications.ts"
import { SvcTest, type TestOrg } from "../../../src/testing.ts"
import { raw } from "../../support/http.ts"
import { HttpsReceiver, type ReceivedRequest, Reply } from "../../support/HttpsReceiver.ts"
import { eventBody, insertEvents, waitForDeliveries, webhookService } from "./support.ts"

const RATE = 5

const send = (org: TestOrg, method: string, path: string, body: unknown) =>
  Effect.flatMap(SvcTest, (svc) =>
    raw(`${svc.baseUrl}${path}`, {
      method,
      headers: { authorization: `Bearer ${org.key}`, "content-type": "application/json" },
      body: JSON.stringify(body)
    }))

/**
 * No window between two arrivals held more requests than the burst (one
 * second's worth) and the rate over the window allow, give or take how
 * much a send's own time varies (a first request's TLS handshake, say):
 * on two cores busy with other files, a burst's sends were seen reaching
 * the receiver about 0.8 s late, bunched with the next second's. Without
 * pacing all N arrive within a fraction of a second, well over the bound,
 * and the total time below catches it too. Answers the seconds from
 * `start` (when the burst was committed) to the last.
 */
const paced = (requests: ReadonlyArray<ReceivedRequest>, start: number) => {
  const JITTER_S = 1
  for (let i = 0; i < requests.length; i++) {
    for (let j = i; j < requests.length; j++) {
      const window = (requests[j]!.receivedAt - requests[i]!.receivedAt) / 1000
      assert.isAtMost(
        j - i + 1,
        RATE + Math.floor((window + JITTER_S) * RATE) + 1,
        `${j - i + 1} requests within ${window} s`
      )
    }
  }
  return (requests.at(-1)!.receivedAt - start) / 1000
}

// One retry only: a burst of failures stays below the cooldown threshold (50).
layer(webhookService({ webhookRetrySchedule: [Duration.millis(100)] }), { excludeTestServices: true })(
  "endpoint rate limit",
  (it) => {
    describe("the field", () => {
      it.effect("set on create, changed and lifted (null) by PATCH, unchanged when absent; outside 1..MAX a 400 naming rate_limit", () =>
        Effect.gen(function*() {
          const receiver = yield* HttpsReceiver.make()
          const org = yield* SvcTest.org()
          const url = receiver.url("/field")
          for (const rate_limit of [0, -1, MAX_RATE_LIMIT + 1, 1.5, "5"]) {
            const response = yield* send(org, "POST", "/v1/notification-endpoints", { url, rate_limit })
            assert.strictEqual(response.status, 400, String(rate_limit))
            assert.include(response.text, "rate_limit")
          }
          const { endpoint } = yield* org.client.notifications.create({ payload: { url, rate_limit: MAX_RATE_LIMIT } })
          assert.strictEqual(endpoint.rate_limit, MAX_RATE_LIMIT)
          const changed = yield* org.client.notifications.update({
            params: { id: endpoint.id },
            payload: { rate_limit: 2 }
          })
          assert.strictEqual(changed.rate_limit, 2)
          const kept = yield* org.client.notifications.update({
            params: { id: endpoint.id },
            payload: { events: ["approval.requested"] }
          })
          assert.strictEqual(kept.rate_limit, 2)
          const patch = yield* send(org, "PATCH", `/v1/notification-endpoints/${endpoint.id}`, { rate_limit: 0 })
          assert.strictEqual(patch.status, 400)
          const lifted = yield* org.client.notifications.update({
            params: { id: endpoint.id },
            payload: { rate_limit: null }
          })
          assert.isNull(lifted.rate_limit)
          assert.isNull((yield* org.client.notifications.list()).endpoints[0]!.rate_limit)
        }).pipe(Effect.scoped))
    })

    describe("pacing", () => {
      it.effect("a burst to a limited endpoint takes at least (N - burst) / rate seconds; another endpoint of the organization gets it at once", () =>
        Effect.gen(function*() {
          const limitedReceiver = yield* HttpsReceiver.make()
          const freeReceiver = yield* HttpsReceiver.make()
          const org = yield* SvcTest.org()
          const limited = (yield* org.client.notifications.create({
            payload: { url: limitedReceiver.url("/limited"), rate_limit: RATE }
          })).endpoint
          yield* org.client.notifications.create({ payload: { url: freeReceiver.url("/free") } })
          const n = 20
          const start = Date.now()
          yield* insertEvents(Array.from({ length: n }, () => eventBody(org.orgId, "approval.requested")))
          const free = yield* freeReceiver.waitForRequests(n)
          const limitedSoFar = limitedReceiver.requests().length
          const took = paced(yield* limitedReceiver.waitForRequests(n, "20 seconds"), start)
          assert.isAtLeast(took, (n - RATE) / RATE)
          // The unlimited endpoint had every delivery while the limited one had only its burst and a little more.
          const freeTook = (free.at(-1)!.receivedAt - free[0]!.receivedAt) / 1000
          assert.isBelow(freeTook, 1.5)
          assert.isBelow(limitedSoFar, n)
          yield* waitForDeliveries(
            limited.id,
            (rows) => rows.length === n && rows.every((r) => r.status === "delivered")
          )
        }).pipe(Effect.scoped))

      it.effect("a bulk replay is paced by the limit too", () =>
        Effect.gen(function*() {
          const receiver = yield* HttpsReceiver.make({ respond: () => Reply.status(502) })
          const org = yield* SvcTest.org()
          const { endpoint } = yield* org.client.notifications.create({ payload: { url: receiver.url("/replayed") } })
          const since = new Date(Date.now() - 1_000).toISOString()
          const n = 15
          yield* insertEvents(Array.from({ length: n }, () => eventBody(org.orgId, "approval.requested")))
          yield* waitForDeliveries(endpoint.id, (rows) => rows.length === n && rows.every((r) => r.status === "failed"))
          yield* org.client.notifications.update({ params: { id: endpoint.id }, payload: { rate_limit: RATE } })
          receiver.respond(() => Reply.ok())
          const before = receiver.requests().length
          const start = Date.now()
          const bulk = yield* org.client.notifications.replayFailed({ params: { id: endpoint.id }, payload: { since } })
          assert.strictEqual(bulk.queued, n)
          const all = yield* receiver.waitForRequests(before + n, "20 seconds")
          const took = paced(all.slice(before), start)
          assert.isAtLeast(took, (n - RATE) / RATE)
        }).pipe(Effect.scoped))
    })
  }
)
