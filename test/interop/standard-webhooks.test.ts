/**
 * Standard Webhooks beside `X-Svc-Signature`: every delivery carries
 * `webhook-id`, `webhook-timestamp` and `webhook-signature`, verified here
 * by the official `standardwebhooks` library and Svix's verifier with the
 * secret exactly as returned, while Stripe's verifier keeps accepting
 * `X-Svc-Signature`; secrets are `whsec_` + standard base64.
 *
 * Stripe's and Svix's libraries (28 MB) come from this folder's own npm
 * project (interop.ts): without it a run skips this file and says so;
 * under CI it runs, and fails if they are missing.
 */
import { assert, describe, layer } from "@effect/vitest"
import { Effect } from "effect"
import { Webhook as StandardWebhook } from "standardwebhooks"
import { constructEventFromHeaders, handleRequest } from "../../packages/receiver/src/index.ts"
import { SvcTest } from "../../src/testing.ts"
import { eventBody, insertEvents, waitForDeliveries, webhookService } from "../integration/webhooks/support.ts"
import { HttpsReceiver, type ReceivedRequest, Reply } from "../support/HttpsReceiver.ts"
import { interopRequire, runs } from "./interop.ts"

const installed = runs("standard-webhooks.test.ts", "Stripe's and Svix's verifiers", "stripe", "svix")

// What this file uses of the two libraries, loaded from this folder's project.
interface StripeClient {
  readonly webhooks: { constructEvent(body: Buffer, header: string, secret: string): { readonly id: string } }
}
interface SvixModule {
  readonly Webhook: new(secret: string) => { verify(body: string, headers: Record<string, string>): unknown }
}
const stripe: StripeClient | undefined = installed
  ? new (interopRequire("stripe") as new(key: string) => StripeClient)("sk_test_not_used_for_network")
  : undefined
const SvixWebhook = installed ? (interopRequire("svix") as SvixModule).Webhook : undefined
const text = (bytes: Uint8Array) => new TextDecoder().decode(bytes)
const NEW_SECRET = /^whsec_[A-Za-z0-9+/]{43}=$/

const standardHeaders = (request: ReceivedRequest) => ({
  "webhook-id": request.headers["webhook-id"]!,
  "webhook-timestamp": request.headers["webhook-timestamp"]!,
  "webhook-signature": request.headers["webhook-signature"]!
})

/** What the official library and Svix's verifier say about a delivery with `secret`. */
const verifiers = (request: ReceivedRequest, secret: string) => {
  const body = text(request.body)
  const headers = standardHeaders(request)
  const outcome = (run: () => unknown) => {
    try {
      run()
      return "accepted"
    } catch (error) {
      return `refused: ${String(error)}`
    }
  }
  return {
    standardwebhooks: outcome(() => new StandardWebhook(secret).verify(body, headers)),
    svix: outcome(() =>
      new SvixWebhook!(secret).verify(body, {
        "svix-id": headers["webhook-id"],
        "svix-timestamp": headers["webhook-timestamp"],
        "svix-signature": headers["webhook-signature"]
      })
    ),
    stripe: outcome(() =>
      stripe!.webhooks.constructEvent(Buffer.from(request.body), request.headers["x-svc-signature"]!, secret)
    )
  }
}

