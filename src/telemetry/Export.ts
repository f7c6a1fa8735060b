/**
 * The background half of telemetry export, one set of fibers per process,
 * each loop a module of `export/`:
 *
 * - `Refresh.ts`: which organizations have a destination;
 * - `Flush.ts`: buffers become gzipped batches, sent from memory
 *   (`MemorySender.ts`, with `ReadyBatches.ts` waiting for a slot) or stored
 *   in the shared queue;
 * - `Records.ts`: the records of batches the collector took, written
 *   together once a second;
 * - `Drain.ts`: the shared delivery worker sends what the queue holds.
 *
 * Pruning (payloads of delivered batches, old records) is a retention rule
 * (`src/retention/Retention.ts`). None of this work belongs to an
 * organization, so none of its spans is exported (which would feed export
 * with its own spans).
 *
 * Batches sent from memory stay behind `MemorySender.ts` instead of going
 * through the delivery worker and its admission. The worker decides among
 * rows it has claimed: a batch would need a row first, the statement per
 * batch that sending from memory exists to avoid (a batch the collector
 * takes costs a share of one statement per destination per second). The
 * sender's bounds are those the worker's admission would apply to a
 * collector (`MEMORY_SENDS` in flight per destination, like `perTarget`;
 * `SVC_TELEMETRY_QUEUE_BATCHES` in all), and it sends only while nothing of
 * the destination waits in the queue: a collector that fails once is then
 * the worker's, with its backoff, `Retry-After` and per-target bounds, until
 * its queue is empty again.
 */
import { Duration, Effect, Layer } from "effect"
import { runDrain } from "./export/Drain.ts"
import { makeFlush } from "./export/Flush.ts"
import { makeLastOutcome } from "./export/LastOutcome.ts"
import { makeMemorySender } from "./export/MemorySender.ts"
import { makeQueueView } from "./export/QueueView.ts"
import { makeReadyBatches } from "./export/ReadyBatches.ts"
import { makeRecords } from "./export/Records.ts"
import { makeRefresh } from "./export/Refresh.ts"
import { makeTargets } from "./export/Targets.ts"

/** How long shutdown waits for buffered spans to be stored and sends under way to end. */
const SHUTDOWN_FLUSH = Duration.seconds(3)

export const TelemetryExportLive = Layer.effectDiscard(
  Effect.gen(function*() {
    const targets = yield* makeTargets
    const queueView = yield* makeQueueView
    const records = yield* makeRecords
    const lastOutcome = yield* makeLastOutcome(records)
    const ready = yield* makeReadyBatches(queueView)
    const sender = yield* makeMemorySender({ ready, records, lastOutcome, queueView })
    const flush = yield* makeFlush({ targets, queueView, ready, sender })
    // The per-destination caches keep only destinations this process buffers for.
    const refresh = yield* makeRefresh(() => {
      targets.forgetGone()
      queueView.forgetAll()
      ready.forgetGone()
      lastOutcome.forgetAll()
    })

    yield* refresh.once.pipe(Effect.catchCause((cause) => Effect.logWarning("telemetry refresh failed", cause)))
    yield* Effect.forkScoped(refresh.loop)
    // At shutdown (the loops below are stopped first), what is buffered
    // becomes batches in the queue (any process sends them later), and
    // batches being sent from memory finish, within a bounded time.
    yield* Effect.addFinalizer(() =>
      Effect.sync(sender.close).pipe(
        Effect.andThen(flush.all(false, "period")),
        Effect.andThen(sender.idle),
        Effect.andThen(records.writeAll),
        Effect.timeout(SHUTDOWN_FLUSH),
        Effect.catchCause((cause) => Effect.logWarning("telemetry flush at shutdown did not finish", cause))
      )
    )
    yield* Effect.forkScoped(flush.loop)
    yield* Effect.forkScoped(records.loop)
    yield* runDrain({ targets, lastOutcome })
  }).pipe(
    // Export work belongs to no organization: keep its spans (SQL, HTTP) out
    // of the tracer altogether.
    Effect.withTracerEnabled(false)
  )
)
