/**
 * Span capture: a `Tracer` that wraps Effect's native spans and, when a
 * span ends, hands it to the in-memory buffer of its organization's
 * destination.
 *
 * - A span belongs to an organization when it, or a span of its local parent
 *   chain, carries `svc.org_id` (the auth middleware annotates the request
 *   span; background work annotates its per-item span). A span that ends
 *   before any ancestor knows its organization (e.g. the key lookup inside
 *   the request) is handed to its parent and decided when the parent ends.
 * - Sampling is parent-based trace-id-ratio: a root span is kept when the
 *   low 56 bits of its trace id reach the rejection threshold
 *   (1 - `SVC_TELEMETRY_SAMPLE_RATIO`) * 2^56; children follow their parent
 *   (a remote one included: a caller's sampled flag is honoured).
 * - Spans of svc's own infrastructure (database client spans) are never
 *   exported.
 * - Attributes pass an allowlist: the semantic-convention names below and
 *   `svc.*` (never names that look like credentials). Failure messages and
 *   stack traces are never exported, only `error.type`.
 * - A captured span is kept as its OTLP/JSON text (compact, and a batch is
 *   then a string join).
 * - The buffer is bounded per destination: a full buffer drops the span and
 *   counts it (`dropped_spans`). Nothing here waits, allocates much or
 *   touches the database: the request path only pays for a map lookup, and
 *   for the conversion of spans whose organization exports.
 *
 * The buffer is a best-effort per-process cache (spans are best effort by
 * spec); a batch becomes a durable delivery only when `TelemetryExport`
 * flushes it.
 */
import { Cause, Context, Effect, Exit, Latch, Layer, Option, Tracer } from "effect"
import { Metrics, type MetricsShape } from "../observability/Metrics.ts"
import { type OperatorSink, OperatorSpans } from "../observability/OperatorSink.ts"
import { SvcConfig } from "../platform/Config.ts"
import { randomTraceId } from "../platform/Crypto.ts"
import { attributeValue, type KeyValue, type OtlpSpan, SpanKind, StatusCode } from "./Otlp.ts"

/** Spans per export batch (the OTLP exporters' usual maximum). */
export const BATCH_SPANS = 512
/** Children a span holds for its parent to decide (spans that ended before their organization was known). */
const MAX_DEFERRED = 64

/** Semantic-convention attributes we export, beside `svc.*`. */
export const allowedAttributes: ReadonlySet<string> = new Set([
  "http.request.method",
  "http.response.status_code",
  "http.route",
  "url.path",
  "url.scheme",
  "server.address",
  "server.port",
  "error.type"
])

const SENSITIVE = /authorization|secret|password|passwd|api[-_]?key|token|cookie|credential|signature|header|payload|body/i

export const isExportedAttribute = (key: string): boolean =>
  allowedAttributes.has(key) || (key.startsWith("svc.") && !SENSITIVE.test(key))

// ---------------------------------------------------------------------------
// Buffers

interface Buffer {
  readonly destinationId: string
  readonly orgId: string
  /** Each span already encoded as its OTLP/JSON text: a few hundred bytes instead of a tree of objects. */
  spans: Array<string>
  /** Dropped since the destination became active here, not yet added to its row. */
  unsavedDropped: number
}

export interface BufferState {
  readonly destinationId: string
  readonly orgId: string
  readonly size: number
}

/**
 * The per-process buffers, one per active destination. Synchronous on
 * purpose: `offer` runs inside `Span.end` on the request fiber.
 */
