/**
 * The service's configuration, read once from the environment
 * (DESIGN.md, "Configuration"). Secrets stay `Redacted`.
 */
import { Config, ConfigProvider, Context, Duration, Effect, Layer, Option, Redacted } from "effect"

export interface SvcConfigShape {
  readonly port: number
  readonly host: string
  /** PostgreSQL server; `None` means the embedded PGlite database. */
  readonly databaseUrl: Option.Option<Redacted.Redacted<string>>
  readonly dataDir: string
  /** 32 bytes, base64. Embedded mode generates one into `dataDir` when unset. */
  readonly masterKey: Option.Option<Redacted.Redacted<string>>
  /** CIDRs that outbound URL checks accept although not public. */
  readonly allowedTargetCidrs: ReadonlyArray<string>
  /** PEM bundle trusted for outbound TLS beside the system store. */
  readonly extraCaFile: Option.Option<string>
  /** Delays before each webhook retry. */
  readonly webhookRetrySchedule: ReadonlyArray<Duration.Duration>
  /** Undelivered webhook deliveries an endpoint may have before new events are recorded as failed. */
  readonly webhookQueueCapacity: number
  /** First cooldown of a failing endpoint; it doubles with each further failure up to `webhookCooldownMax`. */
  readonly webhookCooldownBase: Duration.Duration
  readonly webhookCooldownMax: Duration.Duration
  /** Consecutive failed attempts before an endpoint cools down. */
  readonly webhookCooldownAfter: number
  /** How long a process holds a claimed webhook delivery; after a crash it is sent again once this runs out. */
  readonly webhookLease: Duration.Duration
  /** The whole exchange of one webhook attempt must end within this (the spec's 5 s acknowledgement limit). */
  readonly webhookSendTimeout: Duration.Duration
  /** Share of traces exported to an organization's collector. */
  readonly telemetrySampleRatio: number
  /** Spans each telemetry destination buffers in memory per process before dropping. */
  readonly telemetryBufferSpans: number
  /** Undelivered export batches a telemetry destination may hold before new spans are dropped. */
  readonly telemetryQueueBatches: number
  readonly smtpUrl: Option.Option<Redacted.Redacted<string>>
  /** Largest accepted request body. */
  readonly maxBodyBytes: number
  /** Silence after which a session event stream sends a keep-alive comment. */
  readonly sseKeepAliveMs: number
  /** Longest an idle session stream waits before re-reading (events of other processes). */
  readonly ssePollMs: number
  /** PostgreSQL server: `statement_timeout` of every session (migrations excepted). */
  readonly dbStatementTimeout: Duration.Duration
  /** PostgreSQL server: `idle_in_transaction_session_timeout` of every session. */
  readonly dbIdleInTransactionTimeout: Duration.Duration
  /** PostgreSQL server: silence before TCP keepalive probes start on a connection. */
  readonly dbKeepAlive: Duration.Duration
  /** Port of the separate `/metrics` listener (`SVC_METRICS_PORT`); `None`: no such listener. */
  readonly metricsPort: Option.Option<number>
  /** Address the `/metrics` listener binds (`SVC_METRICS_HOST`, default `HOST`). */
  readonly metricsHost: string
  /** Bearer token that opens `GET /metrics` on the API port (`SVC_METRICS_TOKEN`); `None`: not served there. */
  readonly metricsToken: Option.Option<Redacted.Redacted<string>>
}

const list = (name: string) =>
  Config.String(name).pipe(
    Config.withDefault(""),
    Config.map((raw) => raw.split(",").map((part) => part.trim()).filter((part) => part.length > 0))
  )

const durationList = (name: string, fallback: string) =>
  Config.String(name).pipe(
    Config.withDefault(fallback),
    Config.mapEffect((raw) => parseDurations(name, raw))
  )

const invalid = (message: string) => new Config.ConfigError(new ConfigProvider.SourceError({ message }))

