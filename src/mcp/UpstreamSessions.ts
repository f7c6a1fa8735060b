/**
 * Upstream MCP sessions kept per (organization, server) in this process:
 * a gateway call uses the session its process already opened with the
 * server (`initialize` and `notifications/initialized` once), instead of
 * opening one per call. The session is not state another process needs:
 * any process opens its own, and one that has none opens one.
 *
 * Speeds up: an allowed `tools/call` through the gateway, which paid two
 * more exchanges with the upstream per call (`initialize`, then
 * `notifications/initialized`), a new SDK client and a read of the
 * server's URL and headers (3 statements): the upstream's CPU per call
 * fell from 3.7-5.3 ms to 1.7-2.4 ms, and with `agents/OutcomeStatement.ts`
 * the latency svc adds on a PostgreSQL server from 77 to 24 ms at p50 on a
 * machine at load 10-25 (`bench/notes/mcp.md`).
 *
 * Bounds: at most `MAX_KEPT_SESSIONS` sessions, the least recently used
 * let go first (closed once its last call is over); one unused for
 * `SESSION_IDLE_MS` is let go at the next look-up. A session whose
 * exchange failed in any way is let go; a kept session the upstream no
 * longer knows (HTTP 404, `SessionExpired`) is replaced by a new one and
 * the call sent once more (a 404 for an unknown session means the call was
 * not run). A server's URL and headers never change (there is no update;
 * registering again makes a new id), so a kept session never carries old
 * credentials; a removed server's session is never used, because every
 * call finds its server in the database first, and it ages out.
 */
import type { Client } from "@modelcontextprotocol/sdk/client/index.js"

/** Sessions kept at most per process (over every organization). */
export const MAX_KEPT_SESSIONS = 256
/** A session unused this long is let go. */
export const SESSION_IDLE_MS = 5 * 60_000

/** The upstream answered 404 to a request in a session: it no longer knows the session. */
export class SessionExpired extends Error {}

interface Kept {
  readonly client: Promise<Client>
  /** Calls using it now. */
  active: number
  /** `performance.now()` when it was last taken. */
  lastUsed: number
  /** Let go: closed once `active` is 0. */
  released: boolean
}

export interface UpstreamSessions {
  /**
   * Runs `use` on the kept session of `key` (`<org> <server>`), opening one
   * with `open` when there is none.
   */
  readonly use: <A>(key: string, open: () => Promise<Client>, use: (client: Client) => Promise<A>) => Promise<A>
  /** Closes every kept session (the layer's end). */
  readonly closeAll: () => Promise<void>
}

export const makeUpstreamSessions = (
  limits: { readonly max: number; readonly idleMs: number } = { max: MAX_KEPT_SESSIONS, idleMs: SESSION_IDLE_MS }
): UpstreamSessions => {
  // In order of last use, the oldest first (a Map keeps insertion order).
  const kept = new Map<string, Kept>()

  const close = (entry: Kept) => entry.client.then((client) => client.close(), () => undefined).catch(() => undefined)

  const letGo = (key: string, entry: Kept) => {
    if (kept.get(key) === entry) kept.delete(key)
    if (entry.released) return
    entry.released = true
    if (entry.active === 0) void close(entry)
  }

  const take = (key: string, open: () => Promise<Client>) => {
    const now = performance.now()
    // The oldest first: let go of those idle too long.
    for (const [oldKey, old] of kept) {
      if (now - old.lastUsed <= limits.idleMs) break
      if (old.active === 0) letGo(oldKey, old)
      else break
    }
    const found = kept.get(key)
    if (found !== undefined) {
      kept.delete(key)
      kept.set(key, found)
      found.lastUsed = now
      return { entry: found, reused: true }
    }
    const entry: Kept = { client: open(), active: 0, lastUsed: now, released: false }
    kept.set(key, entry)
    for (const [oldKey, old] of kept) {
      if (kept.size <= limits.max) break
      letGo(oldKey, old)
    }
    return { entry, reused: false }
  }

  const use = async <A>(key: string, open: () => Promise<Client>, run: (client: Client) => Promise<A>) => {
    for (let attempt = 0;; attempt++) {
      const { entry, reused } = take(key, open)
      entry.active++
      try {
        return await run(await entry.client)
      } catch (error) {
        letGo(key, entry)
        if (reused && attempt === 0 && error instanceof SessionExpired) continue
        throw error
      } finally {
        entry.active--
        if (entry.released && entry.active === 0) void close(entry)
      }
    }
  }

  const closeAll = async () => {
    const all = [...kept]
    kept.clear()
    for (const [, entry] of all) entry.released = true
    await Promise.all(all.map(([, entry]) => close(entry)))
  }

  return { use, closeAll }
}
