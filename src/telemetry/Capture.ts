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
 *   (a remote one included: a caller's sampled flag is honoured). While no
 *   organization of the process has a destination, the organizations'
 *   pipeline keeps nothing, so a new trace is left unsampled for it from
 *   the start (the server then skips the request span's URL and header
 *   attributes, which only an export would read); the operator's pipeline
 *   decides on its own.
 * - Spans of svc's own infrastructure (database client spans) are never
 *   exported.
 * - Attributes pass an allowlist: the semantic-convention names below and
 *   `svc.*` (never names that look like credentials). Failure messages and
 *   stack traces are never exported, only `error.type`.
 * - A captured span is written as its OTLP/JSON text (`encodeSpan`) into
 *   the request body of its batch (`SpanBuffers`): a batch is ready to
 *   compress when it closes.
 * - The buffer is bounded per destination: a full buffer drops the span and
 *   counts it (`dropped_spans`). Nothing here waits, allocates much or
 *   touches the database: the request path only pays for a map lookup, and
 *   for the conversion of spans whose organization exports.
 *
 * The buffer is a best-effort per-process cache (spans are best effort by
 * spec); a batch becomes a durable delivery only when `TelemetryExport`
 * flushes it.
 */
import { Effect, type Exit, Layer, Option, Tracer } from "effect"
import { type OperatorSink, OperatorSpans } from "../observability/OperatorSink.ts"
import { sampledByRatio } from "../otlp/Sampling.ts"
import { encodeSpan } from "../otlp/Spans.ts"
import { SvcConfig } from "../platform/Config.ts"
import { randomTraceId } from "../platform/Crypto.ts"
import { SpanBuffers } from "./Buffers.ts"

/** Children a span holds for its parent to decide (spans that ended before their organization was known). */
const MAX_DEFERRED = 64

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
    buffers.offer(orgId, encodeSpan(span))
    if (span.deferred !== undefined) {
      for (const child of span.deferred) buffers.offer(orgId, encodeSpan(child))
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
          options.sampled && buffers.exporting() && sampledByRatio(created.traceId, ratio),
          operator !== undefined && options.sampled && operator.sampleRoot(created.traceId),
          onEnd
        )
      }
      // Parent-based: a local or remote parent's decision is inherited (Effect
      // already passes `sampled: false` under an unsampled parent). A local
      // parent carries each pipeline's decision; `sampled` is their union.
      const parent = options.parent.value
      if (parent instanceof CapturedSpan) {
        return new CapturedSpan(
          created,
          options.sampled && parent.orgSampled,
          options.sampled && parent.operatorSampled,
          onEnd
        )
      }
      return new CapturedSpan(
        created,
        options.sampled && buffers.exporting(),
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