/** `5s,5m,30m,2h` → durations; anything else is a configuration error naming the variable. */
export const parseDurations = (
  name: string,
  raw: string
): Effect.Effect<ReadonlyArray<Duration.Duration>, Config.ConfigError> => {
  const parts = raw.split(",").map((part) => part.trim()).filter((part) => part.length > 0)
  const out: Array<Duration.Duration> = []
  for (const part of parts) {
    const match = /^(\d+(?:\.\d+)?)(ms|s|m|h|d)$/.exec(part)
    if (match === null) {
      return Effect.fail(invalid(`${name}: "${part}" is not a duration such as 500ms, 5s, 5m, 2h or 1d`))
    }
    const amount = Number(match[1])
    const unit = match[2] as "ms" | "s" | "m" | "h" | "d"
    out.push(
      unit === "ms"
        ? Duration.millis(amount)
        : unit === "s"
        ? Duration.seconds(amount)
        : unit === "m"
        ? Duration.minutes(amount)
        : unit === "h"
        ? Duration.hours(amount)
        : Duration.days(amount)
    )
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
    Config.mapEffect((ms) => ms >= 10 ? Effect.succeed(ms) : Effect.fail(invalid(`${name} must be at least 10 (milliseconds)`)))
  )

/** Shortest `SVC_METRICS_TOKEN`: a guessable token would open the metrics to anyone who can reach the API. */
export const METRICS_TOKEN_MIN_LENGTH = 16

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
    Config.map(Option.filter((url) => Redacted.value(url).length > 0))
  ),
  dataDir: Config.String("SVC_DATA_DIR").pipe(Config.withDefault("./.data")),
  masterKey: Config.option(Config.Redacted("SVC_MASTER_KEY")),
  allowedTargetCidrs: list("SVC_ALLOWED_TARGET_CIDRS"),
  extraCaFile: Config.option(Config.String("SVC_EXTRA_CA_FILE")),
  webhookRetrySchedule: durationList("SVC_WEBHOOK_RETRY_SCHEDULE", "5s,5m,30m,2h,5h,10h,10h"),
  webhookQueueCapacity: Config.Int("SVC_WEBHOOK_QUEUE_CAPACITY").pipe(
    Config.withDefault(10_000),
    Config.mapEffect((n) => n >= 1 ? Effect.succeed(n) : Effect.fail(invalid("SVC_WEBHOOK_QUEUE_CAPACITY must be at least 1")))
  ),
  webhookCooldownBase: durationList("SVC_WEBHOOK_COOLDOWN_BASE", "1m").pipe(Config.map((list) => list[0] ?? Duration.minutes(1))),
  webhookCooldownMax: durationList("SVC_WEBHOOK_COOLDOWN_MAX", "1h").pipe(Config.map((list) => list[0] ?? Duration.hours(1))),
  webhookCooldownAfter: Config.Int("SVC_WEBHOOK_COOLDOWN_AFTER").pipe(
    Config.withDefault(3),
    Config.mapEffect((n) => n >= 1 ? Effect.succeed(n) : Effect.fail(invalid("SVC_WEBHOOK_COOLDOWN_AFTER must be at least 1")))
  ),
  webhookLease: durationList("SVC_WEBHOOK_LEASE", "30s").pipe(Config.map((list) => list[0] ?? Duration.seconds(30))),
  webhookSendTimeout: durationList("SVC_WEBHOOK_TIMEOUT", "5s").pipe(Config.map((list) => list[0] ?? Duration.seconds(5))),
  telemetrySampleRatio: Config.Finite("SVC_TELEMETRY_SAMPLE_RATIO").pipe(
    Config.withDefault(1),
    Config.mapEffect((ratio) =>
      ratio >= 0 && ratio <= 1
        ? Effect.succeed(ratio)
        : Effect.fail(invalid("SVC_TELEMETRY_SAMPLE_RATIO must be between 0 and 1"))
    )
  ),
  telemetryBufferSpans: Config.Int("SVC_TELEMETRY_BUFFER_SPANS").pipe(
    Config.withDefault(4096),
    Config.mapEffect((n) => n >= 1 ? Effect.succeed(n) : Effect.fail(invalid("SVC_TELEMETRY_BUFFER_SPANS must be at least 1")))
  ),
  telemetryQueueBatches: Config.Int("SVC_TELEMETRY_QUEUE_BATCHES").pipe(
    Config.withDefault(20),
    Config.mapEffect((n) => n >= 1 ? Effect.succeed(n) : Effect.fail(invalid("SVC_TELEMETRY_QUEUE_BATCHES must be at least 1")))
  ),
  smtpUrl: Config.option(Config.Redacted("SVC_SMTP_URL")),
  maxBodyBytes: Config.Int("SVC_MAX_BODY_BYTES").pipe(Config.withDefault(1024 * 1024)),
  sseKeepAliveMs: positiveMillis("SVC_SSE_KEEPALIVE_MS", 15_000),
  ssePollMs: positiveMillis("SVC_SSE_POLL_MS", 10_000),
  // A zero would switch these off, and with them the promise that a request
  // fails rather than waits on a stuck statement, session or connection.
  dbStatementTimeout: duration("SVC_DB_STATEMENT_TIMEOUT", "30s", Duration.seconds(1)),
  dbIdleInTransactionTimeout: duration("SVC_DB_IDLE_IN_TRANSACTION_TIMEOUT", "60s", Duration.seconds(1)),
  dbKeepAlive: duration("SVC_DB_KEEPALIVE", "30s", Duration.seconds(1)),
  metricsPort: Config.option(Config.Int("SVC_METRICS_PORT")).pipe(
    Config.mapEffect((port) =>
      Option.isNone(port) || (port.value >= 0 && port.value <= 65535)
        ? Effect.succeed(port)
        : Effect.fail(invalid("SVC_METRICS_PORT must be between 0 and 65535"))
    )
  ),
  metricsHost: Config.option(Config.String("SVC_METRICS_HOST")),
  metricsToken: Config.option(Config.Redacted("SVC_METRICS_TOKEN")).pipe(
    Config.map(Option.filter((token) => Redacted.value(token).length > 0)),
    Config.mapEffect((token) =>
      Option.isSome(token) && Redacted.value(token.value).length < METRICS_TOKEN_MIN_LENGTH
        ? Effect.fail(invalid(`SVC_METRICS_TOKEN must be at least ${METRICS_TOKEN_MIN_LENGTH} characters`))
        : Effect.succeed(token)
    )
  )
}).pipe(
  Config.map(({ metricsHost, ...config }) => ({ ...config, metricsHost: Option.getOrElse(metricsHost, () => config.host) })),
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
    Layer.effect(
      SvcConfig,
      Effect.map(svcConfig, (fromEnv) => ({ ...fromEnv, ...overrides }))
    )
}