export class SpanBuffers extends Context.Service<SpanBuffers, {
  /** Whether spans of `orgId` are wanted at all (it has a destination). */
  readonly wants: (orgId: string) => boolean
  /** Adds a span to the organization's buffer, or drops and counts it when full. */
  readonly offer: (orgId: string, span: string) => void
  /** Starts buffering for a destination (idempotent). */
  readonly activate: (orgId: string, destinationId: string) => void
  /** Stops buffering for the organization and drops what it buffered. */
  readonly deactivate: (orgId: string) => void
  /** Makes the active set exactly `active` (the database's view). */
  readonly sync: (active: ReadonlyArray<{ readonly orgId: string; readonly destinationId: string }>) => void
  /** Removes and returns up to `max` spans of the destination, oldest first. */
  readonly take: (destinationId: string, max: number) => ReadonlyArray<string>
  /** Returns and resets the drops not yet saved. */
  readonly takeDropped: (destinationId: string) => number
  /** Adds drops decided elsewhere (e.g. a full delivery queue). */
  readonly addDropped: (destinationId: string, count: number) => void
  readonly size: (destinationId: string) => number
  /** Spans of the destination taken out in batches that this process is sending from memory (not yet recorded). */
  readonly sending: (destinationId: string) => number
  /** A batch of `count` spans starts (positive) or stops (negative) being sent from memory. */
  readonly addSending: (destinationId: string, count: number) => void
  /** Whether this process buffers for the destination (false once it learnt of a delete). */
  readonly isActive: (destinationId: string) => boolean
  /** Drops counted here and not yet saved. */
  readonly unsavedDropped: (destinationId: string) => number
  readonly states: () => ReadonlyArray<BufferState>
  /** Opens when some buffer holds a full batch. */
  readonly batchReady: Latch.Latch
}>()("svc/telemetry/SpanBuffers") {
  /** `capacity`: spans held per destination before overflow drops them; `metrics` counts the drops. */
  static readonly make = (capacity: number, metrics?: MetricsShape): SpanBuffers["Service"] => {
    const byOrg = new Map<string, Buffer>()
    const byDestination = new Map<string, Buffer>()
    const inFlight = new Map<string, number>()
    const batchReady = Latch.makeUnsafe(false)

    const activate = (orgId: string, destinationId: string) => {
      const current = byOrg.get(orgId)
      if (current?.destinationId === destinationId) return
      if (current !== undefined) byDestination.delete(current.destinationId)
      const buffer: Buffer = { destinationId, orgId, spans: [], unsavedDropped: 0 }
      byOrg.set(orgId, buffer)
      byDestination.set(destinationId, buffer)
    }
    const deactivate = (orgId: string) => {
      const current = byOrg.get(orgId)
      if (current === undefined) return
      byOrg.delete(orgId)
      byDestination.delete(current.destinationId)
    }
    return SpanBuffers.of({
      wants: (orgId) => byOrg.has(orgId),
      offer: (orgId, span) => {
        const buffer = byOrg.get(orgId)
        if (buffer === undefined) return
        if (buffer.spans.length >= capacity) {
          buffer.unsavedDropped += 1
          metrics?.spansDropped("organizations", "buffer_full", 1)
          return
        }
        buffer.spans.push(span)
        if (buffer.spans.length === BATCH_SPANS) batchReady.openUnsafe()
      },
      activate,
      deactivate,
      sync: (active) => {
        const keep = new Set<string>()
        for (const { orgId, destinationId } of active) {
          keep.add(orgId)
          activate(orgId, destinationId)
        }
        for (const orgId of [...byOrg.keys()]) if (!keep.has(orgId)) deactivate(orgId)
      },
      take: (destinationId, max) => {
        const buffer = byDestination.get(destinationId)
        if (buffer === undefined || buffer.spans.length === 0) return []
        if (buffer.spans.length <= max) {
          const all = buffer.spans
          buffer.spans = []
          return all
        }
        return buffer.spans.splice(0, max)
      },
      takeDropped: (destinationId) => {
        const buffer = byDestination.get(destinationId)
        if (buffer === undefined) return 0
        const count = buffer.unsavedDropped
        buffer.unsavedDropped = 0
        return count
      },
      addDropped: (destinationId, count) => {
        const buffer = byDestination.get(destinationId)
        if (buffer !== undefined) buffer.unsavedDropped += count
        metrics?.spansDropped("organizations", "queue_full", count)
      },
      size: (destinationId) => byDestination.get(destinationId)?.spans.length ?? 0,
      sending: (destinationId) => inFlight.get(destinationId) ?? 0,
      addSending: (destinationId, count) => {
        const now = (inFlight.get(destinationId) ?? 0) + count
        if (now <= 0) inFlight.delete(destinationId)
        else inFlight.set(destinationId, now)
      },
      isActive: (destinationId) => byDestination.has(destinationId),
      unsavedDropped: (destinationId) => byDestination.get(destinationId)?.unsavedDropped ?? 0,
      states: () =>
        [...byDestination.values()].map((buffer) => ({
          destinationId: buffer.destinationId,
          orgId: buffer.orgId,
          size: buffer.spans.length
        })),
      batchReady
    })
  }

  /** Capacity from `SVC_TELEMETRY_BUFFER_SPANS`. */
  static readonly layer = Layer.effect(
    SpanBuffers,
    Effect.gen(function*() {
      const config = yield* SvcConfig
      const metrics = yield* Metrics
      const buffers = SpanBuffers.make(config.telemetryBufferSpans, metrics)
      metrics.pendingSpans("organizations", () => {
        let pending = 0
        for (const state of buffers.states()) pending += state.size
        return pending
      })
      return buffers
    })
  )
}

