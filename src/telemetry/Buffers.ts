/**
 * The per-process span buffers of an organization's telemetry export: one
 * per active destination, bounded (a full buffer drops the span and counts
 * it as `dropped_spans`). A buffer is a best-effort cache (spans are best
 * effort by spec); a batch becomes a durable delivery only when
 * `TelemetryExport` flushes it.
 */
import { Context, Duration, Effect, Latch, Layer } from "effect"
import { Metrics, type MetricsShape } from "../observability/Metrics.ts"
import { encodeRequestParts, serviceResource } from "../otlp/Encoding.ts"
import { SvcConfig } from "../platform/Config.ts"

/** Spans per export batch (the OTLP exporters' usual maximum). */
export const BATCH_SPANS = 512
/** A flush round runs at least this often by default (`SVC_TELEMETRY_FLUSH_INTERVAL`, see `TelemetryExport`); sooner when a batch is full. */
export const FLUSH_EVERY = Duration.seconds(2)

/** What surrounds a batch's spans in its request body (see `encodeRequestParts`). */
export interface BatchFraming {
  readonly head: string
  readonly tail: string
}

/** svc's export request: one resource (`service.name` = `svc`), one scope. */
export const exportFraming: BatchFraming = encodeRequestParts(serviceResource())

/** A batch taken out of a buffer: its request body, whole, in a buffer `release` gives back for reuse. */
export interface SpanBatch {
  /** The OTLP/JSON request body (head, the spans joined by commas, tail). */
  readonly body: Uint8Array
  readonly spans: number
  /** Gives the bytes back to be written over by a later batch: call it once `body` is no longer read. */
  readonly release: () => void
}

/**
 * A batch being written: the request body's head, then each span's text as
 * it is captured, comma-separated. Closed when it holds `BATCH_SPANS` spans
 * or a flush round cuts it; spans captured after go to a new one.
 */
interface Chunk {
  bytes: globalThis.Buffer
  end: number
  count: number
  closed: boolean
}

interface Buffer {
  readonly destinationId: string
  readonly orgId: string
  /** Oldest first; only the last may be open. */
  chunks: Array<Chunk>
  /** Spans in `chunks`. */
  size: number
  /** When a round last cut a batch here (epoch ms, from `Clock`). */
  lastCut: number | undefined
  /** Bytes the last batch closed here took: where the next one starts. */
  lastBytes: number
  /** Dropped since the destination became active here, not yet added to its row. */
  unsavedDropped: number
}

export interface BufferState {
  readonly destinationId: string
  readonly orgId: string
  readonly size: number
}

/** Smallest first size of a batch's bytes (they double as spans arrive); a buffer given back is reused instead. */
const FIRST_CHUNK_BYTES = 4096
/** Buffers given back and kept for the next batches (each is about a full batch's size). */
const MAX_SPARES = 2

/**
 * The per-process buffers, one per active destination. Synchronous on
 * purpose: `offer` runs inside `Span.end` on the request fiber.
 */
