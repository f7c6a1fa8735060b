import { assert, describe, layer } from "@effect/vitest"
import { Duration, Effect, Layer } from "effect"
import { SvcTest } from "../../../src/testing.ts"
import { raw } from "../../support/http.ts"
import { HttpsReceiver, Reply } from "../../support/HttpsReceiver.ts"
import { waitForDeliveries } from "../../support/telemetry.ts"
import { loopbackTargets, TestTls } from "../../support/tls.ts"

const BUFFER = 100
const QUEUE = 2

/** Small buffers and queue, and an export request ended after 1 s (not 10), so a hanging collector fills them quickly. */
const Svc = Layer.unwrap(Effect.map(TestTls.shared, (tls) =>
  SvcTest.layer({
    config: {
      ...loopbackTargets(tls),
      telemetryBufferSpans: BUFFER,
      telemetryQueueBatches: QUEUE,
      telemetryExportTimeout: Duration.seconds(1)
    }
  })))

layer(Svc, { excludeTestServices: true })("telemetry under a collector that hangs", (it) => {
  describe("a bounded buffer; overflow drops and counts and never blocks request handling", () => {
    it.effect(
      "under load: every API request is answered, drops are counted, pending spans stay bounded",
      () =>
        Effect.gen(function*() {
          const svc = yield* SvcTest
          const org = yield* SvcTest.org()
          const collector = yield* HttpsReceiver.make({ respond: () => Reply.hang() })
          const { id } = yield* org.client.telemetry.create({ payload: { url: collector.url("/v1/traces") } })
          // The buffer, plus the undelivered batches (each cut from a buffer of at most BUFFER spans).
          const bound = BUFFER + QUEUE * BUFFER
          let worstPending = 0
          for (let round = 0; round < 6; round++) {
            const statuses = yield* Effect.forEach(
              Array.from({ length: 40 }, (_, i) => i),
              () =>
                Effect.map(
                  raw(`${svc.baseUrl}/v1/tasks`, { headers: { authorization: `Bearer ${org.key}` } }),
                  (response) => response.status
                ),
              { concurrency: 10 }
            )
            assert.deepStrictEqual(new Set(statuses), new Set([200]))
            const [now] = (yield* org.client.telemetry.list()).destinations
            worstPending = Math.max(worstPending, now!.pending_spans)
            assert.isAtMost(now!.pending_spans, bound)
          }
          const dropped = yield* Effect.gen(function*() {
            const deadline = Date.now() + 20_000
            for (;;) {
              const [now] = (yield* org.client.telemetry.list()).destinations
              assert.isAtMost(now!.pending_spans, bound)
              if (now!.dropped_spans > 0) return now!.dropped_spans
              if (Date.now() > deadline) return yield* Effect.die(new Error("no drop was ever counted"))
              yield* Effect.sleep(100)
            }
          })
          assert.isAbove(dropped, 0)
          assert.isAbove(worstPending, 0)
          // Never more undelivered batches than the queue holds.
          const { deliveries } = yield* org.client.telemetry.deliveries({ params: { id }, query: {} })
          assert.isAtMost(deliveries.filter((d) => d.status === "pending").length, QUEUE)
          // Another organization's requests are answered meanwhile, and so are this one's.
          const other = yield* SvcTest.org()
          yield* other.client.tasks.list({ query: {} })
          yield* org.client.tasks.list({ query: {} })
        }).pipe(Effect.scoped),
      { timeout: 90_000 }
    )
  })

  describe("replay finds the queue full", () => {
    it.effect("failed batch, queue full of pending batches → 409 QUEUE_FULL", () =>
      Effect.gen(function*() {
        const org = yield* SvcTest.org()
        const collector = yield* HttpsReceiver.make({ respond: () => Reply.hang() })
        collector.enqueue(Reply.status(400))
        const { id } = yield* org.client.telemetry.create({ payload: { url: collector.url("/v1/traces") } })
        yield* org.client.tasks.list({ query: {} })
        const { deliveries } = yield* waitForDeliveries(org, id, (list) => list.some((d) => d.status === "failed"))
        const failed = deliveries.find((d) => d.status === "failed")!
        yield* Effect.gen(function*() {
          for (;;) {
            yield* org.client.tasks.list({ query: {} })
            const { deliveries } = yield* org.client.telemetry.deliveries({ params: { id }, query: {} })
            if (deliveries.filter((d) => d.status === "pending").length >= QUEUE) return
            yield* Effect.sleep(100)
          }
        }).pipe(Effect.timeout("30 seconds"))
        const error = yield* Effect.flip(org.client.telemetry.replay({ params: { id, delivery: failed.id } }))
        assert.strictEqual(error._tag, "QueueFull")
      }).pipe(Effect.scoped), { timeout: 60_000 })
  })
})