describe.skipIf(!installed)("Standard Webhooks, Svix and Stripe", () => {
  layer(webhookService(), { excludeTestServices: true })("Standard Webhooks", (it) => {
    describe("headers on every delivery", () => {
      it.effect("webhook-id is the event id, webhook-timestamp the t= of X-Svc-Signature, and the official libraries, Svix and Stripe all verify with the secret as returned", () =>
        Effect.gen(function*() {
          const receiver = yield* HttpsReceiver.make()
          const org = yield* SvcTest.org()
          const { secret } = yield* org.client.notifications.create({ payload: { url: receiver.url("/standard") } })
          assert.match(secret, NEW_SECRET)
          const event = eventBody(org.orgId, "approval.requested")
          yield* insertEvents([event])
          const [request] = yield* receiver.waitForRequests(1)
          const headers = request!.headers
          assert.strictEqual(headers["webhook-id"], event.id)
          assert.strictEqual(headers["x-svc-event-id"], event.id)
          assert.strictEqual(headers["x-svc-event-type"], "approval.requested")
          const t = /^t=(\d+),v1=[0-9a-f]{64}$/.exec(headers["x-svc-signature"]!)
          assert.isNotNull(t)
          assert.strictEqual(headers["webhook-timestamp"], t![1])
          assert.match(headers["webhook-signature"]!, /^v1,[A-Za-z0-9+/]{43}=$/)
          assert.deepStrictEqual(verifiers(request!, secret), {
            standardwebhooks: "accepted",
            svix: "accepted",
            stripe: "accepted"
          })
          const viaStripe = stripe!.webhooks.constructEvent(
            Buffer.from(request!.body),
            headers["x-svc-signature"]!,
            secret
          )
          assert.strictEqual(viaStripe.id, event.id)
          assert.match(verifiers(request!, `${secret}x`).stripe, /^refused/)
          // Another secret of the same form is refused by all three.
          const other = (yield* org.client.notifications.create({ payload: { url: receiver.url("/other") } })).secret
          const refused = verifiers(request!, other)
          assert.match(refused.standardwebhooks, /^refused/)
          assert.match(refused.svix, /^refused/)
          assert.match(refused.stripe, /^refused/)
          // The kit verifies either scheme: the Standard Webhooks headers alone are enough.
          const verified = yield* Effect.promise(() =>
            constructEventFromHeaders(request!.body, standardHeaders(request!), secret)
          )
          assert.strictEqual(verified.id, event.id)
          const response = yield* Effect.promise(() =>
            handleRequest(
              new Request("https://receiver.test/hook", {
                method: "POST",
                headers: standardHeaders(request!),
                body: text(request!.body)
              }),
              { secret, onEvent: async () => undefined }
            )
          )
          assert.strictEqual(response.status, 202)
        }).pipe(Effect.scoped))

      it.effect("a retried and a replayed delivery keep the same webhook-id, with a fresh timestamp and signature", () =>
        Effect.gen(function*() {
          const receiver = yield* HttpsReceiver.make()
          receiver.enqueue(Reply.status(500), Reply.status(500), Reply.status(500), Reply.status(500))
          const org = yield* SvcTest.org()
          const { endpoint, secret } = yield* org.client.notifications.create({
            payload: { url: receiver.url("/again") }
          })
          const event = eventBody(org.orgId, "approval.expiring")
          yield* insertEvents([event])
          const [failed] = yield* waitForDeliveries(
            endpoint.id,
            (rows) => rows[0]?.status === "failed",
            "a failed delivery"
          )
          yield* org.client.notifications.replay({ params: { id: endpoint.id, delivery: failed!.id } })
          const requests = yield* receiver.waitForRequests(5)
          assert.deepStrictEqual(new Set(requests.map((r) => r.headers["webhook-id"])), new Set([event.id]))
          assert.deepStrictEqual(verifiers(requests[4]!, secret), {
            standardwebhooks: "accepted",
            svix: "accepted",
            stripe: "accepted"
          })
        }).pipe(Effect.scoped))
    })

    describe("secret rotation", () => {
      it.effect("a rotated secret has the new form; during the overlap webhook-signature has one space-separated entry per secret, each verifying", () =>
        Effect.gen(function*() {
          const receiver = yield* HttpsReceiver.make()
          const org = yield* SvcTest.org()
          const { endpoint, secret: oldSecret } = yield* org.client.notifications.create({
            payload: { url: receiver.url("/rotate") }
          })
          const { secret: newSecret } = yield* org.client.notifications.rotateSecret({
            params: { id: endpoint.id },
            payload: { overlap_seconds: 600 }
          })
          assert.match(newSecret, NEW_SECRET)
          yield* insertEvents([eventBody(org.orgId, "approval.requested")])
          const [request] = yield* receiver.waitForRequests(1)
          assert.match(request!.headers["webhook-signature"]!, /^v1,[A-Za-z0-9+/]{43}= v1,[A-Za-z0-9+/]{43}=$/)
          for (const secret of [oldSecret, newSecret]) {
            assert.deepStrictEqual(verifiers(request!, secret), {
              standardwebhooks: "accepted",
              svix: "accepted",
              stripe: "accepted"
            })
          }
        }).pipe(Effect.scoped))
    })
  })
})
