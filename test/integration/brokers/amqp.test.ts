/**
 * RabbitMQ destinations against the RabbitMQ server of this machine: the
 * event's exact bytes published persistent with the signature headers an
 * `https` receiver gets (verified with the receiver kit), publisher
 * confirms, and failures that are recorded and recover: a missing exchange
 * (channel error), an unroutable message (`basic.return`), a broker that
 * is down, resets or hangs; credentials kept out of hints and errors.
 */
import { assert, describe, layer } from "@effect/vitest"
import { Duration, Effect } from "effect"
import { constructEvent, verifyStandardWebhook } from "../../../packages/receiver/src/index.ts"
import { SvcTest, type TestOrg } from "../../../src/testing.ts"
import { eventually, raw } from "../../support/http.ts"
import { eventBody, insertEvents, waitForDeliveries, webhookService } from "../webhooks/support.ts"
import { attemptsOf, makeRelay, rabbit, RABBITMQ, uniqueName } from "./support.ts"

const create = (org: TestOrg, url: string) => org.client.notifications.create({ payload: { url } })

/** Waits until one of the endpoint's attempts failed with an error containing `text`. */
const failedWith = (endpointId: string, text: string) =>
  eventually(
    Effect.map(attemptsOf(endpointId), (attempts) => attempts.find((a) => a.error?.includes(text) === true)),
    { what: `an attempt failing with ${text}`, timeoutMs: 15_000, intervalMs: 50 }
  )

const service = webhookService({
  webhookRetrySchedule: Array.from({ length: 60 }, () => Duration.millis(150)),
  webhookSendTimeout: Duration.seconds(1)
})

