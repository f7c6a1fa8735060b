/**
 * Optimistic writes: a statement computed from something cached (a policy,
 * an organization's credentials) that writes only while what it was
 * computed from still holds. When it no longer holds, the attempt fails
 * with `Stale`, having forgotten what it cached, and runs again.
 */
import { Data, Effect } from "effect"

/** What an attempt was computed from changed before it was written. */
export class Stale extends Data.TaggedError("Stale")<{ readonly what: string }> {}

const isStale = (error: unknown): error is Stale => error instanceof Stale

/**
 * `attempt` run again while it fails with `Stale`, at most `attempts` (2 or
 * more) times in all; past that, a defect naming what kept changing. The
 * first run costs one catch: the retry's policy is made only when it is
 * stale (some 3 µs a request otherwise).
 */
export const whileStale = <A, E, R>(
  attempts: number,
  attempt: Effect.Effect<A, E | Stale, R>
): Effect.Effect<A, Exclude<E, Stale>, R> =>
  attempt.pipe(
    Effect.catchIf(isStale, () => Effect.retry(attempt, { times: attempts - 2, while: isStale })),
    Effect.catchIf(isStale, (stale) => Effect.die(new Error(`${stale.what} kept changing during ${attempts} attempts`)))
  ) as Effect.Effect<A, Exclude<E, Stale>, R>
