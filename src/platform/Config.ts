/**
 * The service's configuration, read once from the environment; every
 * variable, with its default, is a row of the table in docs/operations.md
 * ("Configuration"), which a test keeps equal to this file. Secrets stay
 * `Redacted`.
 */
import * as Config from "effect/Config"
import * as ConfigProvider from "effect/ConfigProvider"
import * as Context from "effect/Context"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type * as LogLevel from "effect/LogLevel"
import * as Option from "effect/Option"
import * as Redacted from "effect/Redacted"
import type { SvcConfigShape } from "./ConfigShape.ts"
import { DEFAULT_DATA_DIR, namesEmbedded } from "./EntrySettings.ts"

export type { SvcConfigShape } from "./ConfigShape.ts"

/**
 * `SVC_SMTP_URL`, checked when svc starts rather than when the first mail
 * goes: a URL nodemailer can use (`smtp:` or `smtps:`, with a host), and a
 * `from` query parameter, when given, that holds an address
 * (`src/notifications/send/Email.ts` reads it as the sender).
 */
const isSmtpUrl = (raw: string): boolean => {
  const url = URL.parse(raw)
  if (url === null || !/^smtps?:$/.test(url.protocol) || url.hostname === "") return false
  const from = url.searchParams.get("from")
  return from === null || /\S@\S/.test(from)
}

/** The non-empty items of a comma-separated value, trimmed. */
const items = (raw: string) => raw.split(",").map((part) => part.trim()).filter((part) => part.length > 0)

const list = (name: string) => Config.String(name).pipe(Config.withDefault(""), Config.map(items))

const durationList = (name: string, fallback: string) =>
  Config.String(name).pipe(
    Config.withDefault(fallback),
    Config.mapEffect((raw) => parseDurations(name, raw))
  )

const invalid = (message: string) => new Config.ConfigError(new ConfigProvider.SourceError({ message }))

const durationIn = {
  ms: Duration.millis,
  s: Duration.seconds,
  m: Duration.minutes,
  h: Duration.hours,
  d: Duration.days
}

/** `5s,5m,30m,2h` → durations; anything else is a configuration error naming the variable. */
export const parseDurations = (
  name: string,
  raw: string
): Effect.Effect<ReadonlyArray<Duration.Duration>, Config.ConfigError> => {
  const out: Array<Duration.Duration> = []
  for (const part of items(raw)) {
    const match = /^(\d+(?:\.\d+)?)(ms|s|m|h|d)$/.exec(part)
    if (match === null) {
      return Effect.fail(invalid(`${name}: "${part}" is not a duration such as 500ms, 5s, 5m, 2h or 1d`))
    }
    out.push(durationIn[match[2] as keyof typeof durationIn](Number(match[1])))
  }
  return Effect.succeed(out)
}

/** One duration of at least `min`; anything else is refused at start, naming the variable. */
const duration = (name: string, fallback: string, min: Duration.Duration) =>
  durationList(name, fallback).pipe(
    Config.mapEffect((list) =>
      list.length === 1 && Duration.toMillis(list[0]!) >= Duration.toMillis(min)
        ? Effect.succeed(list[0]!)
        : Effect.fail(invalid(`${name} must be one duration of at least ${Duration.format(min)}, such as ${fallback}`))
    )
  )

const positiveMillis = (name: string, fallback: number) =>
  Config.Int(name).pipe(
    Config.withDefault(fallback),
    Config.mapEffect((ms) =>
      ms >= 10 ? Effect.succeed(ms) : Effect.fail(invalid(`${name} must be at least 10 (milliseconds)`))
    )
  )

const intAtLeast = (name: string, fallback: number, minimum: number, maximum = Number.MAX_SAFE_INTEGER) =>
  Config.Int(name).pipe(
    Config.withDefault(fallback),
    Config.mapEffect((n) =>
      n >= minimum && n <= maximum
        ? Effect.succeed(n)
        : Effect.fail(invalid(
          maximum === Number.MAX_SAFE_INTEGER
            ? `${name} must be at least ${minimum}`
            : `${name} must be between ${minimum} and ${maximum}`
        ))
    )
  )

