/**
 * The address checks of every outbound request hold for brokers: loopback
 * only where `SVC_ALLOWED_TARGET_CIDRS` allows it, a name checked by every
 * address it resolves to at create and again at every publish (a name that
 * rebinds to a metadata address is refused then), and the connection made
 * to the address that was checked (a name only our resolver knows still
 * reaches the broker).
 */
import { assert, describe, layer } from "@effect/vitest"
import { Effect, Layer } from "effect"
import { Resolver } from "../../../src/outbound/Resolver.ts"
import { SvcTest } from "../../../src/testing.ts"
import { fixedResolver } from "../../support/dns.ts"
import { eventually } from "../../support/http.ts"
import { TestTls } from "../../support/tls.ts"
import { eventBody, insertEvents, waitForDeliveries, webhookService } from "../webhooks/support.ts"
import { attemptsOf, jet, makeTlsRelay, rabbit, RABBITMQ, uniqueName } from "./support.ts"

const names = fixedResolver({
  "rabbit.broker.test": ["127.0.0.1"],
  "nats.broker.test": ["127.0.0.1"],
  // Loopback when the endpoint is created, metadata at every later resolution.
  "rebinding.broker.test": (call) => (call === 1 ? ["127.0.0.1"] : ["169.254.169.254"]),
  // Covered by the test certificate's `*.svc.test`.
  "rabbit.svc.test": ["127.0.0.1"]
})

const withNames = webhookService().pipe(Layer.provide(Layer.succeed(Resolver, names)))

layer(withNames, { excludeTestServices: true })("broker addresses (loopback allowed)", (it) => {
  describe("a name resolved by svc", () => {
    it.effect("publishes to the checked address of a name only svc's resolver knows (AMQP and NATS)", () =>
      Effect.gen(function*() {
        const broker = yield* rabbit
        const exchange = uniqueName("svc.names")
        yield* broker.exchange(exchange)
        const queue = yield* broker.queue(exchange, "#")
        const nats = yield* jet
        const subject = uniqueName("svc.names")
        const stream = yield* nats.stream(subject)
        const org = yield* SvcTest.org()
        const amqp = yield* org.client.notifications.create({
          payload: { url: `amqp://guest:guest@rabbit.broker.test/?exchange=${exchange}` }
        })
        const jetstream = yield* org.client.notifications.create({
          payload: { url: `nats://nats.broker.test?subject=${subject}` }
        })
        assert.strictEqual(amqp.endpoint.url_hint, "amqp://rabbit.broker.test/…")
        yield* insertEvents([eventBody(org.orgId, "approval.requested")])
        yield* waitForDeliveries(amqp.endpoint.id, (rows) => rows[0]?.status === "delivered")
        yield* waitForDeliveries(jetstream.endpoint.id, (rows) => rows[0]?.status === "delivered")
        // The broker confirmed the publish; the test's consumer gets its copy a moment later.
        yield* eventually(Effect.sync(() => queue.messages.length > 0 || undefined), { what: "the message" })
        assert.lengthOf(queue.messages, 1)
        assert.lengthOf(yield* nats.messages(stream), 1)
      }).pipe(Effect.scoped))

    it.effect("amqps: TLS verified against the URL's host name with SVC_EXTRA_CA_FILE, to the checked address; an unknown certificate fails", () =>
      Effect.gen(function*() {
        const broker = yield* rabbit
        const exchange = uniqueName("svc.tls")
        yield* broker.exchange(exchange)
        const queue = yield* broker.queue(exchange, "#")
        const trusted = yield* makeTlsRelay(RABBITMQ, yield* TestTls.shared)
        const untrusted = yield* makeTlsRelay(RABBITMQ, yield* TestTls.selfSigned({ dnsNames: ["*.svc.test"] }))
        const org = yield* SvcTest.org()
        const good = yield* org.client.notifications.create({
          payload: { url: `amqps://guest:guest@rabbit.svc.test:${trusted}/?exchange=${exchange}` }
        })
        const bad = yield* org.client.notifications.create({
          payload: { url: `amqps://guest:guest@rabbit.svc.test:${untrusted}/?exchange=${exchange}` }
        })
        yield* insertEvents([eventBody(org.orgId, "approval.requested")])
        yield* waitForDeliveries(good.endpoint.id, (rows) => rows[0]?.status === "delivered")
        // The broker confirmed the publish; the test's consumer gets its copy a moment later.
        yield* eventually(Effect.sync(() => queue.messages.length > 0 || undefined), { what: "the message" })
        assert.lengthOf(queue.messages, 1)
        const refused = yield* eventually(
          Effect.map(attemptsOf(bad.endpoint.id), (attempts) => attempts[0]),
          { what: "a refused TLS attempt", intervalMs: 50 }
        )
        assert.match(refused.error!, /certificate/i)
      }).pipe(Effect.scoped))

    it.effect("a name that resolves to a metadata address at publish time is refused then, each attempt", () =>
      Effect.gen(function*() {
        const org = yield* SvcTest.org()
        const { endpoint } = yield* org.client.notifications.create({
          payload: { url: "amqp://guest:guest@rebinding.broker.test/?exchange=svc.events" }
        })
        yield* insertEvents([eventBody(org.orgId, "approval.requested")])
        const refused = yield* eventually(
          Effect.map(attemptsOf(endpoint.id), (attempts) => attempts[0]),
          { what: "a refused attempt", intervalMs: 50 }
        )
        assert.strictEqual(refused.error, "the host resolves to a non-public address")
      }).pipe(Effect.scoped))
  })
})

layer(webhookService({ allowedTargetCidrs: [] }), { excludeTestServices: true })(
  "broker addresses (production guard)",
  (it) => {
    it.effect("loopback brokers are refused at create when SVC_ALLOWED_TARGET_CIDRS does not allow them", () =>
      Effect.gen(function*() {
        const org = yield* SvcTest.org()
        for (
          const url of [
            "amqp://guest:guest@127.0.0.1:5672/?exchange=x",
            "nats://127.0.0.1:4222?subject=a",
            "tls://[::1]?subject=a"
          ]
        ) {
          const error = yield* Effect.flip(org.client.notifications.create({ payload: { url } }))
          assert.strictEqual(error._tag, "InvalidUrl", url)
          assert.include((error as { detail: string }).detail, "non-public address (loopback)", url)
        }
      }))
  }
)
