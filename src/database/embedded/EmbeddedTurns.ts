/**
 * Whose turn it is on the embedded session (`EmbeddedClient.ts`): one
 * statement, or one whole transaction, at a time, as a semaphore of one
 * permit, but handed between organizations in turn rather than in the
 * order asked. With first come, first served, a request of one
 * organization waits for every statement queued before it, so eight
 * concurrent steps of another organization put eight statements ahead of
 * it; in turns it waits for the one running and at most one of each other
 * organization waiting. Within an organization, first come, first served.
 *
 * The organization is the request's (`RequestFacts`, learned when it is
 * authenticated); everything else (background work, requests before
 * authentication) takes its turns as one more party.
 *
 * Written by hand: Effect's `Semaphore` serves in order of arrival only.
 * It follows its design: a wake reserves nothing; a waiter keeps its place
 * until it takes the turn or is interrupted, and checks again when it runs.
 */
import { Effect } from "effect"
import { RequestFacts } from "../../platform/Logging.ts"

interface Waiter {
  readonly party: string
  resume: ((effect: Effect.Effect<void>) => void) | undefined
}

export interface EmbeddedTurns {
  /** Waits for a turn of the current fiber's organization; `release` ends it. */
  readonly take: Effect.Effect<void>
  readonly release: Effect.Effect<void>
  /** `effect` in a turn of its own. */
  readonly withTurn: <A, E, R>(effect: Effect.Effect<A, E, R>) => Effect.Effect<A, E, R>
}

export const makeEmbeddedTurns = (): EmbeddedTurns => {
  let held = false
  // Parties with waiters, in the order of their next turn (a Map keeps insertion order).
  const queues = new Map<string, Array<Waiter>>()

  const first = (): Waiter | undefined => {
    for (const queue of queues.values()) return queue[0]
    return undefined
  }

  /** Takes `waiter` out of its party's queue; a party that still waits goes to the back of the turns. */
  const remove = (waiter: Waiter): boolean => {
    const queue = queues.get(waiter.party)
    const index = queue === undefined ? -1 : queue.indexOf(waiter)
    if (index < 0) return false
    queue!.splice(index, 1)
    queues.delete(waiter.party)
    if (queue!.length > 0) queues.set(waiter.party, queue!)
    return true
  }

  const wake = () => {
    if (held) return
    const waiter = first()
    if (waiter === undefined) return
    const resume = waiter.resume
    waiter.resume = undefined
    resume?.(Effect.void)
  }

  const takeAs = (party: string): Effect.Effect<void> =>
    Effect.suspend(() => {
      if (!held && queues.size === 0) {
        held = true
        return Effect.void
      }
      const waiter: Waiter = { party, resume: undefined }
      const queue = queues.get(party)
      if (queue === undefined) queues.set(party, [waiter])
      else queue.push(waiter)
      const wait = Effect.callback<void>((resume) => {
        // The turn may have come before this fiber waited.
        if (!held && first() === waiter) resume(Effect.void)
        else waiter.resume = resume
      })
      const loop: Effect.Effect<void> = Effect.flatMap(wait, () => {
        if (held || first() !== waiter) return loop
        held = true
        remove(waiter)
        return Effect.void
      })
      // Interrupted while waiting: its place is given up, and the next party's waiter may have the turn.
      return Effect.onInterrupt(loop, () =>
        Effect.sync(() => {
          if (remove(waiter)) wake()
        }))
    })

  const release = Effect.withFiber((fiber) => {
    held = false
    // As Effect's semaphore: the woken fiber runs as a task of its own, not inside this one.
    if (queues.size > 0) fiber.currentDispatcher.scheduleTask(wake, 0)
    return Effect.void
  })

  const take = Effect.withFiber((fiber) => takeAs(fiber.getRef(RequestFacts)?.orgId ?? ""))

  return {
    take,
    release,
    withTurn: (effect) =>
      Effect.uninterruptibleMask((restore) => Effect.andThen(restore(take), Effect.ensuring(restore(effect), release)))
  }
}
