import { Effect } from "effect"
import type { TelemetryDelivery } from "../../src/api/Telemetry.ts"
import type { TestOrg } from "../../src/testing.ts"

/** Polls the destination's delivery records until `done` holds (for at most `timeoutMs`). */
export const waitForDeliveries = (
  org: TestOrg,
  id: string,
  done: (list: ReadonlyArray<TelemetryDelivery>) => boolean,
  timeoutMs = 20_000
) =>
  Effect.gen(function*() {
    const deadline = Date.now() + timeoutMs
    for (;;) {
      const result = yield* org.client.telemetry.deliveries({ params: { id }, query: {} })
      if (done(result.deliveries)) return result
      if (Date.now() > deadline) {
        return yield* Effect.die(new Error(`deliveries never matched: ${JSON.stringify(result)}`))
      }
      yield* Effect.sleep(50)
    }
  })
