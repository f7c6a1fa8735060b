/**
 * Batches sent from memory: at most `MEMORY_SENDS` per destination in flight
 * in this process; the others wait in `ReadyBatches` for a slot. A batch the
 * collector takes leaves only its record (`Records`, no payload); one that
 * fails is stored sealed in the shared queue, `retrying` (retryable) or
 * `failed` (kept for a replay), where the delivery worker takes it over.
 *
 * A failure's record is stored while the destination's row is held shared
 * (`whileExists`; the undelivered count's trigger then locks its target:
 * destination first, as its deletion takes them), and the destination's
 * `last_error` is written just before, by a statement of its own (as the
 * queue's drain does): two processes recording failures of one destination
 * would deadlock raising their shared locks to update it in the
 * transaction, and a reader who sees the failed record sees its error on
 * the destination too. Successes, the common case, are
 * recorded later with the destination's others (`Records`), by a
 * transaction that takes the row to update it first.
 */
import { Clock, Duration, Effect, FiberSet } from "effect"
import { DeliveryQueue } from "../../deliveries/DeliveryQueue.ts"
import { Metrics } from "../../observability/Metrics.ts"
import type { OutboundHttp } from "../../outbound/OutboundHttp.ts"
import { SvcConfig } from "../../platform/Config.ts"
import { SpanBuffers } from "../Buffers.ts"
import { type CollectorTarget, exportBody, type StoredBody } from "../Collector.ts"
import { DestinationsRepo } from "../Repository.ts"
import type { LastOutcome } from "./LastOutcome.ts"
import type { QueueView } from "./QueueView.ts"
import type { ReadyBatches } from "./ReadyBatches.ts"
import type { Records, Taken } from "./Records.ts"
import { retryDelay } from "./Retries.ts"

/** Batches of one destination sent from memory at once by this process; more wait in memory for a slot. */
export const MEMORY_SENDS = 4

export interface MemorySender {
  /** Starts ready batches of the destination while it has free send slots. */
  readonly start: (destinationId: string, target: CollectorTarget) => Effect.Effect<void, never, OutboundHttp>
  /** Batches of the destination being sent from memory now. */
  readonly inFlight: (destinationId: string) => number
  /** Whether sends from memory may start (not once shutdown began). */
  readonly open: () => boolean
  /** Shutdown: no new send starts. */
  readonly close: () => void
  /** Answers once the sends under way have ended. */
  readonly idle: Effect.Effect<void>
}

