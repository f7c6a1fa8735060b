/**
 * What the service's configuration holds once read (`Config.ts` reads it
 * from the environment and checks it; docs/operations.md, "Configuration",
 * says what each variable means).
 */
import type * as Duration from "effect/Duration"
import type * as LogLevel from "effect/LogLevel"
import type * as Option from "effect/Option"
import type * as Redacted from "effect/Redacted"

export interface SvcConfigShape {
  readonly port: number
  readonly host: string
  /** PostgreSQL server; `None` means the embedded PGlite database. */
  readonly databaseUrl: Option.Option<Redacted.Redacted<string>>
  readonly dataDir: string
  /** How long an embedded CLI waits for another process's hold on `dataDir` before it gives up. */
  readonly cliHoldWait: Duration.Duration
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
  /** Signing secrets of one endpoint in use at once (one signature each per delivery). */
  readonly webhookMaxSigningSecrets: number
  /** How long a process holds a claimed webhook delivery; after a crash it is sent again once this runs out. */
  readonly webhookLease: Duration.Duration
  /** The whole exchange of one webhook attempt must end within this (receivers are promised 5 s: docs/webhooks.md, "Delivery"). */
  readonly webhookSendTimeout: Duration.Duration
  /** Webhook requests in flight per process to one host:port from one organization (each endpoint may still have one beyond); its pool is this plus `maxEndpointsPerOrg`. */
  readonly webhookPerHost: number
  /** Test deliveries one endpoint may be sent per minute (all processes together). */
  readonly webhookTestsPerMinute: number
  /** Broker connections (RabbitMQ, NATS) one process keeps open at most. */
  readonly brokerConnections: number
  /** Of those, the most one organization's endpoints hold; past it they wait for one of their own. */
  readonly brokerConnectionsPerOrg: number
  /** Most failed deliveries one bulk replay takes (at most 10 000). */
  readonly webhookReplayMax: number
  /** Most deliveries one page of a delivery search reads before it answers (a shorter page, with a cursor, when few match). */
  readonly deliverySearchScan: number
  /** How long an endpoint may fail without one successful delivery before svc stops sending to it. */
  readonly webhookDisableAfter: Duration.Duration
  /** Most bytes of an OAuth token endpoint's answer svc reads (an endpoint's `auth`). */
  readonly webhookTokenMaxBytes: number
  /** How long before an endpoint's client certificate expires `endpoint.certificate_expiring` is sent. */
  readonly webhookCertificateNotice: Duration.Duration
  /** Share of traces exported to an organization's collector. */
  readonly telemetrySampleRatio: number
  /** Spans each telemetry destination buffers in memory per process before dropping. */
  readonly telemetryBufferSpans: number
  /** Undelivered export batches a telemetry destination may hold before new spans are dropped. */
  readonly telemetryQueueBatches: number
  /** A telemetry flush round runs at least this often (sooner when a batch is full). */
  readonly telemetryFlushInterval: Duration.Duration
  /** Delays before each retry of a telemetry batch (one attempt more than delays); the deadline of one export request. */
  readonly telemetryRetrySchedule: ReadonlyArray<Duration.Duration>
  readonly telemetryExportTimeout: Duration.Duration
  readonly smtpUrl: Option.Option<Redacted.Redacted<string>>
  /** How long the link of a reviewer address's confirmation mail works. */
  readonly reviewerConfirmationTtl: Duration.Duration
  /** Confirmation mails one organization may cause per hour (all processes together). */
  readonly reviewerConfirmationsPerHour: number
  /** Largest accepted request body. */
  readonly maxBodyBytes: number
  /** Silence after which a session event stream sends a keep-alive comment. */
  readonly sseKeepAliveMs: number
  /** Longest an idle session stream waits before re-reading (events of other processes). */
  readonly ssePollMs: number
  /** PostgreSQL server: `statement_timeout` of every session (migrations excepted); embedded: the watchdog's bound on one statement. */
  readonly dbStatementTimeout: Duration.Duration
  /** PostgreSQL server: `idle_in_transaction_session_timeout` of every session; embedded: with the above, the longest a transaction holds the database. */
  readonly dbIdleInTransactionTimeout: Duration.Duration
  /** PostgreSQL server: silence before TCP keepalive probes start on a connection. */
  readonly dbKeepAlive: Duration.Duration
  /** Size and complexity limits of a task's answer schema, checked before it is compiled. */
  readonly answerSchemaMaxBytes: number
  readonly answerSchemaMaxDepth: number
  readonly answerSchemaMaxSubschemas: number
  readonly answerSchemaMaxPatternLength: number
  /** Time budget of one answer-schema compile or correction check (at most 1 s). */
  readonly answerValidationTimeoutMs: number
  /** Worker threads that compile answer schemas and check corrections (at least 2). */
  readonly answerValidationWorkers: number
  /** Compiled answer schemas each validation worker keeps (least recently used dropped). */
  readonly answerValidationCacheEntries: number
  /** Deadline of removing protected values from one correction (in a scrub worker). */
  readonly scrubTimeoutMs: number
  /** Heap of each validation worker; a check that needs more is refused. */
  readonly answerValidationHeapMb: number
  /** Checks admitted at once per process (waiting or in a worker); an organization holding its share (this over the organizations admitted) gets 429. */
  readonly answerValidationQueue: number
  /** DNS servers for outbound names (`host` or `host:port`); empty: those of /etc/resolv.conf. */
  readonly dnsServers: ReadonlyArray<string>
  /** Deadline of one DNS query, and how many times it is sent. */
  readonly dnsTimeoutMs: number
  readonly dnsTries: number
  /** DNS lookups one organization may have in flight. */
  readonly dnsLookupsPerOrg: number
  /** Notification endpoints one organization may have. */
  readonly maxEndpointsPerOrg: number
  /** Approval policies (action classes) one organization may have. */
  readonly maxApprovalPoliciesPerOrg: number
  /** Reviewer groups one organization may have, and its delegations not yet over. */
  readonly reviewerLimits: { readonly groups: number; readonly delegations: number }
  /** Rules on arguments: size limits, the rule workers' deadline, heap, number and queue, dry runs per minute (`ApprovalRuleSettings`). */
  readonly approvalRules: ApprovalRuleSettings
  /**
   * The MCP gateway (docs/mcp.md): the deadline and the most bytes of one
   * exchange with an upstream MCP server, upstream calls one organization
   * may have in flight per process, how long a `tools/call` without a task
   * waits for a person's decision, and upstream servers per organization.
   */
  readonly mcp: {
    readonly upstreamTimeout: Duration.Duration
    readonly upstreamMaxBytes: number
    readonly upstreamsPerOrg: number
    readonly approvalWait: Duration.Duration
    readonly maxServersPerOrg: number
  }
  /** Tasks one organization may have. */
  readonly maxTasksPerOrg: number
  /** Bytes of feedback one organization may store (each record 256 bytes plus its correction's JSON). */
  readonly maxFeedbackBytesPerOrg: number
  /** Bytes of logged runs one organization may store (each run 256 bytes plus its input's and answer's JSON). */
  readonly maxRunBytesPerOrg: number
  /** Examples one dataset version may hold; a promote past it is refused. */
  readonly maxExamplesPerDataset: number
  /** Promotes one organization may make per minute (all processes together). */
  readonly maxPromotesPerMinute: number
  /** Retention (`src/retention/Retention.ts`) of finished deliveries, attempts, dispatched outbox events nothing refers to, and session stream events. */
  readonly webhookDeliveryRetention: Duration.Duration
  readonly deliveryAttemptRetention: Duration.Duration
  readonly outboxRetention: Duration.Duration
  readonly sessionEventRetention: Duration.Duration
  /** How long a revoked API key's record (and its hash) is kept after revocation. */
  readonly revokedKeyRetention: Duration.Duration
  /**
   * `Idempotency-Key` (`src/idempotency/`): how long a key and its kept
   * answer last, the keys one organization may hold, and the largest answer
   * kept (a larger one is recorded without its body).
   */
  readonly idempotency: {
    readonly ttl: Duration.Duration
    readonly maxKeysPerOrg: number
    readonly maxAnswerBytes: number
  }
  /** How often a process prunes what is past retention, and how many rows one statement deletes. */
  readonly retentionInterval: Duration.Duration
  readonly retentionBatch: number
  /** Base URL of the console's sign-in links (`SVC_PUBLIC_URL`); `None`: `http://HOST:PORT`. */
  readonly publicUrl: Option.Option<string>
  /** API keys (not revoked) one organization may have; `POST /v1/api-keys` beyond it is 409. */
  readonly maxApiKeysPerOrg: number
  /** How often an open event stream re-checks its API key or console session (it ends once revoked). */
  readonly streamAuthRecheckMs: number
  /** Open event streams, in this process: per API key or console session, per organization, in all. */
  readonly maxStreamsPerKey: number
  readonly maxStreamsPerOrg: number
  readonly maxStreams: number
  /** Open connections the API's HTTP server accepts at once (more are closed at once). */
  readonly maxConnections: number
  /** Connections the admin channel (`admin.sock` in the data directory) accepts at once (more are closed at once). */
  readonly adminMaxConnections: number
  /** Largest request body the admin channel reads, in bytes. */
  readonly adminMaxBody: number
  /** Port of the separate `/metrics` listener (`SVC_METRICS_PORT`); `None`: no such listener. */
  readonly metricsPort: Option.Option<number>
  /** Address the `/metrics` listener binds (`SVC_METRICS_HOST`, default `HOST`). */
  readonly metricsHost: string
  /** Bearer token that opens `GET /metrics` on the API port (`SVC_METRICS_TOKEN`); `None`: not served there. */
  readonly metricsToken: Option.Option<Redacted.Redacted<string>>
  /** Least severe log line written (`SVC_LOG_LEVEL`); `Logging.ts` applies it. */
  readonly logLevel: LogLevel.LogLevel
  /** Warm up before answering (`SVC_WARM_START`): workers, the first write, requests through the app; off in `SvcTest.layer` unless asked. */
  readonly warmStart: boolean
}

/** The settings of rules on arguments (docs/approvals.md, "Rules on arguments"). */
export interface ApprovalRuleSettings {
  /** Rules per policy, a condition's characters, AST nodes and nesting depth: checked when a policy is stored. */
  readonly maxRules: number
  readonly maxLength: number
  readonly maxNodes: number
  readonly maxDepth: number
  /** The rule workers: the deadline of a policy's rules on one step, each worker's heap, their number and queue. */
  readonly timeoutMs: number
  readonly heapMb: number
  readonly workers: number
  readonly queue: number
  /** Dry runs one organization may make per minute (all processes together). */
  readonly dryRunsPerMinute: number
}
