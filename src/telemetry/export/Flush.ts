/**
 * The flush: at least every `SVC_TELEMETRY_FLUSH_INTERVAL` (at once when a buffer holds a
 * full batch) each buffer becomes batches of at most 512 spans, gzipped,
 * sent from memory while nothing of the destination waits in the queue and
 * a slot is free (`MemorySender`); otherwise, and at shutdown, stored in the
 * queue as `telemetry` deliveries. When the destination already has
 * `SVC_TELEMETRY_QUEUE_BATCHES` undelivered batches (a collector that is
 * down or hangs), the spans are dropped and counted instead.
 */
import { Clock, Duration, Effect, Option } from "effect"
import { DeliveryQueue } from "../../deliveries/DeliveryQueue.ts"
import type { OutboundHttp } from "../../outbound/OutboundHttp.ts"
import { SvcConfig } from "../../platform/Config.ts"
import { SpanBuffers } from "../Buffers.ts"
import { type CollectorTarget, compressBatch } from "../Collector.ts"
import { DestinationsRepo } from "../Repository.ts"
import type { MemorySender } from "./MemorySender.ts"
import type { QueueView } from "./QueueView.ts"
import type { ReadyBatches } from "./ReadyBatches.ts"
import type { Targets } from "./Targets.ts"

/** What started a flush round: a buffer's batch filling up, or the period. */
type Round = "full" | "period"

export interface Flush {
  /**
   * One round over every buffer. `direct`: send from memory where there is
   * room (otherwise, and at shutdown, batches go to the queue). `round`:
   * what started it (see `SpanBuffers.cut`: a round started by a full batch
   * soon after the last cuts only full batches).
   */
  readonly all: (direct: boolean, round: Round) => Effect.Effect<void, never, OutboundHttp>
  /** Rounds for the life of the scope: on a full batch, and every `SVC_TELEMETRY_FLUSH_INTERVAL`. */
  readonly loop: Effect.Effect<never, never, OutboundHttp>
}

export const makeFlush = (deps: {
  readonly targets: Targets
  readonly queueView: QueueView
  readonly ready: ReadyBatches
  readonly sender: MemorySender
}) =>
  Effect.gen(function*() {
    const { queueView, ready, sender, targets } = deps
    const buffers = yield* SpanBuffers
    const repo = yield* DestinationsRepo
    const queue = yield* DeliveryQueue
    const { telemetryQueueBatches, telemetryFlushInterval } = yield* SvcConfig

    const flushOne = (destinationId: string, orgId: string, direct: boolean, round: Round) =>
      Effect.gen(function*() {
        // Only what is buffered now: spans captured while this round compresses
        // its batches wait for the next round (or the next full batch).
        // Draining until the buffer is empty would, under steady traffic, cut
        // a stream of tiny batches and then count the rest as dropped once
        // `room` ran out, with a healthy collector.
        let left = buffers.cut(destinationId, round, yield* Clock.currentTimeMillis)
        if (left > 0 || ready.count(destinationId) > 0) {
          const queued = yield* queueView.undelivered(destinationId)
          let room = telemetryQueueBatches - queued - sender.inFlight(destinationId) - ready.count(destinationId)
          // From memory only while nothing of the destination waits in the
          // queue: a collector that is failing is probed and backed off by the
          // queue's worker, not sent every new batch.
          const target = direct && sender.open() && queued === 0
            ? yield* targets.of(destinationId)
            : Option.none<CollectorTarget>()
          for (; left > 0; left--) {
            const batch = buffers.take(destinationId)
            if (batch === undefined) break
            if (room <= 0) {
              // The collector is not keeping up: drop rather than grow without bound.
              buffers.addDropped(destinationId, batch.spans)
              batch.release()
              continue
            }
            buffers.addSending(destinationId, batch.spans)
            const body = yield* compressBatch(batch).pipe(
              Effect.onInterrupt(() => Effect.sync(() => buffers.addSending(destinationId, -batch.spans)))
            )
            room -= 1
            ready.push(destinationId, { orgId, body, spanCount: batch.spans })
            // The first batches leave while the next are compressed.
            if (Option.isSome(target)) yield* sender.start(destinationId, target.value)
          }
          if (Option.isNone(target) && (yield* ready.toQueue(destinationId))) yield* queue.wake("telemetry")
        }
        const dropped = buffers.takeDropped(destinationId)
        if (dropped > 0) yield* repo.addDropped(destinationId, dropped)
      })

    // Suspended: the set of buffers is read at each round, not once.
    const all = (direct: boolean, round: Round) =>
      Effect.suspend(() =>
        Effect.forEach(buffers.states(), (state) => flushOne(state.destinationId, state.orgId, direct, round), {
          discard: true
        })
      )

    // Closing the latch before flushing keeps a "batch ready" that arrives
    // during the flush for the next round. A round the latch started (a full
    // batch) cuts full batches; one the period started cuts everything. The
    // period is kept whatever rounds full batches start in between: the
    // spans left behind by the last full batch of a burst leave within
    // the interval of the previous period round, not the interval after
    // that batch.
    const loop = Effect.gen(function*() {
      let startedBy: Round = "period"
      let periodAt = (yield* Clock.currentTimeMillis) + Duration.toMillis(telemetryFlushInterval)
      return yield* Effect.sync(() => buffers.batchReady.closeUnsafe()).pipe(
        Effect.andThen(Effect.suspend(() => all(true, startedBy))),
        Effect.catchCause((cause) => Effect.logWarning("telemetry flush failed; trying again", cause)),
        Effect.andThen(Effect.flatMap(Clock.currentTimeMillis, (now) =>
          buffers.batchReady.await.pipe(Effect.timeoutOption(Duration.millis(Math.max(0, periodAt - now)))))),
        Effect.flatMap((opened) =>
          Effect.map(Clock.currentTimeMillis, (now) => {
            if (Option.isSome(opened)) {
              startedBy = "full"
            } else {
              startedBy = "period"
              periodAt = now + Duration.toMillis(telemetryFlushInterval)
            }
          })
        ),
        Effect.forever
      )
    })

    const flush: Flush = { all, loop }
    return flush
  })
