/**
 * Telemetry contract: each delivery runs in a `WebhookSender.deliver` span
 * annotated with `svc.org_id` (so it is that organization's work), without
 * payloads or secrets in its attributes.
 */
import { assert, layer } from "@effect/vitest"
import { Effect, Layer, Tracer } from "effect"
import { SvcTest } from "../../../src/testing.ts"
import { eventually } from "../../support/http.ts"
import { HttpsReceiver } from "../../support/HttpsReceiver.ts"
import { eventBody, insertEvents, webhookService } from "./support.ts"

const ended: Array<Tracer.NativeSpan> = []
class Recording extends Tracer.NativeSpan {
  override end(endTime: bigint, exit: Parameters<Tracer.NativeSpan["end"]>[1]) {
    super.end(endTime, exit)
    ended.push(this)
  }
}

const Traced = webhookService().pipe(
  Layer.provide(Layer.succeed(Tracer.Tracer, Tracer.make({ span: (options) => new Recording(options) })))
)

layer(Traced, { excludeTestServices: true })("delivery spans", (it) => {
  it.effect("WebhookSender.deliver carries svc.org_id and never the payload or the secret", () =>
    Effect.gen(function*() {
      const receiver = yield* HttpsReceiver.make()
      const org = yield* SvcTest.org()
      const { endpoint, secret } = yield* org.client.notifications.create({ payload: { url: receiver.url("/traced") } })
      const event = eventBody(org.orgId, "approval.requested")
      const [body] = yield* insertEvents([event])
      yield* receiver.waitForRequests(1)
      const span = yield* eventually(
        Effect.sync(() =>
          ended.find((s) => s.name === "WebhookSender.deliver" && s.attributes.get("svc.endpoint_id") === endpoint.id)
        ),
        { what: "the delivery span" }
      )
      assert.strictEqual(span.attributes.get("svc.org_id"), org.orgId)
      assert.strictEqual(span.attributes.get("svc.event_id"), event.id)
      // The exchange's attributes, on the delivery's own span (a send without a fiber of its own puts them there too).
      assert.strictEqual(span.attributes.get("svc.event_type"), "approval.requested")
      assert.strictEqual(span.attributes.get("http.request.method"), "POST")
      assert.isNumber(span.attributes.get("http.response.status_code"))
      assert.strictEqual(span.status._tag, "Ended")
      const values = ended.flatMap((s) => [...s.attributes.values()].map(String))
      assert.isFalse(
        values.some((value) =>
          value.includes(secret.slice(6)) || value === body || value.includes(event.approval.session_id)
        )
      )
    }).pipe(Effect.scoped))
})
