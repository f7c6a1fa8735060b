/**
 * What the send-target lookups found, readable without an effect: the
 * mirror behind `NotificationEndpoints.sendTargetNow`, for the webhook sends
 * that run without a fiber of their own (`DirectDeliveries.ts`). Entries
 * expire as the cache's do; a change made through this process drops its
 * endpoint's entry, and a lookup that began before the change does not
 * leave its answer here.
 *
 * What it buys: the direct send reads its endpoint with a map lookup
 * instead of `Cache.get` in a fiber; with the sends run directly, svc's CPU
 * per delivery in the `webhooks` drain went 213 → 197, 208 → 204 and
 * 169 → 147 µs (three A/B runs, load 5-6) and the Effect runtime's share of
 * svc's samples in the sends 10 % → 1 % (`bench/notes/delivery-log.md`, "The
 * drain's cost").
 */
import type { Clock } from "effect"
import type { SendTarget } from "./Endpoints.ts"

/** Entries kept; past this the mirror starts afresh (the cache holds as many). */
const KEPT = 10_000

/** One lookup in flight: made stale by a change to its endpoint after it began. */
export interface Lookup {
  stale: boolean
}

export const makeSendTargetMirror = (clock: Clock.Clock, ttlMs: number) => {
  const known = new Map<string, { readonly target: SendTarget; readonly until: number }>()
  // Only endpoints with a lookup in flight have an entry: nothing is kept
  // for an endpoint once its lookups have ended.
  const inFlight = new Map<string, Set<Lookup>>()
  return {
    /** A lookup of `key` begins; give the answer to `found` and call `ended` however it ends. */
    began: (key: string): Lookup => {
      const lookup: Lookup = { stale: false }
      let lookups = inFlight.get(key)
      if (lookups === undefined) {
        lookups = new Set()
        inFlight.set(key, lookups)
      }
      lookups.add(lookup)
      return lookup
    },
    /** The lookup found `target`: kept unless the endpoint changed since it began. */
    found: (key: string, lookup: Lookup, target: SendTarget) => {
      if (lookup.stale) return
      if (known.size >= KEPT) known.clear()
      known.set(key, { target, until: clock.currentTimeMillisUnsafe() + ttlMs })
    },
    ended: (key: string, lookup: Lookup) => {
      const lookups = inFlight.get(key)
      if (lookups === undefined || !lookups.delete(lookup)) return
      if (lookups.size === 0) inFlight.delete(key)
    },
    /** The endpoint changed through this process: its entry goes, and so does what lookups in flight would leave. */
    changed: (key: string) => {
      known.delete(key)
      const lookups = inFlight.get(key)
      if (lookups === undefined) return
      for (const lookup of lookups) lookup.stale = true
      inFlight.delete(key)
    },
    /** What a lookup found within `ttlMs`, or `undefined`. */
    now: (key: string) => {
      const entry = known.get(key)
      return entry !== undefined && clock.currentTimeMillisUnsafe() < entry.until ? entry.target : undefined
    },
    /** Endpoints with lookups in flight (for tests: this never grows past them). */
    watched: () => inFlight.size
  }
}
