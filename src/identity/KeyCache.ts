/**
 * The API key cache on the request path: a plain `Map` from a key's SHA-256
 * to its principal and the instant its entry stops being trusted.
 *
 * Speeds up: every authenticated request looks its key up here. Effect's
 * `Cache.get` (a fiber-aware lookup with its own clock reads, deferreds and
 * capacity bookkeeping) cost 77-200 µs of CPU per request under load; a
 * `Map.get` and one comparison cost well under a microsecond (figures in
 * bench/notes/request-path.md). The rules are those of the cache it replaces:
 *
 * - only known, unrevoked keys are kept, for at most `ttlMs` from the start
 *   of the database read that found them (the cross-process revocation
 *   bound without NOTIFY);
 * - `invalidate` / `invalidateAll` drop entries at once, and a lookup that
 *   was in flight when they ran does not store what it read (it may predate
 *   the revocation);
 * - at most `capacity` entries (the oldest inserted dropped first).
 *
 * Lookups of one key that miss at the same moment each read the database:
 * that happens once per key per `ttlMs` at most, and costs less than the
 * bookkeeping that would merge them.
 */
import { Effect, Option } from "effect"
import type { Principal } from "../api/Security.ts"

interface Entry {
  readonly principal: Principal
  readonly until: number
}

export interface KeyCache {
  /** The principal of the key with this hash: from memory, or `lookup` (kept when found). */
  readonly get: (hash: string) => Effect.Effect<Option.Option<Principal>>
  readonly invalidate: (hash: string) => void
  readonly invalidateAll: () => void
  /** Serves `principal` for `hash` from memory, without a database read, until `invalidate(hash)`. */
  readonly hold: (hash: string, principal: Principal) => void
}

export const makeKeyCache = (options: {
  readonly lookup: (hash: string) => Effect.Effect<Option.Option<Principal>>
  readonly ttlMs: number
  readonly capacity: number
  /** A monotonic clock in milliseconds. */
  readonly now?: () => number
}): KeyCache => {
  const now = options.now ?? (() => performance.now())
  const entries = new Map<string, Entry>()
  /** Moves on every invalidation: a lookup started under an older epoch stores nothing. */
  let epoch = 0

  const load = (hash: string) => {
    const startedAt = now()
    const startedIn = epoch
    return Effect.map(options.lookup(hash), (found) => {
      if (Option.isSome(found) && startedIn === epoch) {
        entries.delete(hash)
        if (entries.size >= options.capacity) entries.delete(entries.keys().next().value!)
        entries.set(hash, { principal: found.value, until: startedAt + options.ttlMs })
      }
      return found
    })
  }

  return {
    get: (hash) => {
      const entry = entries.get(hash)
      if (entry !== undefined) {
        if (now() < entry.until) return Effect.succeed(Option.some(entry.principal))
        entries.delete(hash)
      }
      return load(hash)
    },
    invalidate: (hash) => {
      epoch++
      entries.delete(hash)
    },
    invalidateAll: () => {
      epoch++
      entries.clear()
    },
    hold: (hash, principal) => {
      entries.set(hash, { principal, until: Number.POSITIVE_INFINITY })
    }
  }
}
