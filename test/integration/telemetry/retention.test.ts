/**
 * Telemetry batches under retention: the pruning fiber of every process
 * (`SVC_RETENTION_INTERVAL`) forgets a failed batch's payload 24 hours after
 * it failed (until then it is replayable) and deletes finished records after
 * 7 days; ages are the database's.
 */
import { assert, describe, layer } from "@effect/vitest"
import { Duration, Effect, Layer } from "effect"
import { SvcTest } from "../../../src/testing.ts"
import { eventually } from "../../support/http.ts"
import { HttpsReceiver, Reply } from "../../support/HttpsReceiver.ts"
import { waitForDeliveries } from "../../support/telemetry.ts"
import { loopbackTargets, TestTls } from "../../support/tls.ts"

const Svc = Layer.unwrap(
  Effect.map(TestTls.shared, (tls) =>
    SvcTest.layer({
      config: {
        ...loopbackTargets(tls),
        retentionInterval: Duration.millis(200),
        telemetryFlushInterval: Duration.millis(200)
      }
    }))
)

layer(Svc, { excludeTestServices: true })("telemetry retention", (it) => {
  describe("the retention fiber prunes telemetry batches by their own ages", () => {
    it.effect("a failed batch keeps its payload for 24 hours, then loses it; its record goes after 7 days", () =>
      Effect.gen(function*() {
        const svc = yield* SvcTest
        const org = yield* SvcTest.org()
        const collector = yield* HttpsReceiver.make({ respond: () => Reply.status(400) })
        const { id } = yield* org.client.telemetry.create({ payload: { url: collector.url("/v1/traces") } })
        yield* org.client.tasks.list({ query: {} })
        const { deliveries } = yield* waitForDeliveries(org, id, (list) => list.some((d) => d.status === "failed"))
        const failed = deliveries.find((d) => d.status === "failed")!
        const payloadOf = Effect.map(
          svc.sql<{ payload: string | null }>`SELECT payload FROM deliveries WHERE id = ${failed.id}`,
          (rows) => rows[0]
        )
        yield* svc.sql`UPDATE deliveries SET finished_at = now() - interval '23 hours' WHERE id = ${failed.id}`
        // Several rounds pass: still kept, still replayable.
        yield* Effect.sleep("1 second")
        assert.isNotNull((yield* payloadOf)!.payload)
        yield* svc.sql`UPDATE deliveries SET finished_at = now() - interval '25 hours' WHERE id = ${failed.id}`
        yield* eventually(Effect.map(payloadOf, (row) => row!.payload === null ? true : undefined), {
          what: "the payload forgotten"
        })
        yield* svc.sql`UPDATE deliveries SET finished_at = now() - interval '6 days' WHERE id = ${failed.id}`
        yield* Effect.sleep("1 second")
        assert.isDefined(yield* payloadOf, "the record stays for 7 days")
        yield* svc.sql`UPDATE deliveries SET finished_at = now() - interval '8 days' WHERE id = ${failed.id}`
        yield* eventually(Effect.map(payloadOf, (row) => row === undefined ? true : undefined), {
          what: "the record deleted"
        })
      }).pipe(Effect.scoped))
  })
})