// ---------------------------------------------------------------------------
// Sampling

const TWO_TO_56 = 2 ** 56
const TWO_TO_28 = 2 ** 28

/**
 * Trace-id-ratio decision on the low 56 bits of the trace id (the W3C
 * random part), as OpenTelemetry's consistent probability sampling defines
 * it: keep when the randomness R >= the rejection threshold
 * T = (1 - ratio) * 2^56. The same rule in a collector's probabilistic
 * sampler then keeps every trace we kept at a lower ratio (keeping
 * R < ratio * 2^56 instead would be the complementary set: a collector
 * sampling at 50% would drop every trace we sampled at 10%).
 */
export const sampledByRatio = (traceId: string, ratio: number): boolean => {
  if (ratio >= 1) return true
  if (ratio <= 0) return false
  // Compared exactly in two 28-bit halves (a 56-bit integer does not fit a double).
  const threshold = Math.round((1 - ratio) * TWO_TO_56)
  const thresholdHigh = Math.floor(threshold / TWO_TO_28)
  const thresholdLow = threshold - thresholdHigh * TWO_TO_28
  const high = Number.parseInt(traceId.slice(-14, -7), 16)
  const low = Number.parseInt(traceId.slice(-7), 16)
  return high > thresholdHigh || (high === thresholdHigh && low >= thresholdLow)
}

// ---------------------------------------------------------------------------
// Spans

const orgOf = (span: Tracer.AnySpan): string | undefined => {
  let current: Tracer.AnySpan | undefined = span
  while (current !== undefined && current._tag === "Span") {
    const attributes = current instanceof CapturedSpan
      ? current.ownAttributes
      : current instanceof Tracer.NativeSpan
      ? current._attributes
      : current.attributes
    const org = attributes?.get("svc.org_id")
    if (typeof org === "string") return org
    current = Option.getOrUndefined(current.parent)
  }
  return undefined
}

const errorType = (exit: Exit.Exit<unknown, unknown>): string | undefined => {
  if (Exit.isSuccess(exit) || Cause.hasInterruptsOnly(exit.cause)) return undefined
  for (const reason of exit.cause.reasons) {
    const value = reason._tag === "Fail" ? reason.error : reason._tag === "Die" ? reason.defect : undefined
    if (typeof value === "object" && value !== null) {
      if ("_tag" in value && typeof value._tag === "string") return value._tag
      if (value instanceof Error) return value.name
    }
    if (reason._tag === "Die") return "defect"
  }
  return "_OTHER"
}

