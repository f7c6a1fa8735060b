/**
 * Requests to one destination host are bounded across an organization's
 * endpoints: `SVC_WEBHOOK_PER_HOST` requests in flight at
 * once per process (beyond which an endpoint with none in flight may still
 * start one), over one pool of connections, however many endpoints the
 * organization points at that host. Another organization on the same host
 * has a bound of its own.
 */
import { assert, layer } from "@effect/vitest"
import { Effect } from "effect"
import { SvcTest } from "../../../src/testing.ts"
import { HttpsReceiver, Reply } from "../../support/HttpsReceiver.ts"
import { eventBody, insertEvents, waitForDeliveries, webhookService } from "./support.ts"

const PER_HOST = 4
const ENDPOINTS = 6
const EVENTS = 20
const MAX_ENDPOINTS = 8

layer(webhookService({ webhookPerHost: PER_HOST, maxEndpointsPerOrg: MAX_ENDPOINTS }), { excludeTestServices: true })(
  "requests per destination host",
  (it) => {
    it.effect(
      "an organization's endpoints on one host share SVC_WEBHOOK_PER_HOST requests and connections; another organization has its own",
      () =>
        Effect.gen(function*() {
          // Requests in flight per organization (its path prefix), and their peaks.
          const inFlight = new Map<string, number>()
          const peak = new Map<string, number>()
          // Slow answers keep requests in flight, so the bound is what stops more.
          const receiver = yield* HttpsReceiver.make({
            respond: (request) => {
              const who = request.path.split("/")[1]!
              inFlight.set(who, (inFlight.get(who) ?? 0) + 1)
              peak.set(who, Math.max(peak.get(who) ?? 0, inFlight.get(who)!))
              setTimeout(() => inFlight.set(who, inFlight.get(who)! - 1), 100)
              return Reply.delayed(100, { status: 204 })
            }
          })
          const first = yield* SvcTest.org()
          const second = yield* SvcTest.org()
          const endpoints: Array<string> = []
          for (let i = 0; i < ENDPOINTS; i++) {
            endpoints.push(
              (yield* first.client.notifications.create({ payload: { url: receiver.url(`/a/${i}`) } })).endpoint.id
            )
          }
          for (let i = 0; i < 2; i++) {
            endpoints.push(
              (yield* second.client.notifications.create({ payload: { url: receiver.url(`/b/${i}`) } })).endpoint.id
            )
          }
          yield* insertEvents([
            ...Array.from({ length: EVENTS }, () => eventBody(first.orgId, "approval.requested")),
            ...Array.from({ length: EVENTS }, () => eventBody(second.orgId, "approval.requested"))
          ])
          for (const endpoint of endpoints) {
            yield* waitForDeliveries(
              endpoint,
              (rows) => rows.length === EVENTS && rows.every((row) => row.status === "delivered"),
              "every delivery",
              60_000
            )
          }
          assert.strictEqual(receiver.requests().length, (ENDPOINTS + 2) * EVENTS)
          // The bound, beyond which an endpoint with none in flight may still start one.
          assert.isAtMost(
            peak.get("a")!,
            PER_HOST + ENDPOINTS - 1,
            "the first organization's requests in flight to the host"
          )
          assert.isAtMost(peak.get("b")!, PER_HOST + 2 - 1, "the second organization's requests in flight to the host")
          assert.isAtLeast(peak.get("a")!, 2, "the host got requests in parallel")
          // Each organization's connections to the host: one pool of
          // SVC_WEBHOOK_PER_HOST + SVC_MAX_ENDPOINTS_PER_ORG.
          assert.isAtMost(
            receiver.peakOpenConnections(),
            2 * (PER_HOST + MAX_ENDPOINTS),
            "connections open to the host at once"
          )
        }),
      { timeout: 90_000 }
    )
  }
)