/** A single duration in milliseconds, within bounds (`500ms`, `1s`). */
const millisBetween = (name: string, fallback: string, minimum: number, maximum: number) =>
  durationList(name, fallback).pipe(
    Config.mapEffect((list) => {
      const ms = list.length === 1 ? Duration.toMillis(list[0]!) : Number.NaN
      return ms >= minimum && ms <= maximum
        ? Effect.succeed(ms)
        : Effect.fail(invalid(`${name} must be one duration between ${minimum}ms and ${maximum}ms`))
    })
  )
/** A variable that was replaced: set, it stops the start, saying by what. */
const removed = (name: string, replacement: string) =>
  Config.option(Config.String(name)).pipe(
    Config.mapEffect((value) =>
      Option.isNone(value) ? Effect.void : Effect.fail(invalid(`${name} was replaced by ${replacement}; unset it`))
    )
  )

const LOG_LEVELS: Record<string, LogLevel.LogLevel> = {
  trace: "Trace",
  debug: "Debug",
  info: "Info",
  warn: "Warn",
  error: "Error",
  fatal: "Fatal",
  none: "None"
}

/**
 * `SVC_LOG_LEVEL`: `trace`, `debug`, `info` (the default), `warn`, `error`,
 * `fatal` or `none`, any case. Read on its own by the logger's layer too,
 * which starts before the rest of the configuration is read.
 */
export const logLevelConfig: Config.Config<LogLevel.LogLevel> = Config.String("SVC_LOG_LEVEL").pipe(
  Config.withDefault("info"),
  Config.mapEffect((raw) => {
    const level = LOG_LEVELS[raw.trim().toLowerCase()]
    return level !== undefined
      ? Effect.succeed(level)
      : Effect.fail(invalid(`SVC_LOG_LEVEL: "${raw}" is not one of ${Object.keys(LOG_LEVELS).join(", ")}`))
  })
)

/** Shortest `SVC_METRICS_TOKEN`: a guessable token would open the metrics to anyone who can reach the API. */
const METRICS_TOKEN_MIN_LENGTH = 16

/** What a webhook lease must leave beyond the send deadline, to record the outcome. */
const LEASE_MARGIN_MS = 2_000