/** The OTLP form of an ended span: allowlisted attributes, `error.type`, never messages. */
export const toOtlpSpan = (span: Tracer.Span, isExported: (key: string) => boolean = isExportedAttribute): OtlpSpan => {
  const status = span.status as Extract<Tracer.SpanStatus, { _tag: "Ended" }>
  const attributes: Array<KeyValue> = []
  let dropped = 0
  let httpStatus: number | undefined
  let hasErrorType = false
  const source = span instanceof CapturedSpan ? span.ownAttributes : span.attributes
  if (source !== undefined) {
    for (const [key, raw] of source) {
      if (!isExported(key)) {
        dropped += 1
        continue
      }
      const value = attributeValue(raw)
      if (value === undefined) {
        dropped += 1
        continue
      }
      if (key === "http.response.status_code" && typeof raw === "number") httpStatus = raw
      if (key === "error.type") hasErrorType = true
      attributes.push({ key, value })
    }
  }
  let failure = errorType(status.exit)
  // Semantic conventions: a server span fails on 5xx only; its error.type is the status code.
  if (span.kind === "server" && httpStatus !== undefined) {
    failure = httpStatus >= 500 ? String(httpStatus) : undefined
  }
  if (failure !== undefined && !hasErrorType) attributes.push({ key: "error.type", value: { stringValue: failure } })
  const parent = Option.getOrUndefined(span.parent)
  const links = span.links.length === 0
    ? undefined
    : span.links.map((link) => ({ traceId: link.span.traceId, spanId: link.span.spanId, attributes: [] }))
  return {
    traceId: span.traceId,
    spanId: span.spanId,
    ...(parent === undefined ? {} : { parentSpanId: parent.spanId }),
    name: span.name,
    kind: SpanKind[span.kind],
    startTimeUnixNano: status.startTime.toString(),
    endTimeUnixNano: status.endTime.toString(),
    attributes,
    ...(dropped > 0 ? { droppedAttributesCount: dropped } : {}),
    ...(links === undefined ? {} : { links }),
    status: failure === undefined ? { code: StatusCode.Unset } : { code: StatusCode.Error, message: failure }
  }
}

/**
 * A span of the tracer installed beneath ours (Effect's native one unless
 * the deployment or a test installed another), plus capture on end. Every
 * call goes to the inner span; only `sampled` is ours, so the ratio can
 * leave a trace out of export without the inner tracer knowing.
 */
class CapturedSpan implements Tracer.Span {
  readonly _tag = "Span"
  deferred: Array<CapturedSpan> | undefined = undefined
  readonly inner: Tracer.Span
  /** Kept by either pipeline: Effect records attributes (and samples children) only when this holds. */
  readonly sampled: boolean
  /** Kept for its organization's export (`SVC_TELEMETRY_SAMPLE_RATIO`). */
  readonly orgSampled: boolean
  /** Kept for the operator's collector (`OTEL_TRACES_SAMPLER`). */
  readonly operatorSampled: boolean
  readonly onEnd: (span: CapturedSpan) => void
  constructor(inner: Tracer.Span, orgSampled: boolean, operatorSampled: boolean, onEnd: (span: CapturedSpan) => void) {
    this.inner = inner
    this.orgSampled = orgSampled
    this.operatorSampled = operatorSampled
    this.sampled = orgSampled || operatorSampled
    this.onEnd = onEnd
  }
  get name() {
    return this.inner.name
  }
  get spanId() {
    return this.inner.spanId
  }
  get traceId() {
    return this.inner.traceId
  }
  get parent() {
    return this.inner.parent
  }
  get annotations() {
    return this.inner.annotations
  }
  get status() {
    return this.inner.status
  }
  get attributes() {
    return this.inner.attributes
  }
  get links() {
    return this.inner.links
  }
  get kind() {
    return this.inner.kind
  }
  /** The attribute map when it exists, without creating one. */
  get ownAttributes(): ReadonlyMap<string, unknown> | undefined {
    return this.inner instanceof Tracer.NativeSpan ? this.inner._attributes : this.inner.attributes
  }
  end(endTime: bigint, exit: Exit.Exit<unknown, unknown>): void {
    if (this.inner.status._tag === "Ended") return
    this.inner.end(endTime, exit)
    this.onEnd(this)
  }
  attribute(key: string, value: unknown): void {
    this.inner.attribute(key, value)
  }
  event(name: string, startTime: bigint, attributes?: Record<string, unknown>): void {
    this.inner.event(name, startTime, attributes)
  }
  addLinks(links: ReadonlyArray<Tracer.SpanLink>): void {
    this.inner.addLinks(links)
  }
}

