/**
 * A failing broker destination goes through the webhook's cooldown and
 * failing streak: `endpoint.failing` is written once and reaches the
 * organization's other endpoints (here a broker too, signed, its hint
 * without credentials); once the broker takes the messages the delivery
 * goes through and the streak ends.
 */
import { assert, layer } from "@effect/vitest"
import { Duration, Effect } from "effect"
import { constructEventFromHeaders } from "../../../packages/receiver/src/index.ts"
import { SvcTest } from "../../../src/testing.ts"
import { eventually } from "../../support/http.ts"
import { eventBody, insertEvents, waitForDeliveries, webhookService } from "../webhooks/support.ts"
import { jet, NATS, uniqueName } from "./support.ts"

const service = webhookService({
  webhookRetrySchedule: Array.from({ length: 40 }, () => Duration.millis(100)),
  webhookCooldownAfter: 2,
  webhookCooldownBase: Duration.millis(200),
  webhookCooldownMax: Duration.millis(400)
})

layer(service, { excludeTestServices: true })("operational events of broker destinations", (it) => {
  it.effect("a failing broker endpoint cools down, endpoint.failing reaches another broker endpoint once, and a success ends the streak", () =>
    Effect.gen(function*() {
      const nats = yield* jet
      const failingSubject = uniqueName("svc.failing")
      const adminSubject = uniqueName("svc.admin")
      const adminStream = yield* nats.stream(adminSubject)
      const org = yield* SvcTest.org()
      const failing = yield* org.client.notifications.create({
        payload: { url: `nats://svcuser:svcpass@${NATS}?subject=${failingSubject}`, events: ["approval.requested"] }
      })
      const admin = yield* org.client.notifications.create({
        payload: { url: `nats://${NATS}?subject=${adminSubject}`, events: ["endpoint.failing", "endpoint.disabled"] }
      })
      yield* insertEvents([eventBody(org.orgId, "approval.requested")])
      // Failing since its cooldown began (a cooldown of at most 400 ms may be over when looked at).
      yield* eventually(
        Effect.map(
          org.client.notifications.list(),
          ({ endpoints }) => endpoints.find((e) => e.id === failing.endpoint.id && e.failing_since !== undefined)
        ),
        { what: "the endpoint to be failing", timeoutMs: 15_000 }
      )
      const [notice] = yield* eventually(
        Effect.map(nats.messages(adminStream), (messages) => messages.length > 0 ? messages : undefined),
        { what: "endpoint.failing at the admin endpoint", timeoutMs: 15_000 }
      )
      const event = yield* Effect.promise(() => constructEventFromHeaders(notice!.data, notice!.headers, admin.secret))
      assert.strictEqual(event.type, "endpoint.failing")
      const about = (event as unknown as { endpoint: { id: string; url_hint: string; reason: string } }).endpoint
      assert.strictEqual(about.id, failing.endpoint.id)
      assert.strictEqual(about.url_hint, `nats://${NATS}/…`)
      assert.include(about.reason, "no stream takes subject")
      assert.notInclude(new TextDecoder().decode(notice!.data), "svcpass")

      yield* nats.stream(failingSubject)
      yield* waitForDeliveries(failing.endpoint.id, (rows) => rows[0]?.status === "delivered")
      // The streak ends once the delivery is recorded (applied after the settle).
      yield* eventually(
        Effect.map(
          org.client.notifications.list(),
          ({ endpoints }) =>
            endpoints.find((e) => e.id === failing.endpoint.id)!.failing_since === undefined ? true : undefined
        ),
        { what: "the failing streak to end", timeoutMs: 5_000 }
      )
      // Once per streak.
      assert.lengthOf(yield* nats.messages(adminStream), 1)
    }).pipe(Effect.scoped))
})
