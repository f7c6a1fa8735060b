/**
 * Whether a destination has batches waiting in the queue, read at most once
 * a second while the answer is "none". Under steady traffic a flush round
 * starts every few dozen milliseconds and the queue is nearly always empty
 * (a send from memory leaves only its record), so a round reads it at most
 * once a second instead of once each. A failure here, or a round that
 * stores batches, forgets it at once; another process's failure or a
 * replay is seen within that second.
 */
import { Clock, Effect } from "effect"
import { DeliveryQueue } from "../../deliveries/DeliveryQueue.ts"

/** How long a read of "nothing of the destination waits in the queue" is trusted. */
const QUEUE_EMPTY_FRESH_MS = 1000

export interface QueueView {
  /** Undelivered batches of the destination in the queue (0 trusted for a second). */
  readonly undelivered: (destinationId: string) => Effect.Effect<number>
  /** The destination's queue may no longer be empty: read it next time. */
  readonly forget: (destinationId: string) => void
  readonly forgetAll: () => void
}

export const makeQueueView = Effect.gen(function*() {
  const queue = yield* DeliveryQueue
  /** When a destination's queue was last seen empty. */
  const emptyAt = new Map<string, number>()
  const view: QueueView = {
    undelivered: (destinationId) =>
      Effect.flatMap(Clock.currentTimeMillis, (now) => {
        const at = emptyAt.get(destinationId)
        if (at !== undefined && now - at < QUEUE_EMPTY_FRESH_MS) return Effect.succeed(0)
        return Effect.tap(queue.undelivered("telemetry", destinationId), (count) =>
          Effect.sync(() => {
            if (count === 0) emptyAt.set(destinationId, now)
            else emptyAt.delete(destinationId)
          }))
      }),
    forget: (destinationId) => {
      emptyAt.delete(destinationId)
    },
    forgetAll: () => emptyAt.clear()
  }
  return view
})
