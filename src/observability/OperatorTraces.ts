/**
 * The service's own traces, for the person who runs it: when the standard
 * `OTEL_*` variables name a collector (`OtelEnv.ts`), every span the
 * capturing tracer sees (of every organization, of background work, of the
 * database client) that the operator's sampler keeps is exported there.
 *
 * Entirely separate from the organizations' export (`src/telemetry`): the
 * tracer hands each ended span to this pipeline before, and independently
 * of, the organization buffers; nothing here reads or writes those buffers,
 * the delivery queue or the database, and nothing of this pipeline reaches
 * an organization's destination. Its own requests are never traced (that
 * would feed it its own spans).
 *
 * Batching follows OpenTelemetry's batch span processor: a bounded queue
 * (`OTEL_BSP_MAX_QUEUE_SIZE`), exported every `OTEL_BSP_SCHEDULE_DELAY` or
 * as soon as a batch (`OTEL_BSP_MAX_EXPORT_BATCH_SIZE`) is waiting, one
 * export at a time. A full queue drops the span and counts it
 * (`svc_telemetry_spans_dropped_total{pipeline="operator"}`): request
 * handling never waits for export. Spans are encoded when exported, not
 * when they end, so the request path pays for an array push only.
 * 429, 502, 503, 504 and network failures are retried with backoff within
 * `OTEL_BSP_EXPORT_TIMEOUT`; anything else drops the batch (counted). At
 * shutdown what is queued is exported for up to 3 seconds.
 *
 * The same OTLP/HTTP JSON encoding as the organizations' export
 * (`src/otlp/Spans.ts`: no failure messages or stack traces, only
 * `error.type`), with a wider attribute allowlist: the database client's
 * attributes (`db.*`, the SQL text with its placeholders, never its
 * parameters) and the client's address and user agent.
 */
import { Clock, Duration, Effect, Latch, Layer, Schedule, type Tracer } from "effect"
import { randomUUID } from "node:crypto"
import * as tls from "node:tls"
import { gzipSync } from "node:zlib"
import { Agent, request } from "undici"
import { VERSION } from "../api/Version.ts"
import { encodeRequestParts, type KeyValue } from "../otlp/Encoding.ts"
import { sampledByRatio } from "../otlp/Sampling.ts"
import { encodeSpan, isExportedAttribute } from "../otlp/Spans.ts"
import { parseRetryAfter } from "../outbound/RetryAfter.ts"
import { forkSupervised } from "../platform/Supervised.ts"
import { Metrics, type MetricsShape } from "./Metrics.ts"
import { type OperatorSink, OperatorSpans } from "./OperatorSink.ts"
import {
  DEFAULT_CALLER_SAMPLED_PER_SECOND,
  type OperatorSampler,
  type OperatorTraceSettings,
  OtelEnvError,
  parseOtelEnv
} from "./OtelEnv.ts"

/** Attributes the operator's collector gets beside the organizations' allowlist. */
const OPERATOR_ATTRIBUTES: ReadonlySet<string> = new Set([
  "db.system.name",
  "db.namespace",
  "db.operation.name",
  "db.collection.name",
  "db.query.text",
  "db.client.connection.wait_time_ms",
  "client.address",
  "user_agent.original",
  "network.protocol.version"
])

const isOperatorAttribute = (key: string): boolean => isExportedAttribute(key) || OPERATOR_ATTRIBUTES.has(key)

/**
 * The operator's sampler. Parent-based samplers follow a caller's
 * `traceparent` only downwards without limit: an unsampled flag is
 * followed, but a sampled one adds a trace the sampler itself would not
 * keep only while a token bucket of `callerSampledPerSecond` (refilled
 * continuously, holding at most one second's worth) allows. Anyone can
 * send `traceparent` with the sampled flag; followed blindly, a caller
 * could fill the span queue and crowd out the operator's own traces.
 * `now` is a monotonic clock in milliseconds.
 */
