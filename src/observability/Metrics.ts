/**
 * The operators' metrics: one prom-client registry per running service,
 * rendered in the Prometheus text format at `GET /metrics` (`Endpoint.ts`).
 *
 * Why prom-client rather than `effect/observability`'s `PrometheusMetrics`
 * or OpenTelemetry's metrics SDK: prom-client is the Prometheus client for
 * Node that most exporters use; its counters, gauges and histograms are
 * plain synchronous calls (the capturing tracer records drops inside
 * `Span.end`, where no Effect can run), it renders `_total`, `_bucket`,
 * `HELP` and `TYPE` exactly as Prometheus expects, and it brings the
 * standard `process_*` / `nodejs_*` metrics. Effect's formatter (unstable)
 * writes counters without `_total` and its metrics live in the fiber
 * context; the OpenTelemetry SDK would add a second metrics pipeline and
 * half a dozen packages whose versions already fight the test-only
 * OpenTelemetry packages.
 *
 * Names and labels are contract (docs/operations.md, "Metrics"). No label ever holds
 * an organization's id, a secret, a URL or any other unbounded value: every
 * label below takes its values from a fixed set, and an HTTP route is the
 * route template (`/v1/tasks/:task_id`), never the path.
 *
 * `Metrics` is a reference with a default: code that records an event needs
 * nothing new from its callers (a test that builds one service alone gets a
 * private registry nobody reads); the application provides one registry
 * per running service (`Metrics.layer`), which its `/metrics` renders.
 */
import { Context, Effect, Layer, Option, type Scope } from "effect"
import * as Prometheus from "prom-client"
import { type WorkCounts, workCounts } from "../database/WorkCounts.ts"
import { SvcConfig } from "../platform/Config.ts"
import { makeHttpDurationChildren } from "./HttpDurationChildren.ts"

/** Delivery kinds of the shared queue (`src/deliveries`). */
export const DELIVERY_KINDS = ["webhook", "telemetry", "email"] as const

/** What one delivery attempt led to (the queue's outcome tags). */
export type AttemptOutcome = "Delivered" | "Partial" | "Retry" | "Failed"

/** `organizations`: export to each organization's destination; `operator`: the service's own traces. */
export type SpanPipeline = "organizations" | "operator"

/**
 * Why spans were dropped: a full in-memory buffer, a full delivery queue
 * (organizations), a collector that refused or never took them.
 */
export type DropReason = "buffer_full" | "queue_full" | "export_failed" | "rejected_by_collector"

const DROP_REASONS: Record<SpanPipeline, ReadonlyArray<DropReason>> = {
  organizations: ["buffer_full", "queue_full", "export_failed", "rejected_by_collector"],
  operator: ["buffer_full", "export_failed"]
}

export type DeadlineKind = "expiring" | "escalate" | "expire"

/** OpenTelemetry's default bucket boundaries for `http.server.request.duration` (seconds). */
export const HTTP_DURATION_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10]

/** The label value of a request no route matched, and of an unknown method (OpenTelemetry's `_OTHER`). */
export const OTHER = "_OTHER"

const KNOWN_METHODS: ReadonlySet<string> = new Set([
  "GET",
  "HEAD",
  "POST",
  "PUT",
  "PATCH",
  "DELETE",
  "OPTIONS",
  "TRACE",
  "CONNECT"
])

const outcomeLabel: Record<AttemptOutcome, string> = {
  Delivered: "delivered",
  Partial: "partial",
  Retry: "retry",
  Failed: "failed"
}

export interface MetricsShape {
  readonly registry: Prometheus.Registry
  /** One HTTP request answered by the API: its route template (`undefined`: no route matched). */
  readonly httpRequest: (method: string, route: string | undefined, status: number, seconds: number) => void
  /** One delivery attempt recorded by the delivery worker; a final outcome also counts the delivery. */
  readonly deliveryAttempt: (kind: string, outcome: AttemptOutcome, durationMs: number) => void
  readonly spansExported: (pipeline: SpanPipeline, count: number) => void
  readonly spansDropped: (pipeline: SpanPipeline, reason: DropReason, count: number) => void
  /** Reports, at each scrape, how many spans the pipeline holds in memory. */
  readonly pendingSpans: (pipeline: SpanPipeline, read: () => number) => void
  /** A deadline the scheduler fired, `lagSeconds` after it was due. */
  readonly deadlineFired: (kind: DeadlineKind, lagSeconds: number) => void
  /** Counts an open event stream for the life of the current scope. */
  readonly streamOpen: (stream: "session" | "approvals") => Effect.Effect<void, never, Scope.Scope>
  /** Gauges whose values are read at scrape time (`DatabaseGauges`). */
  readonly gauges: {
    readonly queueDepth: Prometheus.Gauge<"kind">
    readonly queueOldestAge: Prometheus.Gauge<"kind">
    readonly targetsCoolingDown: Prometheus.Gauge<"kind">
    readonly endpointsDeactivated: Prometheus.Gauge
    readonly poolMax: Prometheus.Gauge
    readonly connections: Prometheus.Gauge<"state">
  }
}

