/**
 * The per-process span buffers of an organization's telemetry export: one
 * per active destination, bounded (a full buffer drops the span and counts
 * it as `dropped_spans`). A buffer is a best-effort cache (spans are best
 * effort by spec); a batch becomes a durable delivery only when
 * `TelemetryExport` flushes it.
 */
import { Context, Effect, Latch, Layer } from "effect"
import { Metrics, type MetricsShape } from "../observability/Metrics.ts"
import { SvcConfig } from "../platform/Config.ts"

/** Spans per export batch (the OTLP exporters' usual maximum). */
export const BATCH_SPANS = 512

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
