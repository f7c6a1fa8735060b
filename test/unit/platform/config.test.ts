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

describe("PostgreSQL session settings (SVC_DB_*)", () => {
  it.effect("default to 30 s statements, 60 s idle in a transaction, keepalive after 30 s", () =>
    Effect.gen(function*() {
      const config = yield* read({})
      assert.strictEqual(Duration.toMillis(config.dbStatementTimeout), 30_000)
      assert.strictEqual(Duration.toMillis(config.dbIdleInTransactionTimeout), 60_000)
      assert.strictEqual(Duration.toMillis(config.dbKeepAlive), 30_000)
      const set = yield* read({ SVC_DB_STATEMENT_TIMEOUT: "2m", SVC_DB_IDLE_IN_TRANSACTION_TIMEOUT: "10s", SVC_DB_KEEPALIVE: "5s" })
      assert.strictEqual(Duration.toMillis(set.dbStatementTimeout), 120_000)
    }))

  it.effect("a value that would switch a timeout off (or below a second) is refused at start, naming the variable", () =>
    Effect.gen(function*() {
      for (const name of ["SVC_DB_STATEMENT_TIMEOUT", "SVC_DB_IDLE_IN_TRANSACTION_TIMEOUT", "SVC_DB_KEEPALIVE"]) {
        for (const value of ["0s", "500ms", "5s,10s", "soon"]) {
          const error = yield* Effect.flip(read({ [name]: value }))
          assert.include(String(error), name)
        }
      }
    }))
})