/**
 * The tracer: the `inner` tracer's spans plus capture on end. `ratio` is
 * the sample ratio; `buffers` receives the spans. `operator`, when the
 * service exports its own traces, gets every span its own sampler keeps,
 * before and apart from the organizations' filtering.
 */
export const makeTracer = (
  buffers: SpanBuffers["Service"],
  ratio: number,
  inner: Tracer.Tracer = Tracer.nativeTracer,
  operator?: OperatorSink | undefined
): Tracer.Tracer => {
  const route = (orgId: string, span: CapturedSpan) => {
    buffers.offer(orgId, JSON.stringify(toOtlpSpan(span)))
    if (span.deferred !== undefined) {
      for (const child of span.deferred) buffers.offer(orgId, JSON.stringify(toOtlpSpan(child)))
      span.deferred = undefined
    }
  }
  const onEnd = (span: CapturedSpan) => {
    // The operator's pipeline sees the span first and whole; what follows
    // (organizations' filtering) never affects it.
    if (span.operatorSampled) operator?.offer(span)
    // Database client spans describe svc's own infrastructure (its database
    // host and name, statements), not the organization's work: never
    // exported. They are also half of all spans.
    if (!span.orgSampled || span.ownAttributes?.has("db.system.name") === true) return
    const orgId = orgOf(span)
    if (orgId !== undefined) {
      if (buffers.wants(orgId)) route(orgId, span)
      else span.deferred = undefined
      return
    }
    // Not known yet: let the parent decide when it ends (it, or one of its
    // ancestors, may learn the organization later).
    const parent = Option.getOrUndefined(span.parent)
    if (parent instanceof CapturedSpan && parent.status._tag === "Started") {
      const deferred = (parent.deferred ??= [])
      if (deferred.length < MAX_DEFERRED) deferred.push(span)
      if (span.deferred !== undefined) {
        for (const child of span.deferred) if (deferred.length < MAX_DEFERRED) deferred.push(child)
      }
    }
    span.deferred = undefined
  }
  return Tracer.make({
    span: (options) => {
      const created = inner.span(options)
      if (Option.isNone(options.parent)) {
        // A new trace: a random trace id from the system's CSPRNG (it becomes
        // e.g. a logged run's trace_id), and the ratio decides.
        if (created instanceof Tracer.NativeSpan && created._traceId === undefined) created._traceId = randomTraceId()
        return new CapturedSpan(
          created,
          options.sampled && sampledByRatio(created.traceId, ratio),
          operator !== undefined && options.sampled && operator.sampleRoot(created.traceId),
          onEnd
        )
      }
      // Parent-based: a local or remote parent's decision is inherited (Effect
      // already passes `sampled: false` under an unsampled parent). A local
      // parent carries each pipeline's decision; `sampled` is their union.
      const parent = options.parent.value
      if (parent instanceof CapturedSpan) {
        return new CapturedSpan(created, options.sampled && parent.orgSampled, options.sampled && parent.operatorSampled, onEnd)
      }
      return new CapturedSpan(
        created,
        options.sampled,
        operator !== undefined && operator.sampleRemote(parent.sampled, created.traceId),
        onEnd
      )
    },
    ...(inner.context === undefined ? {} : { context: inner.context })
  })
}

/**
 * Installs the capturing tracer for everything built on top of this layer,
 * wrapping the tracer installed beneath it (Effect's native one by default).
 */
export const TracerLive = Layer.effect(
  Tracer.Tracer,
  Effect.gen(function*() {
    const config = yield* SvcConfig
    const buffers = yield* SpanBuffers
    const inner = yield* Effect.tracer
    const operator = yield* OperatorSpans
    return makeTracer(buffers, config.telemetrySampleRatio, inner, operator)
  })
)
