/**
 * The one shape of a background loop: run a round, then the next, for the
 * life of the scope. A round that fails (the database away, a defect in one
 * round) never ends the loop: it is logged once per outage, not once per
 * attempt, retried on a `Schedule`, and the first round that succeeds again
 * says so. Interruption ends the loop as usual.
 */
import { Cause, Duration, Effect, Schedule, type Scope } from "effect"

/**
 * Runs `round` forever. `name` names the loop in its log lines; `retry`
 * spaces the attempts after a failed round (default: every second).
 */
export const supervisedLoop = <E, R>(options: {
  readonly name: string
  readonly round: Effect.Effect<void, E, R>
  readonly retry?: Schedule.Schedule<unknown, unknown> | undefined
}): Effect.Effect<never, never, R> =>
  Effect.suspend(() => {
    let failing = false
    const attempt = options.round.pipe(
      Effect.catchCause((cause) => Cause.hasInterruptsOnly(cause) ? Effect.interrupt : Effect.fail(cause)),
      Effect.tapError((cause) =>
        Effect.suspend(() => {
          if (failing) return Effect.void
          failing = true
          return Effect.logError(`${options.name} failed; retrying until it runs again`, cause)
        })
      ),
      Effect.tap(() =>
        Effect.suspend(() => {
          if (!failing) return Effect.void
          failing = false
          return Effect.logInfo(`${options.name} runs again`)
        })
      )
    )
    return attempt.pipe(
      Effect.retry(options.retry ?? Schedule.spaced(Duration.seconds(1))),
      // A finite `retry` that gave up: start over with the next round.
      Effect.ignore,
      Effect.forever
    )
  })

/** `supervisedLoop` forked into the current scope. */
export const forkSupervised = <E, R>(
  options: Parameters<typeof supervisedLoop<E, R>>[0]
): Effect.Effect<void, never, R | Scope.Scope> => Effect.asVoid(Effect.forkScoped(supervisedLoop(options)))
