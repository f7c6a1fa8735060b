import { assert, describe, it } from "@effect/vitest"
import { ConfigProvider, Duration, Effect, Option, Redacted } from "effect"
import { svcConfig } from "../../../src/platform/Config.ts"

const read = (env: Record<string, string>) =>
  Effect.provideService(svcConfig, ConfigProvider.ConfigProvider, ConfigProvider.fromUnknown(env))

describe("configuration", () => {
  it.effect("the validation queue is one whole queue (128 by default); the old per-organization bound is refused at start, naming its replacement", () =>
    Effect.gen(function*() {
      assert.strictEqual((yield* read({})).answerValidationQueue, 128)
      assert.strictEqual((yield* read({ SVC_ANSWER_VALIDATION_QUEUE: "16" })).answerValidationQueue, 16)
      assert.include(
        String(yield* Effect.flip(read({ SVC_ANSWER_VALIDATION_QUEUE: "0" }))),
        "SVC_ANSWER_VALIDATION_QUEUE"
      )
      const old = String(yield* Effect.flip(read({ SVC_ANSWER_VALIDATION_QUEUE_PER_ORG: "32" })))
      assert.include(old, "SVC_ANSWER_VALIDATION_QUEUE_PER_ORG was replaced by SVC_ANSWER_VALIDATION_QUEUE")
    }))

  it.effect("a server warms up before it answers unless SVC_WARM_START=false; the word is checked", () =>
    Effect.gen(function*() {
      assert.isTrue((yield* read({})).warmStart)
      assert.isFalse((yield* read({ SVC_WARM_START: "false" })).warmStart)
      assert.include(String(yield* Effect.flip(read({ SVC_WARM_START: "sometimes" }))), "SVC_WARM_START")
    }))

  it.effect("revoked keys are kept 90 days by default; settable down to a minute", () =>
    Effect.gen(function*() {
      assert.strictEqual(Duration.toMillis((yield* read({})).revokedKeyRetention), 90 * 24 * 3600_000)
      assert.strictEqual(
        Duration.toMillis((yield* read({ SVC_REVOKED_KEY_RETENTION: "1m" })).revokedKeyRetention),
        60_000
      )
      assert.include(
        String(yield* Effect.flip(read({ SVC_REVOKED_KEY_RETENTION: "30s" }))),
        "SVC_REVOKED_KEY_RETENTION"
      )
    }))

  it.effect("a webhook lease must outlast the send deadline by the time needed to record the outcome", () =>
    Effect.gen(function*() {
      const tooShort = yield* Effect.flip(read({ SVC_WEBHOOK_LEASE: "6s", SVC_WEBHOOK_TIMEOUT: "5s" }))
      assert.include(String(tooShort), "SVC_WEBHOOK_LEASE must be at least SVC_WEBHOOK_TIMEOUT plus 2s")
      const enough = yield* read({ SVC_WEBHOOK_LEASE: "7s", SVC_WEBHOOK_TIMEOUT: "5s" })
      assert.strictEqual(Duration.toMillis(enough.webhookLease), 7_000)
      const defaults = yield* read({})
      assert.strictEqual(Duration.toMillis(defaults.webhookLease), 30_000)
    }))

  it.effect("the webhook deadline, lease and cooldowns are one duration each: a list, zero or a word is refused at start, naming the variable", () =>
    Effect.gen(function*() {
      for (
        const name of [
          "SVC_WEBHOOK_TIMEOUT",
          "SVC_WEBHOOK_LEASE",
          "SVC_WEBHOOK_COOLDOWN_BASE",
          "SVC_WEBHOOK_COOLDOWN_MAX"
        ]
      ) {
        for (const value of ["5s,10s", "0s"]) {
          assert.include(
            String(yield* Effect.flip(read({ [name]: value }))),
            `${name} must be one duration of at least`,
            `${name}=${value}`
          )
        }
        assert.include(String(yield* Effect.flip(read({ [name]: "soon" }))), `${name}: "soon" is not a duration`)
      }
      const set = yield* read({
        SVC_WEBHOOK_TIMEOUT: "2s",
        SVC_WEBHOOK_LEASE: "10s",
        SVC_WEBHOOK_COOLDOWN_BASE: "1s",
        SVC_WEBHOOK_COOLDOWN_MAX: "2s"
      })
      assert.deepStrictEqual(
        [set.webhookSendTimeout, set.webhookLease, set.webhookCooldownBase, set.webhookCooldownMax].map(
          Duration.toMillis
        ),
        [2_000, 10_000, 1_000, 2_000]
      )
      const defaults = yield* read({})
      assert.deepStrictEqual(
        [defaults.webhookSendTimeout, defaults.webhookCooldownBase, defaults.webhookCooldownMax].map(Duration.toMillis),
        [5_000, 60_000, 3_600_000]
      )
    }))

  it.effect("settings that would break a documented guarantee of tenant isolation are refused at start", () =>
    Effect.gen(function*() {
      // Validation's time budget is at most one second.
      assert.include(
        String(yield* Effect.flip(read({ SVC_ANSWER_VALIDATION_TIMEOUT: "2s" }))),
        "SVC_ANSWER_VALIDATION_TIMEOUT"
      )
      // An organization with slow checks holds all workers but one: with fewer than two, it could hold them all.
      assert.include(
        String(yield* Effect.flip(read({ SVC_ANSWER_VALIDATION_WORKERS: "1" }))),
        "SVC_ANSWER_VALIDATION_WORKERS"
      )
      // A schema nests inside the request body, whose fields nest at most 64 levels.
      assert.include(
        String(yield* Effect.flip(read({ SVC_ANSWER_SCHEMA_MAX_DEPTH: "100" }))),
        "SVC_ANSWER_SCHEMA_MAX_DEPTH"
      )
      assert.include(String(yield* Effect.flip(read({ SVC_MAX_ENDPOINTS_PER_ORG: "0" }))), "SVC_MAX_ENDPOINTS_PER_ORG")
      // Requests per organization and destination host: at least one, and a bounded pool.
      assert.include(String(yield* Effect.flip(read({ SVC_WEBHOOK_PER_HOST: "0" }))), "SVC_WEBHOOK_PER_HOST")
      assert.include(String(yield* Effect.flip(read({ SVC_WEBHOOK_PER_HOST: "5000" }))), "SVC_WEBHOOK_PER_HOST")
      assert.strictEqual((yield* read({})).webhookPerHost, 32)
      assert.include(String(yield* Effect.flip(read({ SVC_DNS_TIMEOUT: "1s,2s" }))), "SVC_DNS_TIMEOUT")
      const defaults = yield* read({})
      assert.strictEqual(defaults.answerValidationTimeoutMs, 1000)
      assert.strictEqual(defaults.answerValidationWorkers, 2)
      assert.strictEqual(defaults.maxEndpointsPerOrg, 50)
      assert.deepStrictEqual(defaults.dnsServers, [])
      const set = yield* read({ SVC_ANSWER_VALIDATION_TIMEOUT: "250ms", SVC_DNS_SERVERS: "127.0.0.1:5353, [::1]:53" })
      assert.strictEqual(set.answerValidationTimeoutMs, 250)
      assert.deepStrictEqual(set.dnsServers, ["127.0.0.1:5353", "[::1]:53"])
    }))
})

