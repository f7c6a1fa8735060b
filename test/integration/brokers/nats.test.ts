/**
 * NATS JetStream destinations against the NATS server of this machine:
 * the event's exact bytes published with the signature headers an `https`
 * receiver gets (verified with the receiver kit) and the event id as
 * `Nats-Msg-Id`, acknowledged by the stream; a subject no stream takes
 * fails visibly and, once a stream takes it, the replayed delivery goes
 * through; a broker that hangs is a timeout; a refusal that quotes the
 * URL keeps its credentials out of the record.
 */
import { assert, describe, layer } from "@effect/vitest"
import { Duration, Effect } from "effect"
import * as net from "node:net"
import { constructEventFromHeaders } from "../../../packages/receiver/src/index.ts"
import { SvcTest, type TestOrg } from "../../../src/testing.ts"
import { eventBody, insertEvents, waitForDeliveries, webhookService } from "../webhooks/support.ts"
import { attemptsOf, jet, makeRelay, NATS, uniqueName } from "./support.ts"

const create = (org: TestOrg, url: string) => org.client.notifications.create({ payload: { url } })

const service = webhookService({
  webhookRetrySchedule: [Duration.millis(100), Duration.millis(100)],
  webhookSendTimeout: Duration.seconds(1)
})

layer(service, { excludeTestServices: true })("NATS JetStream destinations", (it) => {
  describe("publishing", () => {
    it.effect("the event's bytes are acknowledged by the stream, with the signature headers the receiver kit verifies", () =>
      Effect.gen(function*() {
        const nats = yield* jet
        const subject = uniqueName("svc.approvals")
        const stream = yield* nats.stream(subject)
        const org = yield* SvcTest.org()
        const { endpoint, secret } = yield* create(org, `nats://${NATS}?subject=${subject}`)
        assert.strictEqual(endpoint.url_hint, `nats://${NATS}/…`)
        const event = eventBody(org.orgId, "approval.approved")
        const [body] = yield* insertEvents([event])
        const [row] = yield* waitForDeliveries(endpoint.id, (rows) => rows[0]?.status === "delivered")
        assert.strictEqual(row!.attempts, 1)
        const [message] = yield* nats.messages(stream)
        assert.strictEqual(new TextDecoder().decode(message!.data), body)
        assert.strictEqual(message!.headers["Nats-Msg-Id"], event.id)
        assert.strictEqual(message!.headers["x-svc-event-id"], event.id)
        assert.strictEqual(message!.headers["x-svc-event-type"], "approval.approved")
        assert.strictEqual(message!.headers["content-type"], "application/json")
        const verified = yield* Effect.promise(() => constructEventFromHeaders(message!.data, message!.headers, secret))
        assert.strictEqual(verified.id, event.id)
        // The Standard Webhooks headers alone verify too.
        const { "x-svc-signature": _, ...standard } = message!.headers
        const viaStandard = yield* Effect.promise(() => constructEventFromHeaders(message!.data, standard, secret))
        assert.strictEqual(viaStandard.id, event.id)
        const [attempt] = yield* attemptsOf(endpoint.id)
        assert.isNull(attempt!.status_code)
        assert.isNull(attempt!.error)
      }).pipe(Effect.scoped))

    it.effect("a test event is acknowledged (no HTTP status); a subject no stream takes answers 502 saying so", () =>
      Effect.gen(function*() {
        const nats = yield* jet
        const subject = uniqueName("svc.tests")
        const stream = yield* nats.stream(subject)
        const org = yield* SvcTest.org()
        const { endpoint } = yield* create(org, `nats://${NATS}?subject=${subject}`)
        const answer = yield* org.client.notifications.test({ params: { id: endpoint.id }, payload: {} })
        assert.strictEqual(answer.delivered, true)
        assert.isUndefined(answer.status)
        assert.lengthOf(yield* nats.messages(stream), 1)
        const nowhere = yield* create(org, `nats://${NATS}?subject=${uniqueName("svc.nowhere")}`)
        const failed = yield* Effect.flip(
          org.client.notifications.test({ params: { id: nowhere.endpoint.id }, payload: {} })
        )
        assert.strictEqual(failed._tag, "DeliveryFailed")
        assert.include((failed as { error: string }).error, "no stream takes subject")
      }).pipe(Effect.scoped))
  })

  describe("failures are recorded and recover", () => {
    it.effect("no stream for the subject: every attempt fails, the delivery fails; once a stream takes it, a replay is delivered", () =>
      Effect.gen(function*() {
        const nats = yield* jet
        const subject = uniqueName("svc.later")
        const org = yield* SvcTest.org()
        const { endpoint } = yield* create(org, `nats://${NATS}?subject=${subject}`)
        const event = eventBody(org.orgId, "approval.requested")
        yield* insertEvents([event])
        const [failed] = yield* waitForDeliveries(endpoint.id, (rows) => rows[0]?.status === "failed")
        assert.strictEqual(failed!.attempts, 3)
        assert.include(
          failed!.last_error!,
          `no JetStream stream acknowledged the publish: no stream takes subject ${subject}`
        )
        const stream = yield* nats.stream(subject)
        yield* org.client.notifications.replay({ params: { id: endpoint.id, delivery: failed!.id } })
        const [done] = yield* waitForDeliveries(endpoint.id, (rows) => rows[0]?.status === "delivered")
        assert.strictEqual(done!.replays, 1)
        const [message] = yield* nats.messages(stream)
        assert.strictEqual(message!.headers["Nats-Msg-Id"], event.id)
      }).pipe(Effect.scoped))

    it.effect("a server that hangs is a timeout; once it answers, the bulk replay delivers", () =>
      Effect.gen(function*() {
        const nats = yield* jet
        const subject = uniqueName("svc.relay")
        const stream = yield* nats.stream(subject)
        const relay = yield* makeRelay(NATS)
        relay.mode("hang")
        const org = yield* SvcTest.org()
        const { endpoint } = yield* create(org, `nats://127.0.0.1:${relay.port}?subject=${subject}`)
        yield* insertEvents([eventBody(org.orgId, "approval.requested")])
        const [failed] = yield* waitForDeliveries(endpoint.id, (rows) => rows[0]?.status === "failed", "failed", 30_000)
        assert.include(failed!.last_error!, "within 1000 ms")
        relay.mode("forward")
        const replayed = yield* org.client.notifications.replayFailed({
          params: { id: endpoint.id },
          payload: {
            since: new Date(Date.now() - 3_600_000).toISOString()
          }
        })
        assert.strictEqual(replayed.queued, 1)
        yield* waitForDeliveries(endpoint.id, (rows) => rows[0]?.status === "delivered")
        assert.lengthOf(yield* nats.messages(stream), 1)
        const stats = yield* org.client.notifications.stats({ params: { id: endpoint.id } })
        assert.strictEqual(stats.delivered, 1)
      }).pipe(Effect.scoped))

    it.effect("a server's refusal quoting the URL is recorded without its user information, however short the password", () =>
      Effect.gen(function*() {
        // A loopback server speaking NATS's greeting that refuses the login
        // quoting the URL it was given, credentials and all (two characters
        // each: too short to be searched for alone).
        const server = yield* Effect.acquireRelease(
          Effect.callback<net.Server>((resume) => {
            const server = net.createServer((socket) => {
              socket.on("error", () => undefined)
              socket.write(
                `INFO {"server_id":"refusing","version":"2.10.0","proto":1,"max_payload":1048576,"headers":true,"auth_required":true}\r\n`
              )
              socket.on("data", (data) => {
                if (data.toString().startsWith("CONNECT")) {
                  socket.write(`-ERR 'Authorization Violation for nats://ab:cd@127.0.0.1'\r\n`)
                }
              })
            })
            server.listen(0, "127.0.0.1", () => resume(Effect.succeed(server)))
          }),
          (server) => Effect.sync(() => server.close())
        )
        const port = (server.address() as net.AddressInfo).port
        const org = yield* SvcTest.org()
        const { endpoint } = yield* create(org, `nats://ab:cd@127.0.0.1:${port}?subject=${uniqueName("svc.refused")}`)
        const failed = yield* Effect.flip(org.client.notifications.test({ params: { id: endpoint.id }, payload: {} }))
        assert.strictEqual(failed._tag, "DeliveryFailed")
        const error = (failed as { error: string }).error
        assert.include(error, "Authorization Violation for nats://[redacted]@127.0.0.1")
        assert.notInclude(error, "ab:cd")
      }).pipe(Effect.scoped))
  })

  describe("URLs checked at create", () => {
    it.effect("a 400 naming url for a missing or wildcard subject, a path, unknown parameters", () =>
      Effect.gen(function*() {
        const org = yield* SvcTest.org()
        for (
          const [url, text] of [
            [`nats://${NATS}`, "subject is required"],
            [`nats://${NATS}?subject=svc.*`, "subject is required"],
            [`tls://${NATS}?subject=svc.>`, "subject is required"],
            [`nats://${NATS}/path?subject=svc.a`, "no path"],
            [`nats://${NATS}?subject=svc.a&queue=x`, "unknown query parameter"]
          ] as const
        ) {
          const error = yield* Effect.flip(create(org, url))
          assert.strictEqual(error._tag, "InvalidUrl", url)
          assert.strictEqual((error as { field?: string }).field, "url")
          assert.include((error as { detail: string }).detail, text, url)
        }
      }))
  })
})