export class SpanBuffers extends Context.Service<SpanBuffers, {
  /** Whether spans of `orgId` are wanted at all (it has a destination). */
  readonly wants: (orgId: string) => boolean
  /** Whether any organization's spans are wanted (any destination is active in this process). */
  readonly exporting: () => boolean
  /** Adds a span (its OTLP/JSON text) to the organization's buffer, or drops and counts it when full. */
  readonly offer: (orgId: string, span: string) => void
  /** Starts buffering for a destination (idempotent). */
  readonly activate: (orgId: string, destinationId: string) => void
  /** Stops buffering for the organization and drops what it buffered. */
  readonly deactivate: (orgId: string) => void
  /** Makes the active set exactly `active` (the database's view). */
  readonly sync: (active: ReadonlyArray<{ readonly orgId: string; readonly destinationId: string }>) => void
  /**
   * Closes the destination's batches for a flush round and answers how many
   * `take` may remove: the full ones, and the one being filled (spans
   * captured from now on start a new one), except in a round started by a
   * full batch (`"full"`) less than the flush interval after the last cut: under
   * steady traffic such a round would cut a full batch and a small one each
   * time, twice the requests to the collector and records in the database;
   * the small one's spans join the next batch instead.
   */
  readonly cut: (destinationId: string, round: "full" | "period", now: number) => number
  /** Removes the destination's oldest closed batch, if any. */
  readonly take: (destinationId: string) => SpanBatch | undefined
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
  /**
   * `capacity`: spans held per destination before overflow drops them;
   * `metrics` counts the drops; `flushEvery`: the flush rounds' period.
   */
  static readonly make = (
    capacity: number,
    metrics?: MetricsShape,
    flushEvery: Duration.Duration = FLUSH_EVERY,
    framing: BatchFraming = exportFraming
  ): SpanBuffers["Service"] => {
    const flushEveryMs = Duration.toMillis(flushEvery)
    const byOrg = new Map<string, Buffer>()
    const byDestination = new Map<string, Buffer>()
    const inFlight = new Map<string, number>()
    const batchReady = Latch.makeUnsafe(false)
    const head = globalThis.Buffer.from(framing.head, "utf8")
    const tail = globalThis.Buffer.from(framing.tail, "utf8")

    // Each span is written into its batch's bytes as it is captured (a
    // string of a few hundred bytes that dies young), so a batch is ready
    // to compress when it closes: a flush copies nothing, and no span
    // outlives its request as a string on the heap.
    const spares: Array<globalThis.Buffer> = []
    const giveBack = (bytes: globalThis.Buffer) => {
      if (spares.length < MAX_SPARES) spares.push(bytes)
      else {
        // The largest are kept: a busy destination's batch then never grows.
        const smallest = spares.reduce((at, spare, i) => spare.length < spares[at]!.length ? i : at, 0)
        if (spares[smallest]!.length < bytes.length) spares[smallest] = bytes
      }
    }
    /** A batch's bytes: a buffer given back, or one the size the destination's last batch took. */
    const newChunk = (sizeHint: number): Chunk => {
      const spare = spares.findIndex((bytes) => bytes.length >= sizeHint)
      const bytes = spare >= 0 ? spares.splice(spare, 1)[0]! : globalThis.Buffer.allocUnsafeSlow(sizeHint)
      return { bytes, end: head.copy(bytes, 0), count: 0, closed: false }
    }
    /** Room for `needed` more bytes and the tail. */
    const reserve = (chunk: Chunk, needed: number) => {
      const size = chunk.end + needed + tail.length
      if (size <= chunk.bytes.length) return
      const grown = globalThis.Buffer.allocUnsafeSlow(Math.max(size, chunk.bytes.length * 2))
      chunk.bytes.copy(grown, 0, 0, chunk.end)
      chunk.bytes = grown
    }
    const close = (buffer: Buffer, chunk: Chunk) => {
      chunk.closed = true
      // With an eighth more: a batch of slightly larger spans does not grow (twice the size) at its very end.
      buffer.lastBytes = Math.max(FIRST_CHUNK_BYTES, Math.ceil((chunk.end + tail.length) * 1.125))
      if (chunk.count === BATCH_SPANS) batchReady.openUnsafe()
    }
    const write = (buffer: Buffer, span: string) => {
      let chunk = buffer.chunks.at(-1)
      if (chunk === undefined || chunk.closed) {
        chunk = newChunk(buffer.lastBytes)
        buffer.chunks.push(chunk)
      }
      // UTF-8 takes at most 3 bytes per UTF-16 unit; counted exactly only near the end.
      if (chunk.end + 1 + span.length * 3 + tail.length > chunk.bytes.length) {
        reserve(chunk, 1 + globalThis.Buffer.byteLength(span, "utf8"))
      }
      if (chunk.count > 0) chunk.bytes[chunk.end++] = 0x2c
      chunk.end += chunk.bytes.write(span, chunk.end, "utf8")
      chunk.count += 1
      buffer.size += 1
      if (chunk.count === BATCH_SPANS) close(buffer, chunk)
    }

    const activate = (orgId: string, destinationId: string) => {
      const current = byOrg.get(orgId)
      if (current?.destinationId === destinationId) return
      if (current !== undefined) byDestination.delete(current.destinationId)
      const buffer: Buffer = {
        destinationId,
        orgId,
        chunks: [],
        size: 0,
        lastCut: undefined,
        lastBytes: FIRST_CHUNK_BYTES,
        unsavedDropped: 0
      }
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
      exporting: () => byOrg.size > 0,
      offer: (orgId, span) => {
        const buffer = byOrg.get(orgId)
        if (buffer === undefined) return
        if (buffer.size >= capacity) {
          buffer.unsavedDropped += 1
          metrics?.spansDropped("organizations", "buffer_full", 1)
          return
        }
        write(buffer, span)
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
      cut: (destinationId, round, now) => {
        const buffer = byDestination.get(destinationId)
        if (buffer === undefined) return 0
        const fullOnly = round === "full" && buffer.lastCut !== undefined &&
          now - buffer.lastCut < flushEveryMs
        const last = buffer.chunks.at(-1)
        if (!fullOnly && last !== undefined && last.count > 0 && !last.closed) close(buffer, last)
        let closed = 0
        for (const chunk of buffer.chunks) if (chunk.closed) closed += 1
        if (closed > 0) buffer.lastCut = now
        return closed
      },
      take: (destinationId) => {
        const buffer = byDestination.get(destinationId)
        const chunk = buffer?.chunks[0]
        if (buffer === undefined || chunk === undefined || !chunk.closed) return undefined
        buffer.chunks.shift()
        buffer.size -= chunk.count
        const length = chunk.end + tail.copy(chunk.bytes, chunk.end)
        let released = false
        return {
          body: chunk.bytes.subarray(0, length),
          spans: chunk.count,
          release: () => {
            if (released) return
            released = true
            giveBack(chunk.bytes)
          }
        }
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
      size: (destinationId) => byDestination.get(destinationId)?.size ?? 0,
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
          size: buffer.size
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
      const buffers = SpanBuffers.make(config.telemetryBufferSpans, metrics, config.telemetryFlushInterval)
      metrics.pendingSpans("organizations", () => {
        let pending = 0
        for (const state of buffers.states()) pending += state.size
        return pending
      })
      return buffers
    })
  )
}
