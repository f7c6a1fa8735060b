/**
 * The destination's `last_delivered_at` and `last_error`: a run of
 * successes updates the row at most once a second; a failure always does,
 * after the records of the batches taken before it (so `last_error`
 * follows the latest outcome).
 */
import { Clock, Effect } from "effect"
import { DestinationsRepo } from "../Repository.ts"
import type { Records } from "./Records.ts"

const SUCCESS_WRITE_MS = 1000

export interface LastOutcome {
  /** Whether this success should update the destination row (a run of successes does so at most once a second). */
  readonly touchOnSuccess: (destinationId: string, error: string | null, now: number) => boolean
  /** A failure: the next success updates the row. */
  readonly forgetSuccess: (destinationId: string) => void
  readonly forgetAll: () => void
  readonly recordSuccess: (destinationId: string, error: string | null) => Effect.Effect<void>
  readonly recordError: (destinationId: string, error: string) => Effect.Effect<void>
}

export const makeLastOutcome = (records: Records) =>
  Effect.gen(function*() {
    const repo = yield* DestinationsRepo
    const lastSuccess = new Map<string, number>()
    const touchOnSuccess = (id: string, error: string | null, now: number) => {
      const previous = lastSuccess.get(id)
      if (error === null && previous !== undefined && now - previous < SUCCESS_WRITE_MS) return false
      lastSuccess.set(id, now)
      return true
    }
    const outcome: LastOutcome = {
      touchOnSuccess,
      forgetSuccess: (id) => {
        lastSuccess.delete(id)
      },
      forgetAll: () => lastSuccess.clear(),
      recordSuccess: (id, error) =>
        Effect.flatMap(Clock.currentTimeMillis, (now) =>
          touchOnSuccess(id, error, now) ? repo.recordSuccess(id, error) : Effect.void),
      recordError: (id, error) =>
        Effect.suspend(() => {
          lastSuccess.delete(id)
          // Successes from memory waiting for their records come first: `last_error` follows the latest outcome.
          return Effect.andThen(records.writeOf(id), repo.recordError(id, error))
        })
    }
    return outcome
  })
