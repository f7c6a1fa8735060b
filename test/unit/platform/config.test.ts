import { assert, describe, it } from "@effect/vitest"
import { ConfigProvider, Duration, Effect } from "effect"
import { svcConfig } from "../../../src/platform/Config.ts"

const read = (env: Record<string, string>) =>
  Effect.provideService(svcConfig, ConfigProvider.ConfigProvider, ConfigProvider.fromUnknown(env))

describe("configuration", () => {
  it.effect("a webhook lease must outlast the send deadline by the time needed to record the outcome", () =>
    Effect.gen(function*() {
      const tooShort = yield* Effect.flip(read({ SVC_WEBHOOK_LEASE: "6s", SVC_WEBHOOK_TIMEOUT: "5s" }))
      assert.include(String(tooShort), "SVC_WEBHOOK_LEASE must be at least SVC_WEBHOOK_TIMEOUT plus 2s")
      const enough = yield* read({ SVC_WEBHOOK_LEASE: "7s", SVC_WEBHOOK_TIMEOUT: "5s" })
      assert.strictEqual(Duration.toMillis(enough.webhookLease), 7_000)
      const defaults = yield* read({})
      assert.strictEqual(Duration.toMillis(defaults.webhookLease), 30_000)
    }))
})
