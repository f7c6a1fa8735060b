/**
 * Batches cut and gzipped while every send slot of their destination was
 * taken: ~40 bytes a span instead of its text. A send that ends well starts
 * the next (no round, no statement); one that fails leaves them to the next
 * flush round, which finds the destination's batches in the queue and moves
 * these there, sealed, in one statement. They count against
 * `SVC_TELEMETRY_QUEUE_BATCHES` like queued ones, and their spans as being
 * sent.
 */
import { Effect, Option } from "effect"
import { DeliveryQueue } from "../../deliveries/DeliveryQueue.ts"
import { SvcConfig } from "../../platform/Config.ts"
import { SecretBox } from "../../platform/Crypto.ts"
import { SpanBuffers } from "../Buffers.ts"
import type { StoredBody } from "../Collector.ts"
import { batchContext } from "../Destinations.ts"
import { DestinationsRepo } from "../Repository.ts"
import type { QueueView } from "./QueueView.ts"

/** A batch cut and compressed, waiting in memory for a send slot (its spans are counted as sending). */
export interface Ready {
  readonly orgId: string
  readonly body: StoredBody
  readonly spanCount: number
}

export interface ReadyBatches {
  readonly push: (destinationId: string, batch: Ready) => void
  /** The destination's oldest ready batch, taken. */
  readonly shift: (destinationId: string) => Ready | undefined
  readonly count: (destinationId: string) => number
  /**
   * The destination's ready batches become queued deliveries, sealed, in
   * one statement, only while the destination exists (its deletion fails
   * what is queued then; a batch stored just after would outlive it).
   * Answers whether they were stored.
   */
  readonly toQueue: (destinationId: string) => Effect.Effect<boolean>
  /** Drops the batches of destinations that are gone, like their buffers' spans. */
  readonly forgetGone: () => void
  /** The batch as the queue keeps it: sealed for its destination. */
  readonly seal: (destinationId: string, body: StoredBody) => string
}

export const makeReadyBatches = (queueView: QueueView) =>
  Effect.gen(function*() {
    const buffers = yield* SpanBuffers
    const repo = yield* DestinationsRepo
    const queue = yield* DeliveryQueue
    const box = yield* SecretBox
    const { telemetryQueueBatches } = yield* SvcConfig
    const ready = new Map<string, Array<Ready>>()

    const seal = (destinationId: string, body: StoredBody) =>
      box.seal(Buffer.from(body.gzipped).toString("base64"), batchContext(destinationId))

    const batches: ReadyBatches = {
      push: (destinationId, batch) => {
        const waiting = ready.get(destinationId)
        if (waiting === undefined) ready.set(destinationId, [batch])
        else waiting.push(batch)
      },
      shift: (destinationId) => {
        const waiting = ready.get(destinationId)
        const batch = waiting?.shift()
        if (waiting !== undefined && waiting.length === 0) ready.delete(destinationId)
        return batch
      },
      count: (destinationId) => ready.get(destinationId)?.length ?? 0,
      toQueue: (destinationId) =>
        Effect.gen(function*() {
          const waiting = ready.get(destinationId)
          ready.delete(destinationId)
          if (waiting === undefined || waiting.length === 0) return false
          queueView.forget(destinationId)
          const spans = waiting.reduce((sum, batch) => sum + batch.spanCount, 0)
          // A destination deleted here meanwhile gets none: its buffered spans are dropped, and so are these.
          if (!buffers.isActive(destinationId)) {
            buffers.addSending(destinationId, -spans)
            return false
          }
          const stored = yield* repo.whileExists(
            destinationId,
            queue.enqueueAll(waiting.map((batch) => ({
              orgId: batch.orgId,
              kind: "telemetry" as const,
              targetId: destinationId,
              payload: seal(destinationId, batch.body),
              meta: { span_count: batch.spanCount, bytes: batch.body.bytes, round_start: 0 },
              capacity: telemetryQueueBatches
            })))
          ).pipe(Effect.ensuring(Effect.sync(() => buffers.addSending(destinationId, -spans))))
          return Option.isSome(stored)
        }),
      forgetGone: () => {
        for (const [id, waiting] of ready) {
          if (buffers.isActive(id)) continue
          ready.delete(id)
          for (const batch of waiting) buffers.addSending(id, -batch.spanCount)
        }
      },
      seal
    }
    return batches
  })