export const makeMemorySender = (deps: {
  readonly ready: ReadyBatches
  readonly records: Records
  readonly lastOutcome: LastOutcome
  readonly queueView: QueueView
}) =>
  Effect.gen(function*() {
    const { lastOutcome, queueView, ready, records } = deps
    const buffers = yield* SpanBuffers
    const repo = yield* DestinationsRepo
    const queue = yield* DeliveryQueue
    const metrics = yield* Metrics
    const { telemetryExportTimeout, telemetryRetrySchedule: schedule } = yield* SvcConfig
    const sends = yield* FiberSet.make<void>()
    const inFlight = new Map<string, number>()
    let closing = false

    const send = (orgId: string, destinationId: string, target: CollectorTarget, body: StoredBody, spanCount: number) =>
      Effect.suspend(() => {
        let deferred = false
        return Effect.gen(function*() {
          const { result, durationMs } = yield* exportBody(target, body, spanCount, telemetryExportTimeout)
          const meta = { span_count: spanCount, bytes: body.bytes, round_start: 0 }
          /** A failed batch's record, kept sealed for its retry or a replay (nothing when the destination is gone). */
          const record = (input: {
            readonly status: "retrying" | "failed"
            readonly payload: string
            readonly error: string
            readonly retryAfter?: Duration.Duration
            readonly meta?: typeof meta & Record<string, string | number>
          }) =>
            repo.whileExists(
              destinationId,
              queue.recordAttempted([{
                orgId,
                kind: "telemetry",
                targetId: destinationId,
                ...input,
                meta: input.meta ?? meta
              }])
            )
          /** A batch the collector took: recorded with the destination's next ones (its spans count as sending until then). */
          const later = (entry: Omit<Taken, "orgId" | "spans">) => {
            records.add(destinationId, { ...entry, orgId, spans: spanCount })
            deferred = true
          }
          /** Failed for good: kept sealed for a replay; the round that a replay starts begins after this attempt. */
          const failed = (error: string) =>
            Effect.gen(function*() {
              lastOutcome.forgetSuccess(destinationId)
              yield* records.writeOf(destinationId)
              yield* repo.recordError(destinationId, error)
              yield* record({
                status: "failed",
                payload: ready.seal(destinationId, body),
                error,
                meta: { ...meta, round_start: 1 }
              })
              metrics.deliveryAttempt("telemetry", "Failed", durationMs)
              metrics.spansDropped("organizations", "export_failed", spanCount)
              return false
            })
          switch (result._tag) {
            case "Accepted":
              later({
                status: "delivered",
                error: null,
                touch: lastOutcome.touchOnSuccess(destinationId, null, yield* Clock.currentTimeMillis),
                meta: result.warning === undefined ? meta : { ...meta, warning: result.warning }
              })
              metrics.deliveryAttempt("telemetry", "Delivered", durationMs)
              metrics.spansExported("organizations", spanCount)
              return true
            case "Partial": {
              lastOutcome.touchOnSuccess(destinationId, result.error, yield* Clock.currentTimeMillis)
              later({
                status: "partial",
                error: result.error,
                touch: true,
                meta: { ...meta, rejected_spans: result.rejected }
              })
              const rejected = Math.min(spanCount, result.rejected)
              metrics.deliveryAttempt("telemetry", "Partial", durationMs)
              metrics.spansExported("organizations", spanCount - rejected)
              metrics.spansDropped("organizations", "rejected_by_collector", rejected)
              return true
            }
            case "Rejected":
              return yield* failed(result.error)
            case "Retryable":
              // An empty schedule: one attempt, no retry.
              if (schedule.length === 0) return yield* failed(`${result.error} (gave up after 1 attempt)`)
              lastOutcome.forgetSuccess(destinationId)
              yield* records.writeOf(destinationId)
              yield* repo.recordError(destinationId, result.error)
              yield* record({
                status: "retrying",
                payload: ready.seal(destinationId, body),
                error: result.error,
                retryAfter: retryDelay(schedule, 1, result)
              })
              metrics.deliveryAttempt("telemetry", "Retry", durationMs)
              yield* queue.wake("telemetry")
              return false
          }
        }).pipe(
          Effect.catchCause((cause) =>
            Effect.as(Effect.logWarning("telemetry batch sent from memory could not be recorded", cause), false)
          ),
          Effect.ensuring(Effect.sync(() => {
            if (!deferred) buffers.addSending(destinationId, -spanCount)
            const left = (inFlight.get(destinationId) ?? 1) - 1
            if (left <= 0) inFlight.delete(destinationId)
            else inFlight.set(destinationId, left)
          })),
          // The slot is free: the next ready batch goes out at once after a
          // success; after a failure the next round decides (the queue then
          // holds the failed batch, so the ready ones join it there).
          Effect.flatMap((delivered) => {
            if (!delivered) queueView.forget(destinationId)
            return ready.count(destinationId) === 0
              ? Effect.void
              : delivered && !closing && buffers.isActive(destinationId)
              ? start(destinationId, target)
              : Effect.sync(() => buffers.batchReady.openUnsafe())
          })
        )
      })

    const start = (destinationId: string, target: CollectorTarget): Effect.Effect<void, never, OutboundHttp> =>
      Effect.gen(function*() {
        while (ready.count(destinationId) > 0 && (inFlight.get(destinationId) ?? 0) < MEMORY_SENDS) {
          const batch = ready.shift(destinationId)!
          inFlight.set(destinationId, (inFlight.get(destinationId) ?? 0) + 1)
          yield* FiberSet.run(sends, send(batch.orgId, destinationId, target, batch.body, batch.spanCount))
        }
      })

    const sender: MemorySender = {
      start,
      inFlight: (destinationId) => inFlight.get(destinationId) ?? 0,
      open: () => !closing,
      close: () => {
        closing = true
      },
      idle: FiberSet.awaitEmpty(sends)
    }
    return sender
  })
