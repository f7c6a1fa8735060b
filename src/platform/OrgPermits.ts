/**
 * Permits per organization: at most `permits` effects of one organization
 * run at once through `withPermit`, whatever the number waiting, while
 * other organizations' run on their own permits. An organization's entry
 * is kept only while one of its effects runs or waits, so the map holds
 * the organizations active now, not every one seen.
 */
import { Effect, Semaphore } from "effect"

export interface OrgPermits {
  readonly withPermit: <A, E, R>(orgId: string, effect: Effect.Effect<A, E, R>) => Effect.Effect<A, E, R>
  /** Organizations holding or waiting for a permit now. */
  readonly active: () => number
}

export const makeOrgPermits = (permits: number): OrgPermits => {
  const entries = new Map<string, { readonly semaphore: Semaphore.Semaphore; users: number }>()
  return {
    withPermit: (orgId, effect) =>
      Effect.acquireUseRelease(
        Effect.sync(() => {
          let entry = entries.get(orgId)
          if (entry === undefined) {
            entry = { semaphore: Semaphore.makeUnsafe(permits), users: 0 }
            entries.set(orgId, entry)
          }
          entry.users += 1
          return entry
        }),
        (entry) => entry.semaphore.withPermit(effect),
        (entry) =>
          Effect.sync(() => {
            entry.users -= 1
            if (entry.users === 0) entries.delete(orgId)
          })
      ),
    active: () => entries.size
  }
}
