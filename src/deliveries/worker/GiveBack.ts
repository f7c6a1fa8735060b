/**
 * Giving back: claimed deliveries set aside (their target began to cool
 * down, or they waited too long to still finish within their lease) are
 * released unsent, their attempt not counted. At shutdown everything
 * waiting here goes back at once instead of after its lease, and sends
 * under way get a grace to finish and be recorded, so a stopping process
 * leaves nothing to be sent twice unless the grace runs out first.
 */
import { Duration, Effect } from "effect"
import type { DeliveryQueue } from "../DeliveryQueue.ts"
import { type Limits, SETTLE_MARGIN_MS } from "./Limits.ts"
import type { Settler } from "./Settle.ts"
import type { WorkerState } from "./State.ts"

/** Longest a stopping worker waits for sends under way and their outcomes. */
const SHUTDOWN_GRACE_MAX_MS = 10_000
const SHUTDOWN_POLL = Duration.millis(10)
/** Longest the shutdown's release may take. */
const SHUTDOWN_RELEASE = Duration.seconds(2)

/** Releases what was set aside; what the database did not take is tried again next time (or its lease runs out). */
export const releaseSetAside = (queue: DeliveryQueue["Service"], state: WorkerState) =>
  Effect.suspend(() => {
    if (state.toRelease.length === 0) return Effect.void
    const batch = state.toRelease
    state.toRelease = []
    return queue.release(batch).pipe(
      Effect.andThen(Effect.sync(() => {
        state.moreMayBeDue = true
      })),
      Effect.onError(() => Effect.sync(() => state.toRelease.push(...batch)))
    )
  })

/** The worker's finalizer: give back what waits, then let sends under way finish and be recorded. */
export const shutdown = (queue: DeliveryQueue["Service"], state: WorkerState, settler: Settler, limits: Limits) =>
  Effect.suspend(() => {
    state.closing = true
    const rest = [...state.toRelease, ...state.admission.takeAllWaiting()]
    state.toRelease = []
    return queue.release(rest).pipe(
      Effect.timeout(SHUTDOWN_RELEASE),
      Effect.ignore,
      Effect.andThen(
        Effect.gen(function*() {
          while (state.admission.inFlight > 0 || settler.pending() > 0) yield* Effect.sleep(SHUTDOWN_POLL)
        }).pipe(
          Effect.timeout(Duration.millis(Math.min(limits.handleMs + SETTLE_MARGIN_MS, SHUTDOWN_GRACE_MAX_MS))),
          Effect.ignore
        )
      )
    )
  })