/** A fresh registry with every metric of the contract. */
export const makeMetrics = (options: { readonly processMetrics?: boolean } = {}): MetricsShape => {
  const registry = new Prometheus.Registry()
  const registers = [registry]
  if (options.processMetrics !== false) Prometheus.collectDefaultMetrics({ register: registry })
  const counter = <L extends string>(name: string, labelNames: ReadonlyArray<L>, help: string) =>
    new Prometheus.Counter<L>({ name, help, labelNames, registers })
  const gauge = <L extends string>(
    name: string,
    labelNames: ReadonlyArray<L>,
    help: string,
    collect?: (this: Prometheus.Gauge<L>) => void
  ) => new Prometheus.Gauge<L>({ name, help, labelNames, registers, ...(collect === undefined ? {} : { collect }) })
  const histogram = <L extends string>(
    name: string,
    labelNames: ReadonlyArray<L>,
    buckets: Array<number>,
    help: string
  ) => new Prometheus.Histogram<L>({ name, help, labelNames, buckets, registers })

  const observeHttp = makeHttpDurationChildren(histogram(
    "http_server_request_duration_seconds",
    ["http_request_method", "http_route", "http_response_status_code"],
    HTTP_DURATION_BUCKETS,
    "Duration of HTTP server requests until the response is ready (OpenTelemetry http.server.request.duration)."
  ))
  const deliveries = counter(
    "svc_deliveries_total",
    ["kind", "outcome"],
    "Deliveries that reached a final outcome in the delivery worker, by kind and outcome."
  )
  const attempts = counter(
    "svc_delivery_attempts_total",
    ["kind", "outcome"],
    "Delivery attempts recorded, by kind and what the attempt led to (delivered, partial, retry, failed)."
  )
  const attemptDuration = histogram(
    "svc_delivery_attempt_duration_seconds",
    ["kind"],
    [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
    "Duration of one delivery attempt (the whole exchange with the receiver), by kind."
  )
  const exported = counter(
    "svc_telemetry_spans_exported_total",
    ["pipeline"],
    "Spans a collector accepted, by pipeline (organizations: their destinations; operator: the service's own traces)."
  )
  const dropped = counter(
    "svc_telemetry_spans_dropped_total",
    ["pipeline", "reason"],
    "Spans dropped before a collector accepted them, by pipeline and reason."
  )
  const pendingReaders = new Map<SpanPipeline, () => number>()
  gauge(
    "svc_telemetry_spans_pending",
    ["pipeline"],
    "Spans held in this process's memory, waiting to be batched (organizations) or exported (operator).",
    function() {
      for (const pipeline of ["organizations", "operator"] as const) {
        const read = pendingReaders.get(pipeline)
        this.set({ pipeline }, read === undefined ? 0 : read())
      }
    }
  )
  const deadlines = counter(
    "svc_approval_deadlines_fired_total",
    ["deadline"],
    "Approval deadlines fired by the scheduler, by deadline kind (expiring, escalate, expire)."
  )
  const schedulerLag = histogram(
    "svc_approval_scheduler_lag_seconds",
    [],
    [0.01, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 300],
    "How late the scheduler fired each approval deadline after it was due."
  )
  const streams = gauge(
    "svc_session_streams_open",
    ["stream"],
    "Open Server-Sent Events streams in this process, by stream."
  )
  const gauges = {
    queueDepth: gauge(
      "svc_delivery_queue_depth",
      ["kind"],
      "Undelivered deliveries (queued, sending, retrying) in the database, by kind."
    ),
    queueOldestAge: gauge(
      "svc_delivery_queue_oldest_age_seconds",
      ["kind"],
      "Age of the oldest undelivered delivery in the database, by kind (0 when none waits)."
    ),
    targetsCoolingDown: gauge(
      "svc_delivery_targets_cooling_down",
      ["kind"],
      "Delivery targets (webhook endpoints, telemetry destinations) in cooldown now, by kind."
    ),
    endpointsDeactivated: gauge(
      "svc_webhook_endpoints_deactivated",
      [],
      "Webhook endpoints deactivated by a 410 Gone answer and not reactivated since."
    ),
    poolMax: gauge(
      "svc_db_pool_connections_max",
      [],
      "Most database connections this process opens (1 on the embedded database)."
    ),
    connections: gauge(
      "svc_db_connections",
      ["state"],
      "Connections of svc processes to this database by state (active, waiting on a lock, idle in transaction, idle), from pg_stat_activity; PostgreSQL server only."
    )
  }
  // The database work, counted where statements leave the process (`WorkCounts.ts`), read at scrape time.
  const work = (name: string, help: string, read: (counts: WorkCounts) => number) =>
    new Prometheus.Counter({
      name,
      help,
      registers,
      collect() {
        this.reset()
        this.inc(read(workCounts))
      }
    })
  work(
    "svc_db_statements_total",
    "Statements this process's database client ran and the database answered (BEGIN, COMMIT and savepoints included).",
    (counts) => counts.statements
  )
  work(
    "svc_db_transactions_total",
    "Transactions this process committed: each COMMIT, and each statement run outside a transaction.",
    (counts) => counts.transactions
  )
  work(
    "svc_db_rows_written_total",
    "Rows this process's INSERT, UPDATE, DELETE and MERGE statements wrote, as their command tags report (not writes inside a WITH of a SELECT).",
    (counts) => counts.rowsWritten
  )
  // Every known series starts at 0, so a rate() sees its first increase.
  for (const stream of ["session", "approvals"] as const) streams.set({ stream }, 0)
  for (const kind of DELIVERY_KINDS) {
    for (const outcome of ["delivered", "partial", "failed"]) deliveries.inc({ kind, outcome }, 0)
    for (const outcome of Object.values(outcomeLabel)) attempts.inc({ kind, outcome }, 0)
    attemptDuration.zero({ kind })
  }
  for (const pipeline of ["organizations", "operator"] as const) {
    exported.inc({ pipeline }, 0)
    for (const reason of DROP_REASONS[pipeline]) dropped.inc({ pipeline, reason }, 0)
  }
  for (const deadline of ["expiring", "escalate", "expire"] as const) deadlines.inc({ deadline }, 0)

  return {
    registry,
    httpRequest: (method, route, status, seconds) => {
      observeHttp(KNOWN_METHODS.has(method) ? method : OTHER, route ?? OTHER, status, seconds)
    },
    deliveryAttempt: (kind, outcome, durationMs) => {
      const label = outcomeLabel[outcome]
      attempts.inc({ kind, outcome: label })
      attemptDuration.observe({ kind }, Math.max(0, durationMs) / 1000)
      if (outcome !== "Retry") deliveries.inc({ kind, outcome: label })
    },
    spansExported: (pipeline, count) => {
      if (count > 0) exported.inc({ pipeline }, count)
    },
    spansDropped: (pipeline, reason, count) => {
      if (count > 0) dropped.inc({ pipeline, reason }, count)
    },
    pendingSpans: (pipeline, read) => {
      pendingReaders.set(pipeline, read)
    },
    deadlineFired: (kind, lagSeconds) => {
      deadlines.inc({ deadline: kind })
      schedulerLag.observe(Math.max(0, lagSeconds))
    },
    streamOpen: (stream) =>
      Effect.acquireRelease(
        Effect.sync(() => streams.inc({ stream })),
        () => Effect.sync(() => streams.dec({ stream }))
      ),
    gauges
  }
}

/**
 * The same shape, recording nothing: with neither `SVC_METRICS_PORT` nor
 * `SVC_METRICS_TOKEN` nobody can read the metrics, so requests do not pay
 * for them.
 */
export const disabledMetrics = (): MetricsShape => ({
  ...makeMetrics({ processMetrics: false }),
  httpRequest: () => {},
  deliveryAttempt: () => {},
  spansExported: () => {},
  spansDropped: () => {},
  pendingSpans: () => {},
  deadlineFired: () => {},
  streamOpen: () => Effect.void
})

export class Metrics extends Context.Reference<MetricsShape>("svc/observability/Metrics", {
  // Not rendered anywhere: code built without `Metrics.layer` (a service
  // tested alone) records into this private registry.
  defaultValue: () => makeMetrics({ processMetrics: false })
}) {
  /** One registry for the running service, with the standard process metrics; nothing recorded when `/metrics` is off. */
  static readonly layer = Layer.effect(
    Metrics,
    Effect.map(
      SvcConfig,
      (config) =>
        Option.isSome(config.metricsPort) || Option.isSome(config.metricsToken) ? makeMetrics() : disabledMetrics()
    )
  )
}
