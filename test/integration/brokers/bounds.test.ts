/**
 * Bounds on what a tenant's broker can cost: text a broker sends (a
 * publish error) is kept cut to `MAX_OUTSIDE_TEXT` in the attempt, the
 * delivery and the test answer; a `nats://` URL to a server that requires
 * TLS fails saying so; and one organization's endpoints at a broker that
 * never answers hold only its own share of the process's connections, so
 * another organization's broker test still goes through.
 */
import { assert, describe, layer } from "@effect/vitest"
import { Duration, Effect } from "effect"
import { MAX_OUTSIDE_TEXT } from "../../../src/secrets/Masking.ts"
import { SvcTest, type TestOrg } from "../../../src/testing.ts"
import { eventually } from "../../support/http.ts"
import { eventBody, insertEvents, waitForDeliveries, webhookService } from "../webhooks/support.ts"
import { attemptsOf, fakeNats, jet, NATS, uniqueName } from "./support.ts"

const create = (org: TestOrg, url: string) => org.client.notifications.create({ payload: { url } })

const service = webhookService({
  webhookRetrySchedule: [Duration.millis(100), Duration.millis(100)],
  webhookSendTimeout: Duration.seconds(5),
  maxEndpointsPerOrg: 300
})

layer(service, { excludeTestServices: true })("broker bounds", (it) => {
  describe("text a broker sends", () => {
    it.effect("a 5 MB publish error is kept cut to MAX_OUTSIDE_TEXT characters in the test answer, every attempt and the delivery", () =>
      Effect.gen(function*() {
        const huge = `stream sealed ${"e".repeat(5 * 1024 * 1024)}`
        const broker = yield* fakeNats({
          answer: () => JSON.stringify({ error: { code: 503, err_code: 10077, description: huge } })
        })
        const org = yield* SvcTest.org()
        const { endpoint } = yield* create(org, `nats://127.0.0.1:${broker.port}?subject=${uniqueName("svc.huge")}`)
        const failed = yield* Effect.flip(org.client.notifications.test({ params: { id: endpoint.id }, payload: {} }))
        assert.strictEqual(failed._tag, "DeliveryFailed")
        const error = (failed as { error: string }).error
        assert.include(error, "stream sealed eee")
        assert.isAtMost(error.length, MAX_OUTSIDE_TEXT + 1)
        assert.isAtMost((failed as { detail: string }).detail.length, MAX_OUTSIDE_TEXT + 100)
        yield* insertEvents([eventBody(org.orgId, "approval.requested")])
        // The test delivery and the event's, each failed.
        const rows = yield* waitForDeliveries(
          endpoint.id,
          (rows) => rows.filter((row) => row.status === "failed").length === 2
        )
        const attempts = yield* attemptsOf(endpoint.id)
        assert.strictEqual(attempts.length, 4)
        for (const attempt of attempts) {
          assert.include(attempt.error!, "stream sealed eee")
          assert.isAtMost(attempt.error!.length, MAX_OUTSIDE_TEXT + 1)
        }
        for (const row of rows) assert.isAtMost(row.last_error!.length, MAX_OUTSIDE_TEXT + 100)
      }).pipe(Effect.scoped))

    it.effect("nats:// to a server that requires TLS fails saying so and naming tls://", () =>
      Effect.gen(function*() {
        const broker = yield* fakeNats({ info: { tls_required: true } })
        const org = yield* SvcTest.org()
        const { endpoint } = yield* create(org, `nats://127.0.0.1:${broker.port}?subject=${uniqueName("svc.tls")}`)
        const failed = yield* Effect.flip(org.client.notifications.test({ params: { id: endpoint.id }, payload: {} }))
        assert.strictEqual(failed._tag, "DeliveryFailed")
        const error = (failed as { error: string }).error
        assert.include(error, "the server requires TLS: use tls://")
        assert.notInclude(error, "TypeError")
      }).pipe(Effect.scoped))
  })

  describe("connections", () => {
    it.effect(
      "an organization's endpoints at a broker that never answers hold its own share of connections; another organization's broker test goes through",
      () =>
        Effect.gen(function*() {
          const nats = yield* jet
          const subject = uniqueName("svc.victim")
          yield* nats.stream(subject)
          const hole = yield* fakeNats({ hang: true })
          // More endpoints than the process keeps connections.
          const hog = yield* SvcTest.org()
          yield* Effect.forEach(
            Array.from({ length: 260 }, (_, i) => i),
            (i) => create(hog, `nats://127.0.0.1:${hole.port}?subject=svc.hole.${i}`),
            { concurrency: 8, discard: true }
          )
          yield* insertEvents([eventBody(hog.orgId, "approval.requested")])
          yield* eventually(Effect.sync(() => (hole.accepted() >= 32 ? true : undefined)), {
            what: "connections to the black hole"
          })
          const victim = yield* SvcTest.org()
          const { endpoint } = yield* create(victim, `nats://${NATS}?subject=${subject}`)
          const answer = yield* victim.client.notifications.test({ params: { id: endpoint.id }, payload: {} })
          assert.strictEqual(answer.delivered, true)
          // The share holds: no more connections to the black hole than the organization's share.
          assert.isAtMost(hole.accepted(), 32 * 2)
        }).pipe(Effect.scoped),
      120_000
    )
  })
})

layer(
  webhookService({
    webhookRetrySchedule: [Duration.millis(100), Duration.millis(100)],
    // Each attempt opens a connection and then waits for the acknowledgement
    // within this deadline: 1 s once left a loaded machine too little for the
    // handshake itself (the client's connect timed out first).
    webhookSendTimeout: Duration.seconds(2),
    brokerConnectionsPerOrg: 1
  }),
  { excludeTestServices: true }
)("broker connections at an organization's share", (it) => {
  it.effect(
    "a publish that got no connection within its deadline is given back, never recorded as an attempt against the endpoint",
    () =>
      Effect.gen(function*() {
        const hole = yield* fakeNats({ hang: true })
        const org = yield* SvcTest.org()
        // Three endpoints, one connection: two of them wait while the third holds it for its whole deadline.
        const endpoints = yield* Effect.forEach([1, 2, 3], (i) =>
          create(org, `nats://127.0.0.1:${hole.port}?subject=svc.share.${i}`))
        yield* insertEvents([eventBody(org.orgId, "approval.requested")])
        for (const { endpoint } of endpoints) {
          const [delivery] = yield* waitForDeliveries(
            endpoint.id,
            (rows) =>
              rows[0]?.status === "failed",
            "failed",
            90_000
          )
          // Three attempts, each a connection the broker never completed (it
          // never greets the client); the waits in between are not among them.
          assert.strictEqual(delivery!.attempts, 3)
          const attempts = yield* attemptsOf(endpoint.id)
          assert.lengthOf(attempts, 3)
          for (const attempt of attempts) {
            // Said the same whichever ran out first: the client's connect timeout or the deadline.
            assert.strictEqual(attempt.error, "no connection to the broker within 2000 ms")
            assert.notInclude(attempt.error!, "SVC_BROKER_CONNECTIONS")
          }
        }
      }).pipe(Effect.scoped),
    120_000
  )
})