describe("PostgreSQL session settings (SVC_DB_*)", () => {
  it.effect("default to 30 s statements, 60 s idle in a transaction, keepalive after 30 s", () =>
    Effect.gen(function*() {
      const config = yield* read({})
      assert.strictEqual(Duration.toMillis(config.dbStatementTimeout), 30_000)
      assert.strictEqual(Duration.toMillis(config.dbIdleInTransactionTimeout), 60_000)
      assert.strictEqual(Duration.toMillis(config.dbKeepAlive), 30_000)
      const set = yield* read({
        SVC_DB_STATEMENT_TIMEOUT: "2m",
        SVC_DB_IDLE_IN_TRANSACTION_TIMEOUT: "10s",
        SVC_DB_KEEPALIVE: "5s"
      })
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

describe("metrics settings", () => {
  it.effect("off by default; SVC_METRICS_HOST defaults to HOST", () =>
    Effect.gen(function*() {
      const defaults = yield* read({})
      assert.isTrue(Option.isNone(defaults.metricsPort))
      assert.isTrue(Option.isNone(defaults.metricsToken))
      assert.strictEqual((yield* read({ HOST: "0.0.0.0" })).metricsHost, "0.0.0.0")
      assert.strictEqual((yield* read({ HOST: "0.0.0.0", SVC_METRICS_HOST: "127.0.0.1" })).metricsHost, "127.0.0.1")
      assert.deepStrictEqual((yield* read({ SVC_METRICS_PORT: "9464" })).metricsPort, Option.some(9464))
    }))

  it.effect("a guessable SVC_METRICS_TOKEN, an impossible port or the API's own port is refused at start", () =>
    Effect.gen(function*() {
      const short = yield* Effect.flip(read({ SVC_METRICS_TOKEN: "123456789012345" }))
      assert.include(String(short), "SVC_METRICS_TOKEN must be at least 16 characters")
      assert.notInclude(String(short), "123456789012345")
      const token = yield* read({ SVC_METRICS_TOKEN: "1234567890123456" })
      assert.strictEqual(Redacted.value(Option.getOrThrow(token.metricsToken)), "1234567890123456")
      assert.include(
        String(yield* Effect.flip(read({ SVC_METRICS_PORT: "70000" }))),
        "SVC_METRICS_PORT must be between 0 and 65535"
      )
      assert.include(
        String(yield* Effect.flip(read({ PORT: "9000", SVC_METRICS_PORT: "9000" }))),
        "SVC_METRICS_PORT must differ from PORT"
      )
      assert.deepStrictEqual((yield* read({ PORT: "0", SVC_METRICS_PORT: "0" })).metricsPort, Option.some(0))
    }))
})

describe("retention settings (SVC_*_RETENTION)", () => {
  it.effect("default to 30 days of finished webhook deliveries and 7 days of attempts, outbox and session events; settable down to a minute", () =>
    Effect.gen(function*() {
      const defaults = yield* read({})
      assert.strictEqual(Duration.toMillis(defaults.webhookDeliveryRetention), 30 * 86_400_000)
      assert.strictEqual(Duration.toMillis(defaults.deliveryAttemptRetention), 7 * 86_400_000)
      assert.strictEqual(Duration.toMillis(defaults.outboxRetention), 7 * 86_400_000)
      assert.strictEqual(Duration.toMillis(defaults.sessionEventRetention), 7 * 86_400_000)
      assert.strictEqual(Duration.toMillis(defaults.retentionInterval), 60_000)
      assert.strictEqual(defaults.retentionBatch, 500)
      const set = yield* read({
        SVC_WEBHOOK_DELIVERY_RETENTION: "1m",
        SVC_DELIVERY_ATTEMPT_RETENTION: "2m",
        SVC_OUTBOX_RETENTION: "1h",
        SVC_SESSION_EVENT_RETENTION: "90s",
        SVC_RETENTION_INTERVAL: "5s",
        SVC_RETENTION_BATCH: "50"
      })
      assert.strictEqual(Duration.toMillis(set.webhookDeliveryRetention), 60_000)
      assert.strictEqual(Duration.toMillis(set.sessionEventRetention), 90_000)
      assert.strictEqual(set.retentionBatch, 50)
    }))

  it.effect("less than a minute (or zero, which would delete what is still being read) is refused at start, naming the variable", () =>
    Effect.gen(function*() {
      for (
        const name of [
          "SVC_WEBHOOK_DELIVERY_RETENTION",
          "SVC_DELIVERY_ATTEMPT_RETENTION",
          "SVC_OUTBOX_RETENTION",
          "SVC_SESSION_EVENT_RETENTION"
        ]
      ) {
        for (const value of ["0s", "30s", "1m,2m", "forever"]) {
          assert.include(String(yield* Effect.flip(read({ [name]: value }))), name)
        }
      }
      assert.include(String(yield* Effect.flip(read({ SVC_RETENTION_INTERVAL: "0s" }))), "SVC_RETENTION_INTERVAL")
      assert.include(String(yield* Effect.flip(read({ SVC_RETENTION_BATCH: "0" }))), "SVC_RETENTION_BATCH")
    }))
})