export const makeSampler = (
  sampler: OperatorSampler,
  callerSampledPerSecond: number = DEFAULT_CALLER_SAMPLED_PER_SECOND,
  now: () => number = () => performance.now()
): Pick<OperatorSink, "sampleRoot" | "sampleRemote"> => {
  const root = (traceId: string) =>
    sampler.name.endsWith("always_on")
      ? true
      : sampler.name.endsWith("always_off")
      ? false
      : sampledByRatio(traceId, sampler.ratio)
  const burst = Math.max(1, callerSampledPerSecond)
  let tokens = burst
  let filledAt = now()
  const callerMay = () => {
    if (callerSampledPerSecond <= 0) return false
    const at = now()
    tokens = Math.min(burst, tokens + ((at - filledAt) / 1000) * callerSampledPerSecond)
    filledAt = at
    if (tokens < 1) return false
    tokens -= 1
    return true
  }
  return {
    sampleRoot: root,
    // The others decide alone.
    sampleRemote: (parentSampled, traceId) =>
      !sampler.name.startsWith("parentbased_") ? root(traceId) : parentSampled && (root(traceId) || callerMay())
  }
}

const RETRYABLE: ReadonlySet<number> = new Set([429, 502, 503, 504])
const SHUTDOWN_FLUSH = Duration.seconds(3)
const WARN_EVERY_MS = 60_000

/** One export request: `true` when the collector took it, `"retry"` when worth trying again. */
type Sent = { readonly _tag: "ok" } | { readonly _tag: "retry"; readonly error: string; readonly afterMs: number } | {
  readonly _tag: "failed"
  readonly error: string
}

const retryAfterMs = (value: string | Array<string> | undefined, now: number): number =>
  parseRetryAfter(value, now) ?? 0