layer(service, { excludeTestServices: true })("RabbitMQ destinations", (it) => {
  describe("publishing", () => {
    it.effect("the event's bytes are published persistent, confirmed, with the signature headers the receiver kit verifies", () =>
      Effect.gen(function*() {
        const broker = yield* rabbit
        const exchange = uniqueName("svc.events")
        yield* broker.exchange(exchange)
        const queue = yield* broker.queue(exchange, "approvals")
        const org = yield* SvcTest.org()
        const { endpoint, secret } = yield* create(
          org,
          `amqp://guest:guest@${RABBITMQ}/?exchange=${exchange}&routing_key=approvals`
        )
        // The hint shows scheme, host and port, never the credentials or the query.
        assert.strictEqual(endpoint.url_hint, `amqp://${RABBITMQ}/…`)
        assert.notInclude(JSON.stringify(yield* org.client.notifications.list()), "guest")
        const event = eventBody(org.orgId, "approval.requested")
        const [body] = yield* insertEvents([event])
        const [row] = yield* waitForDeliveries(endpoint.id, (rows) => rows[0]?.status === "delivered")
        const message = yield* eventually(Effect.sync(() => queue.messages[0]), { what: "the message" })
        assert.strictEqual(message.content.toString("utf8"), body)
        assert.strictEqual(message.fields.routingKey, "approvals")
        assert.strictEqual(message.properties.deliveryMode, 2)
        assert.strictEqual(message.properties.contentType, "application/json")
        assert.strictEqual(message.properties.messageId, event.id)
        assert.strictEqual(message.properties.type, "approval.requested")
        const headers = message.properties.headers as Record<string, string>
        assert.sameMembers(Object.keys(headers), [
          "content-type",
          "x-svc-event-id",
          "x-svc-event-type",
          "x-svc-signature",
          "webhook-id",
          "webhook-timestamp",
          "webhook-signature"
        ])
        assert.strictEqual(headers["x-svc-event-id"], event.id)
        assert.strictEqual(headers["webhook-id"], event.id)
        // A consumer verifies as an https receiver does.
        const verified = yield* Effect.promise(() =>
          constructEvent(message.content, headers["x-svc-signature"], secret)
        )
        assert.strictEqual(verified.id, event.id)
        yield* Effect.promise(() => verifyStandardWebhook(message.content, headers, secret))
        const refused = yield* Effect.promise(() =>
          constructEvent(message.content, headers["x-svc-signature"], `${secret}x`).then(
            () => "accepted",
            () => "refused"
          )
        )
        assert.strictEqual(refused, "refused")
        assert.strictEqual(row!.attempts, 1)
        const [attempt] = yield* attemptsOf(endpoint.id)
        assert.isNull(attempt!.status_code)
        // As for an https success: status (none here) and duration, no snippet.
        assert.isNull(attempt!.response_snippet)
      }).pipe(Effect.scoped))

    it.effect("without routing_key the event type is the routing key; the virtual host is the path", () =>
      Effect.gen(function*() {
        const broker = yield* rabbit
        const exchange = uniqueName("svc.events")
        yield* broker.exchange(exchange)
        const queue = yield* broker.queue(exchange, "approval.*")
        const org = yield* SvcTest.org()
        const { endpoint } = yield* create(org, `amqp://guest:guest@${RABBITMQ}/%2F?exchange=${exchange}`)
        yield* insertEvents([eventBody(org.orgId, "approval.approved")])
        yield* waitForDeliveries(endpoint.id, (rows) => rows[0]?.status === "delivered")
        const message = yield* eventually(Effect.sync(() => queue.messages[0]), { what: "the message" })
        assert.strictEqual(message.fields.routingKey, "approval.approved")
      }).pipe(Effect.scoped))

    it.effect("a test event is published and confirmed, with no HTTP status; a refused one is a 502 with the broker's reason", () =>
      Effect.gen(function*() {
        const broker = yield* rabbit
        const exchange = uniqueName("svc.events")
        yield* broker.exchange(exchange)
        const queue = yield* broker.queue(exchange, "#")
        const org = yield* SvcTest.org()
        const { endpoint, secret } = yield* create(org, `amqp://guest:guest@${RABBITMQ}/?exchange=${exchange}`)
        const answer = yield* org.client.notifications.test({ params: { id: endpoint.id }, payload: {} })
        assert.strictEqual(answer.delivered, true)
        assert.isUndefined(answer.status)
        const message = yield* eventually(Effect.sync(() => queue.messages[0]), { what: "the test message" })
        const event = yield* Effect.promise(() =>
          constructEvent(
            message.content,
            (message.properties.headers as Record<string, string>)["x-svc-signature"],
            secret
          )
        )
        assert.strictEqual((event as { test?: boolean }).test, true)

        const missing = yield* create(org, `amqp://guest:guest@${RABBITMQ}/?exchange=${uniqueName("svc.missing")}`)
        const failed = yield* Effect.flip(
          org.client.notifications.test({ params: { id: missing.endpoint.id }, payload: {} })
        )
        assert.strictEqual(failed._tag, "DeliveryFailed")
        assert.include((failed as { error: string }).error, "NOT_FOUND")
      }).pipe(Effect.scoped))
  })

  describe("failures are recorded and recover", () => {
    it.effect("a missing exchange (channel error), then an unroutable message (basic.return), then a bound queue: delivered", () =>
      Effect.gen(function*() {
        const broker = yield* rabbit
        const exchange = uniqueName("svc.later")
        const org = yield* SvcTest.org()
        const { endpoint } = yield* create(
          org,
          `amqp://guest:guest@${RABBITMQ}/?exchange=${exchange}&routing_key=approvals`
        )
        const event = eventBody(org.orgId, "approval.requested")
        yield* insertEvents([event])
        const missing = yield* failedWith(endpoint.id, "NOT_FOUND")
        assert.include(missing.error!, `no exchange '${exchange}'`)
        yield* broker.exchange(exchange)
        const unroutable = yield* failedWith(endpoint.id, "unroutable")
        assert.include(unroutable.error!, `exchange ${exchange} for routing key approvals`)
        const queue = yield* broker.queue(exchange, "approvals")
        const [row] = yield* waitForDeliveries(endpoint.id, (rows) => rows[0]?.status === "delivered")
        assert.isAtLeast(row!.attempts, 3)
        const message = yield* eventually(Effect.sync(() => queue.messages[0]), { what: "the message" })
        assert.strictEqual(message.properties.messageId, event.id)
      }).pipe(Effect.scoped))

    it.effect("a broker that refuses connections, then hangs past the deadline, then answers: each failure recorded, then delivered", () =>
      Effect.gen(function*() {
        const broker = yield* rabbit
        const exchange = uniqueName("svc.relay")
        yield* broker.exchange(exchange)
        const queue = yield* broker.queue(exchange, "#")
        const relay = yield* makeRelay(RABBITMQ)
        const org = yield* SvcTest.org()
        const { endpoint } = yield* create(org, `amqp://guest:guest@127.0.0.1:${relay.port}/?exchange=${exchange}`)
        yield* insertEvents([eventBody(org.orgId, "approval.requested")])
        const reset = yield* eventually(
          Effect.map(attemptsOf(endpoint.id), (attempts) => attempts[0]),
          { what: "a failed attempt", timeoutMs: 15_000, intervalMs: 50 }
        )
        assert.isNotNull(reset.error)
        // New connections hang before the broker's greeting: the attempt says it never had one.
        relay.mode("hang")
        const hung = yield* failedWith(endpoint.id, "no connection to the broker within 1000 ms")
        assert.isNull(hung.status_code)
        relay.mode("forward")
        yield* waitForDeliveries(endpoint.id, (rows) => rows[0]?.status === "delivered")
        // The broker confirmed the publish; the test's consumer gets its copy a moment later.
        yield* eventually(Effect.sync(() => queue.messages.length > 0 || undefined), { what: "the message" })
        assert.strictEqual(queue.messages.length, 1)
      }).pipe(Effect.scoped))

    it.effect("a connection that stops answering is given up after the deadline: the next attempt connects anew and is delivered", () =>
      Effect.gen(function*() {
        const broker = yield* rabbit
        const exchange = uniqueName("svc.frozen")
        yield* broker.exchange(exchange)
        const queue = yield* broker.queue(exchange, "#")
        const relay = yield* makeRelay(RABBITMQ)
        relay.mode("forward")
        const org = yield* SvcTest.org()
        const { endpoint } = yield* create(org, `amqp://guest:guest@127.0.0.1:${relay.port}/?exchange=${exchange}`)
        yield* insertEvents([eventBody(org.orgId, "approval.requested")])
        yield* waitForDeliveries(endpoint.id, (rows) => rows[0]?.status === "delivered")
        // The kept connection goes silent (as a RabbitMQ blocking publishers on an alarm would).
        relay.freeze()
        yield* insertEvents([eventBody(org.orgId, "approval.expiring")])
        const stalled = yield* failedWith(endpoint.id, "no acknowledgement from the broker within 1000 ms")
        assert.isNull(stalled.status_code)
        const rows = yield* waitForDeliveries(
          endpoint.id,
          (rows) => rows.length === 2 && rows[1]!.status === "delivered"
        )
        assert.strictEqual(rows[1]!.attempts, 2)
        yield* eventually(Effect.sync(() => queue.messages.length === 2 || undefined), { what: "both messages" })
      }).pipe(Effect.scoped))

    it.effect("a broker on a port nobody listens on fails each attempt with the connection error", () =>
      Effect.gen(function*() {
        const org = yield* SvcTest.org()
        const { endpoint } = yield* create(org, "amqp://guest:guest@127.0.0.1:1/?exchange=svc.events")
        yield* insertEvents([eventBody(org.orgId, "approval.requested")])
        const refused = yield* failedWith(endpoint.id, "ECONNREFUSED")
        assert.isNull(refused.status_code)
      }).pipe(Effect.scoped))

    it.effect("wrong credentials fail visibly, and neither the password nor the user name is in the error", () =>
      Effect.gen(function*() {
        const org = yield* SvcTest.org()
        const { endpoint } = yield* create(org, `amqp://intruder:hunter2-secret@${RABBITMQ}/?exchange=svc.events`)
        assert.strictEqual(endpoint.url_hint, `amqp://${RABBITMQ}/…`)
        yield* insertEvents([eventBody(org.orgId, "approval.requested")])
        const denied = yield* failedWith(endpoint.id, "ACCESS_REFUSED")
        assert.notInclude(denied.error!, "hunter2-secret")
        assert.notInclude(denied.error!, "intruder")
      }).pipe(Effect.scoped))
  })

  describe("URLs checked at create", () => {
    // Sent as any client sends it: the typed client refuses some of these itself (the document's scheme pattern).
    const refuse = (url: string, text: string) =>
      Effect.gen(function*() {
        const svc = yield* SvcTest
        const org = yield* SvcTest.org()
        const answer = yield* raw(`${svc.baseUrl}/v1/notification-endpoints`, {
          method: "POST",
          headers: { authorization: `Bearer ${org.key}`, "content-type": "application/json" },
          body: JSON.stringify({ url })
        })
        assert.strictEqual(answer.status, 400, url)
        assert.strictEqual(answer.json.code, "INVALID_URL", url)
        assert.strictEqual(answer.json.field, "url")
        assert.include(answer.json.detail, text, url)
        assert.notInclude(answer.text, "s3cret", url)
      })

    it.effect("a 400 naming url for a missing or bad exchange, unknown parameters, blocked or non-public hosts", () =>
      Effect.gen(function*() {
        yield* refuse(`amqp://u:s3cret@${RABBITMQ}/`, "exchange is required")
        yield* refuse(`amqp://u:s3cret@${RABBITMQ}/?exchange=bad%20name`, "exchange is required")
        yield* refuse(`amqp://u:s3cret@${RABBITMQ}/?exchange=x&heartbeat=1`, "unknown query parameter \"heartbeat\"")
        yield* refuse(`amqp://u:s3cret@${RABBITMQ}/?exchange=x&exchange=y`, "more than once")
        yield* refuse("amqp://u:s3cret@localhost/?exchange=x", "local or metadata name")
        yield* refuse("amqps://u:s3cret@10.0.0.1/?exchange=x", "non-public address")
        yield* refuse("amqp://u:s3cret@169.254.169.254/?exchange=x", "non-public address")
        // Hex and short IPv4 spellings are normalised as in https URLs before the check.
        yield* refuse("amqp://u:s3cret@0xa9fea9fe/?exchange=x", "non-public address")
        yield* refuse("mqtt://u:s3cret@127.0.0.1/?exchange=x", "https, amqp, amqps")
      }))
  })
})