export const svcConfig: Config.Config<SvcConfigShape> = Config.all({
  // 0 asks the system for a free port (tests, several local instances).
  port: Config.Int("PORT").pipe(
    Config.withDefault(8080),
    Config.mapEffect((port) =>
      port >= 0 && port <= 65535 ? Effect.succeed(port) : Effect.fail(invalid("PORT must be between 0 and 65535"))
    )
  ),
  host: Config.String("HOST").pipe(Config.withDefault("127.0.0.1")),
  databaseUrl: Config.option(Config.Redacted("DATABASE_URL")).pipe(
    Config.map(Option.filter((url) => !namesEmbedded(Redacted.value(url)))),
    // Its value is never repeated: it may hold a password.
    Config.mapEffect((url) =>
      Option.isNone(url) || /^postgres(ql)?:$/.test(URL.parse(Redacted.value(url.value))?.protocol ?? "")
        ? Effect.succeed(url)
        : Effect.fail(invalid("DATABASE_URL must be a postgres:// or postgresql:// URL"))
    )
  ),
  dataDir: Config.String("SVC_DATA_DIR").pipe(Config.withDefault(DEFAULT_DATA_DIR)),
  cliHoldWait: duration("SVC_CLI_HOLD_WAIT", "30s", Duration.seconds(1)),
  masterKey: Config.option(Config.Redacted("SVC_MASTER_KEY")),
  allowedTargetCidrs: list("SVC_ALLOWED_TARGET_CIDRS"),
  extraCaFile: Config.option(Config.String("SVC_EXTRA_CA_FILE")),
  webhookRetrySchedule: durationList("SVC_WEBHOOK_RETRY_SCHEDULE", "5s,5m,30m,2h,5h,10h,10h"),
  webhookQueueCapacity: intAtLeast("SVC_WEBHOOK_QUEUE_CAPACITY", 10_000, 1),
  webhookCooldownBase: duration("SVC_WEBHOOK_COOLDOWN_BASE", "1m", Duration.seconds(1)),
  webhookCooldownMax: duration("SVC_WEBHOOK_COOLDOWN_MAX", "1h", Duration.seconds(1)),
  webhookMaxSigningSecrets: intAtLeast("SVC_WEBHOOK_MAX_SIGNING_SECRETS", 3, 2, 10),
  webhookCooldownAfter: intAtLeast("SVC_WEBHOOK_COOLDOWN_AFTER", 3, 1),
  webhookLease: duration("SVC_WEBHOOK_LEASE", "30s", Duration.seconds(1)),
  webhookSendTimeout: duration("SVC_WEBHOOK_TIMEOUT", "5s", Duration.millis(100)),
  webhookPerHost: intAtLeast("SVC_WEBHOOK_PER_HOST", 32, 1, 1024),
  webhookTestsPerMinute: intAtLeast("SVC_WEBHOOK_TESTS_PER_MINUTE", 6, 1, 600),
  brokerConnections: intAtLeast("SVC_BROKER_CONNECTIONS", 256, 1, 65_536),
  brokerConnectionsPerOrg: intAtLeast("SVC_BROKER_CONNECTIONS_PER_ORG", 32, 1, 65_536),
  webhookReplayMax: intAtLeast("SVC_WEBHOOK_REPLAY_MAX", 10_000, 1, 10_000),
  deliverySearchScan: intAtLeast("SVC_DELIVERY_SEARCH_SCAN", 20_000, 1_000, 1_000_000),
  webhookDisableAfter: duration("SVC_WEBHOOK_DISABLE_AFTER", "5d", Duration.seconds(1)),
  webhookTokenMaxBytes: intAtLeast("SVC_WEBHOOK_TOKEN_MAX_BYTES", 16_384, 1_024, 1_048_576),
  webhookCertificateNotice: duration("SVC_WEBHOOK_CERTIFICATE_NOTICE", "14d", Duration.minutes(1)),
  telemetrySampleRatio: Config.Finite("SVC_TELEMETRY_SAMPLE_RATIO").pipe(
    Config.withDefault(1),
    Config.mapEffect((ratio) =>
      ratio >= 0 && ratio <= 1
        ? Effect.succeed(ratio)
        : Effect.fail(invalid("SVC_TELEMETRY_SAMPLE_RATIO must be between 0 and 1"))
    )
  ),
  telemetryBufferSpans: intAtLeast("SVC_TELEMETRY_BUFFER_SPANS", 4096, 1),
  telemetryQueueBatches: intAtLeast("SVC_TELEMETRY_QUEUE_BATCHES", 20, 1),
  telemetryFlushInterval: duration("SVC_TELEMETRY_FLUSH_INTERVAL", "2s", Duration.millis(100)),
  telemetryRetrySchedule: durationList("SVC_TELEMETRY_RETRY_SCHEDULE", "1s,2s,4s,8s"),
  telemetryExportTimeout: duration("SVC_TELEMETRY_EXPORT_TIMEOUT", "10s", Duration.millis(100)),
  // Checked at start, not when the first mail goes; its value is never repeated (it holds a password).
  smtpUrl: Config.option(Config.Redacted("SVC_SMTP_URL")).pipe(
    Config.mapEffect((url) =>
      Option.isNone(url) || isSmtpUrl(Redacted.value(url.value))
        ? Effect.succeed(url)
        : Effect.fail(
          invalid("SVC_SMTP_URL must be an smtp:// or smtps:// URL with a host, and a from= address when it has one")
        )
    )
  ),
  reviewerConfirmationTtl: duration("SVC_REVIEWER_CONFIRMATION_TTL", "24h", Duration.minutes(1)),
  reviewerConfirmationsPerHour: intAtLeast("SVC_REVIEWER_CONFIRMATIONS_PER_HOUR", 5, 1, 100),
  maxBodyBytes: Config.Int("SVC_MAX_BODY_BYTES").pipe(Config.withDefault(1024 * 1024)),
  sseKeepAliveMs: positiveMillis("SVC_SSE_KEEPALIVE_MS", 15_000),
  ssePollMs: positiveMillis("SVC_SSE_POLL_MS", 10_000),
  // A zero would switch these off, and with them the promise that a request
  // fails rather than waits on a stuck statement, session or connection.
  dbStatementTimeout: duration("SVC_DB_STATEMENT_TIMEOUT", "30s", Duration.seconds(1)),
  dbIdleInTransactionTimeout: duration("SVC_DB_IDLE_IN_TRANSACTION_TIMEOUT", "60s", Duration.seconds(1)),
  dbKeepAlive: duration("SVC_DB_KEEPALIVE", "30s", Duration.seconds(1)),
  answerSchemaMaxBytes: intAtLeast("SVC_ANSWER_SCHEMA_MAX_BYTES", 64 * 1024, 256),
  answerSchemaMaxDepth: intAtLeast("SVC_ANSWER_SCHEMA_MAX_DEPTH", 32, 2, 60),
  answerSchemaMaxSubschemas: intAtLeast("SVC_ANSWER_SCHEMA_MAX_SUBSCHEMAS", 1000, 1),
  answerSchemaMaxPatternLength: intAtLeast("SVC_ANSWER_SCHEMA_MAX_PATTERN_LENGTH", 512, 1),
  // The promise to tenants: no correction waits on its check for more than a second.
  answerValidationTimeoutMs: millisBetween("SVC_ANSWER_VALIDATION_TIMEOUT", "1s", 10, 1000),
  // An organization whose checks are slow holds at most all workers but
  // one (`WorkerPool.ts`): with two, the others always have one.
  answerValidationWorkers: intAtLeast("SVC_ANSWER_VALIDATION_WORKERS", 2, 2, 64),
  warmStart: Config.Boolean("SVC_WARM_START").pipe(Config.withDefault(true)),
  answerValidationCacheEntries: intAtLeast("SVC_ANSWER_VALIDATION_CACHE", 256, 1),
  answerValidationHeapMb: intAtLeast("SVC_ANSWER_VALIDATION_HEAP_MB", 256, 32),
  // Scrubbing a correction near the body limit takes a few hundred
  // milliseconds on a busy machine: a deadline of its own, off the event loop.
  scrubTimeoutMs: millisBetween("SVC_SCRUB_TIMEOUT", "5s", 100, 60_000),
  answerValidationQueue: intAtLeast("SVC_ANSWER_VALIDATION_QUEUE", 128, 1, 100_000),
  // Replaced by the whole queue with fair shares: a deployment that set
  // the old bound learns at start instead of running with another meaning.
  answerValidationQueuePerOrgGone: removed(
    "SVC_ANSWER_VALIDATION_QUEUE_PER_ORG",
    "SVC_ANSWER_VALIDATION_QUEUE (checks admitted per process, shared fairly between organizations)"
  ),
  dnsServers: list("SVC_DNS_SERVERS"),
  dnsTimeoutMs: millisBetween("SVC_DNS_TIMEOUT", "2s", 10, 30_000),
  dnsTries: intAtLeast("SVC_DNS_TRIES", 2, 1, 10),
  dnsLookupsPerOrg: intAtLeast("SVC_DNS_LOOKUPS_PER_ORG", 8, 1),
  maxEndpointsPerOrg: intAtLeast("SVC_MAX_ENDPOINTS_PER_ORG", 50, 1),
  maxApprovalPoliciesPerOrg: intAtLeast("SVC_MAX_APPROVAL_POLICIES_PER_ORG", 1000, 1),
  reviewerLimits: Config.all({
    groups: intAtLeast("SVC_MAX_REVIEWER_GROUPS_PER_ORG", 100, 1),
    delegations: intAtLeast("SVC_MAX_DELEGATIONS_PER_ORG", 1000, 1)
  }),
  approvalRules: Config.all({
    maxRules: intAtLeast("SVC_APPROVAL_RULES_MAX", 50, 0, 200),
    maxLength: intAtLeast("SVC_APPROVAL_RULE_MAX_LENGTH", 2000, 1, 8000),
    maxNodes: intAtLeast("SVC_APPROVAL_RULE_MAX_NODES", 200, 1, 2000),
    maxDepth: intAtLeast("SVC_APPROVAL_RULE_MAX_DEPTH", 12, 1, 50),
    timeoutMs: millisBetween("SVC_APPROVAL_RULES_TIMEOUT", "100ms", 10, 1000),
    heapMb: intAtLeast("SVC_APPROVAL_RULES_HEAP_MB", 256, 64, 4096),
    // As the validation workers: a slow organization holds all workers but one.
    workers: intAtLeast("SVC_APPROVAL_RULE_WORKERS", 2, 2, 64),
    queue: intAtLeast("SVC_APPROVAL_RULES_QUEUE", 128, 1, 100_000),
    dryRunsPerMinute: intAtLeast("SVC_APPROVAL_DRY_RUNS_PER_MINUTE", 60, 1, 60_000)
  }),
  // Replaced by a deadline enforced while rules run: a deployment that set
  // the old estimate's budget learns at start instead of relying on it.
  approvalRuleMaxCostGone: removed(
    "SVC_APPROVAL_RULE_MAX_COST",
    "SVC_APPROVAL_RULES_TIMEOUT (a deadline enforced while a policy's rules run)"
  ),
  mcp: Config.all({
    upstreamTimeout: duration("SVC_MCP_UPSTREAM_TIMEOUT", "30s", Duration.millis(100)),
    upstreamMaxBytes: intAtLeast("SVC_MCP_UPSTREAM_MAX_BYTES", 1024 * 1024, 1024, 64 * 1024 * 1024),
    upstreamsPerOrg: intAtLeast("SVC_MCP_UPSTREAM_CALLS_PER_ORG", 16, 1, 1024),
    approvalWait: duration("SVC_MCP_APPROVAL_WAIT", "25s", Duration.millis(0)),
    maxServersPerOrg: intAtLeast("SVC_MAX_MCP_SERVERS_PER_ORG", 50, 1, 1000)
  }),
  maxTasksPerOrg: intAtLeast("SVC_MAX_TASKS_PER_ORG", 10_000, 1),
  maxFeedbackBytesPerOrg: intAtLeast("SVC_MAX_FEEDBACK_BYTES_PER_ORG", 1024 ** 3, 1024, Number.MAX_SAFE_INTEGER),
  maxRunBytesPerOrg: intAtLeast("SVC_MAX_RUN_BYTES_PER_ORG", 10 * 1024 ** 3, 1024, Number.MAX_SAFE_INTEGER),
  // Positions are 32-bit integers in the database.
  maxExamplesPerDataset: intAtLeast("SVC_MAX_EXAMPLES_PER_DATASET", 1_000_000, 1, 2 ** 31 - 1),
  maxPromotesPerMinute: intAtLeast("SVC_MAX_PROMOTES_PER_MINUTE", 60, 1, 60_000),
  // Down to a minute, for tests and small installations.
  webhookDeliveryRetention: duration("SVC_WEBHOOK_DELIVERY_RETENTION", "30d", Duration.minutes(1)),
  deliveryAttemptRetention: duration("SVC_DELIVERY_ATTEMPT_RETENTION", "7d", Duration.minutes(1)),
  outboxRetention: duration("SVC_OUTBOX_RETENTION", "7d", Duration.minutes(1)),
  sessionEventRetention: duration("SVC_SESSION_EVENT_RETENTION", "7d", Duration.minutes(1)),
  revokedKeyRetention: duration("SVC_REVOKED_KEY_RETENTION", "90d", Duration.minutes(1)),
  idempotency: Config.all({
    ttl: duration("SVC_IDEMPOTENCY_TTL", "24h", Duration.minutes(1)),
    maxKeysPerOrg: intAtLeast("SVC_IDEMPOTENCY_MAX_KEYS_PER_ORG", 100_000, 1, 10_000_000),
    maxAnswerBytes: intAtLeast("SVC_IDEMPOTENCY_MAX_ANSWER_BYTES", 256 * 1024, 1024, 16 * 1024 * 1024)
  }),
  retentionInterval: duration("SVC_RETENTION_INTERVAL", "1m", Duration.seconds(1)),
  retentionBatch: intAtLeast("SVC_RETENTION_BATCH", 500, 1, 10_000),
  publicUrl: Config.option(Config.String("SVC_PUBLIC_URL")).pipe(
    Config.map(Option.filter((url) => url.length > 0)),
    Config.mapEffect((url) => {
      if (Option.isNone(url)) return Effect.succeed(url)
      const protocol = URL.parse(url.value)?.protocol
      return protocol === "http:" || protocol === "https:"
        ? Effect.succeed(Option.some(url.value.replace(/\/+$/, "")))
        : Effect.fail(invalid("SVC_PUBLIC_URL must be an http or https URL"))
    })
  ),
  maxApiKeysPerOrg: intAtLeast("SVC_MAX_API_KEYS_PER_ORG", 1000, 1),
  streamAuthRecheckMs: millisBetween("SVC_STREAM_AUTH_RECHECK", "10s", 100, 50_000),
  maxStreamsPerKey: intAtLeast("SVC_MAX_STREAMS_PER_KEY", 100, 1),
  maxStreamsPerOrg: intAtLeast("SVC_MAX_STREAMS_PER_ORG", 500, 1),
  maxStreams: intAtLeast("SVC_MAX_STREAMS", 5000, 1),
  maxConnections: intAtLeast("SVC_MAX_CONNECTIONS", 10_000, 16),
  adminMaxConnections: intAtLeast("SVC_ADMIN_MAX_CONNECTIONS", 16, 2, 1024),
  adminMaxBody: intAtLeast("SVC_ADMIN_MAX_BODY", 65_536, 1024, 16 * 1024 * 1024),
  metricsPort: Config.option(Config.Int("SVC_METRICS_PORT")).pipe(
    Config.mapEffect((port) =>
      Option.isNone(port) || (port.value >= 0 && port.value <= 65535)
        ? Effect.succeed(port)
        : Effect.fail(invalid("SVC_METRICS_PORT must be between 0 and 65535"))
    )
  ),
  metricsHost: Config.option(Config.String("SVC_METRICS_HOST")),
  logLevel: logLevelConfig,
  metricsToken: Config.option(Config.Redacted("SVC_METRICS_TOKEN")).pipe(
    Config.map(Option.filter((token) => Redacted.value(token).length > 0)),
    Config.mapEffect((token) =>
      Option.isSome(token) && Redacted.value(token.value).length < METRICS_TOKEN_MIN_LENGTH
        ? Effect.fail(invalid(`SVC_METRICS_TOKEN must be at least ${METRICS_TOKEN_MIN_LENGTH} characters`))
        : Effect.succeed(token)
    )
  )
}).pipe(
  Config.map((
    { metricsHost, answerValidationQueuePerOrgGone: _gone, approvalRuleMaxCostGone: _costGone, ...config }
  ) => ({
    ...config,
    metricsHost: Option.getOrElse(metricsHost, () => config.host)
  })),
  // The metrics listener cannot share the API's port: one of them would fail to bind.
  Config.mapEffect((config) =>
    Option.isSome(config.metricsPort) && config.metricsPort.value !== 0 && config.metricsPort.value === config.port
      ? Effect.fail(invalid("SVC_METRICS_PORT must differ from PORT"))
      : Effect.succeed(config)
  ),
  // A lease that can run out while its send is still within its deadline
  // would let another process send the same delivery at the same time.
  Config.mapEffect((config) =>
    Duration.toMillis(config.webhookLease) >= Duration.toMillis(config.webhookSendTimeout) + LEASE_MARGIN_MS
      ? Effect.succeed(config)
      : Effect.fail(invalid(`SVC_WEBHOOK_LEASE must be at least SVC_WEBHOOK_TIMEOUT plus ${LEASE_MARGIN_MS / 1000}s`))
  )
)

export class SvcConfig extends Context.Service<SvcConfig, SvcConfigShape>()("svc/platform/SvcConfig") {
  /** Reads the environment once. */
  static readonly layer = Layer.effect(SvcConfig, svcConfig)

  /** A fixed configuration, for tests and for embedding `svc` in another program. */
  static readonly layerWith = (overrides: Partial<SvcConfigShape> = {}) =>
    Layer.effect(SvcConfig, Effect.map(svcConfig, (fromEnv) => ({ ...fromEnv, ...overrides })))
}