/** The pipeline: the sink the tracer offers spans to, and the fiber that exports them. */
export const makeOperatorPipeline = (settings: OperatorTraceSettings, metrics: MetricsShape) =>
  Effect.gen(function*() {
    // Read synchronously where the code is (an answer's `Retry-After`, the warning's rate).
    const clock = yield* Clock.Clock
    const queue: Array<Tracer.Span> = []
    const batchReady = Latch.makeUnsafe(false)
    metrics.pendingSpans("operator", () => queue.length)

    const sink: OperatorSink = {
      ...makeSampler(settings.sampler, settings.callerSampledPerSecond),
      offer: (span) => {
        if (queue.length >= settings.maxQueueSize) {
          metrics.spansDropped("operator", "buffer_full", 1)
          return
        }
        queue.push(span)
        if (queue.length >= settings.maxExportBatchSize) batchReady.openUnsafe()
      }
    }

    // Several processes may export to one collector: each names itself
    // (`service.instance.id`), unless the operator did.
    const attributes = settings.resource.some(([key]) => key === "service.instance.id")
      ? settings.resource
      : [...settings.resource, ["service.instance.id", randomUUID()] as const]
    const resource: ReadonlyArray<KeyValue> = attributes.map(([key, value]) => ({ key, value: { stringValue: value } }))
    const parts = encodeRequestParts(resource)
    const headers: Record<string, string> = { "user-agent": `svc/${VERSION}` }
    for (const [name, value] of settings.headers) headers[name] = value
    headers["content-type"] = "application/json"
    if (settings.gzip) headers["content-encoding"] = "gzip"

    const agent = yield* Effect.acquireRelease(
      Effect.sync(() =>
        new Agent({
          // Below the 5 s after which Node's and Apache's servers close an idle
          // connection when they name no keep-alive time: an export sent on a
          // connection being closed is answered with a reset (as in outbound/Pools.ts).
          keepAliveTimeout: 4_000,
          connections: 2,
          ...(settings.ca === undefined
            ? {}
            : { connect: { ca: [...tls.getCACertificates("default"), settings.ca] } })
        })
      ),
      (agent) => Effect.promise(() => agent.close())
    )

    const send = (body: Uint8Array | string) =>
      Effect.tryPromise({
        try: async (signal): Promise<Sent> => {
          const response = await request(settings.url, {
            method: "POST",
            headers,
            body,
            dispatcher: agent,
            signal,
            headersTimeout: settings.timeoutMs,
            bodyTimeout: settings.timeoutMs
          })
          // The answer's body is not needed (a partial success is not retried either way).
          await response.body.dump({ limit: 64 * 1024 })
          const status = response.statusCode
          if (status >= 200 && status < 300) return { _tag: "ok" }
          if (RETRYABLE.has(status)) {
            return {
              _tag: "retry",
              error: `collector answered ${status}`,
              afterMs: retryAfterMs(response.headers["retry-after"], clock.currentTimeMillisUnsafe())
            }
          }
          return { _tag: "failed", error: `collector answered ${status}` }
        },
        // Only an error code: messages may carry the URL or header text.
        catch: (error) => (error as { code?: unknown }).code
      }).pipe(
        Effect.timeout(Duration.millis(settings.timeoutMs)),
        Effect.catch((code): Effect.Effect<Sent> =>
          Effect.succeed({
            _tag: "retry",
            error: `collector unreachable (${typeof code === "string" ? code : "timeout"})`,
            afterMs: 0
          })
        )
      )

    let lastWarning = Number.NEGATIVE_INFINITY
    const warn = (error: string) =>
      Effect.suspend(() => {
        const now = clock.currentTimeMillisUnsafe()
        if (now - lastWarning < WARN_EVERY_MS) return Effect.void
        lastWarning = now
        return Effect.logWarning("operator trace export failed; spans dropped").pipe(Effect.annotateLogs({ error }))
      })

    /** Exports one batch: retries within the export budget, then counts the spans exported or dropped. */
    const exportBatch = (spans: ReadonlyArray<Tracer.Span>) =>
      Effect.gen(function*() {
        const json = `${parts.head}${spans.map((span) => encodeSpan(span, isOperatorAttribute)).join(",")}${parts.tail}`
        const body = settings.gzip ? new Uint8Array(gzipSync(json)) : json
        const deadline = (yield* Clock.currentTimeMillis) + settings.exportTimeoutMs
        for (let attempt = 1;; attempt++) {
          const sent = yield* send(body)
          if (sent._tag === "ok") {
            metrics.spansExported("operator", spans.length)
            return
          }
          const waitMs = sent._tag === "retry" ? Math.max(sent.afterMs, 1000 * 2 ** (attempt - 1)) : 0
          if (sent._tag === "failed" || (yield* Clock.currentTimeMillis) + waitMs + settings.timeoutMs > deadline) {
            metrics.spansDropped("operator", "export_failed", spans.length)
            yield* warn(sent.error)
            return
          }
          yield* Effect.sleep(Duration.millis(waitMs))
        }
      })

    const drain = Effect.gen(function*() {
      // Only what is queued now; spans that end meanwhile wait for the next round.
      let left = queue.length
      while (left > 0) {
        const batch = queue.splice(0, Math.min(settings.maxExportBatchSize, left))
        left -= batch.length
        yield* exportBatch(batch)
      }
    })

    yield* forkSupervised({
      name: "operator trace export",
      round: Effect.sync(() => batchReady.closeUnsafe()).pipe(
        Effect.andThen(drain),
        Effect.andThen(batchReady.await.pipe(Effect.timeoutOption(Duration.millis(settings.scheduleDelayMs))))
      ),
      retry: Schedule.spaced(Duration.millis(settings.scheduleDelayMs))
    })
    yield* Effect.addFinalizer(() =>
      drain.pipe(
        Effect.timeout(SHUTDOWN_FLUSH),
        Effect.catchCause(() => Effect.logWarning("operator trace export at shutdown did not finish")),
        Effect.withTracerEnabled(false)
      )
    )
    return sink
  }).pipe(
    // Its own exports are never traced: they would feed the pipeline its own spans.
    Effect.withTracerEnabled(false)
  )

/**
 * `OperatorSpans` from the process environment: the pipeline when the
 * `OTEL_*` variables turn it on, else nothing. A variable it cannot honour
 * stops the start with a message naming it.
 */
export const OperatorTracesLive = Layer.effect(
  OperatorSpans,
  Effect.gen(function*() {
    const settings = yield* Effect.try({
      try: () => parseOtelEnv(process.env),
      catch: (error) => error instanceof OtelEnvError ? error : new OtelEnvError(String(error))
    })
    if (settings === undefined) return undefined
    const metrics = yield* Metrics
    const sink = yield* makeOperatorPipeline(settings, metrics)
    yield* Effect.logInfo("svc exports its own traces").pipe(Effect.annotateLogs({
      sampler: settings.sampler.name,
      ...(settings.sampler.name.endsWith("traceidratio") ? { sampler_ratio: settings.sampler.ratio } : {})
    }))
    return sink
  })
)
