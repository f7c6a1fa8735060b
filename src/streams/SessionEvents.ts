/**
 * The recorded events of an agent session and their Server-Sent Events
 * stream. Each session numbers its events 1, 2, 3, ... (the SSE `id:`), in
 * commit order (`agents/StepRecords.ts` appends them), so a reader that
 * resumes after id N misses nothing and sees nothing twice.
 *
 * Idle streams cost no database queries: a stream reads when its session
 * has new events (`SessionHub`, through `Wakeups`: in-process, and NOTIFY
 * from other processes on a PostgreSQL server), for a keep-alive, or after a
 * slow poll.
 */
import { Clock, Context, Deferred, Duration, Effect, Layer, Option, Schema, type Scope, Stream } from "effect"
import type { SessionEventNames } from "../api/Agents.ts"
import { type Broadcast, Wakeups } from "../database/Wakeups.ts"
import { rowsOf } from "../platform/Rows.ts"

export type SessionEventName = typeof SessionEventNames[number]

/** The `Wakeups` signal that carries "the stream `key` has new events" (also between processes on a server). */
export const hubSignal = (key: string): Broadcast => `hub:${key}`

/** What a stream of one session watches while it is open. */
export interface SessionWatch {
  /** The session's version here; take it before reading. */
  readonly version: Effect.Effect<number>
  /** Returns once the version moved past `seen`, or after `atMost`. */
  readonly wait: (seen: number, atMost: Duration.Input) => Effect.Effect<void>
}

/**
 * Wake-ups of session streams. Versioned, so a stream that was reading when
 * an event arrived still sees it: it waits only while the version it read at
 * is the current one. State exists only for sessions with an open stream in
 * this process. On a PostgreSQL server, `notify` also reaches the other
 * processes through NOTIFY; PGlite serves one process, so in-process is all.
 */
export class SessionHub extends Context.Service<SessionHub, {
  /** Wake streams of `sessionId` here and in other processes. Call after commit. */
  readonly notify: (sessionId: string) => Effect.Effect<void>
  /** Watch `sessionId` for the life of the scope (a stream). */
  readonly watch: (sessionId: string) => Effect.Effect<SessionWatch, never, Scope.Scope>
  /** Completes when the service begins to stop: open streams end so the server can drain. */
  readonly closing: Effect.Effect<void>
  readonly close: Effect.Effect<void>
}>()("svc/agents/SessionHub") {
  /**
   * Ends every open session stream when the service stops. It belongs with
   * the workers (stopped beside the HTTP server), not with the services
   * (stopped after it): an open stream would otherwise hold the server's
   * drain until its grace period ends. Clients resume with `Last-Event-ID`.
   */
  static readonly closeOnShutdown = Layer.effectDiscard(
    Effect.flatMap(SessionHub, (hub) => Effect.addFinalizer(() => hub.close))
  )

  static readonly layer = Layer.effect(
    SessionHub,
    Effect.gen(function*() {
      const wakeups = yield* Wakeups
      const entries = new Map<string, { version: number; changed: Deferred.Deferred<void>; watchers: number }>()

      const bump = (sessionId: string) =>
        Effect.suspend(() => {
          const entry = entries.get(sessionId)
          if (entry === undefined) return Effect.void
          entry.version++
          const changed = entry.changed
          entry.changed = Deferred.makeUnsafe<void>()
          return Effect.asVoid(Deferred.succeed(changed, undefined))
        })

      // Signals of this process and (NOTIFY, on a server) of others; after a
      // lost connection, events of other processes may have come: open streams re-read.
      yield* wakeups.subscribe(
        "hub:",
        bump,
        Effect.suspend(() => Effect.forEach([...entries.keys()], bump, { discard: true }))
      )

      const notify = (sessionId: string) => wakeups.signal(hubSignal(sessionId))

      const watch = (sessionId: string) =>
        Effect.map(
          Effect.acquireRelease(
            Effect.sync(() => {
              let entry = entries.get(sessionId)
              if (entry === undefined) {
                entry = { version: 0, changed: Deferred.makeUnsafe<void>(), watchers: 0 }
                entries.set(sessionId, entry)
              }
              entry.watchers++
              return entry
            }),
            (entry) =>
              Effect.sync(() => {
                if (--entry.watchers === 0) entries.delete(sessionId)
              })
          ),
          (entry): SessionWatch => ({
            version: Effect.sync(() => entry.version),
            wait: (seen, atMost) =>
              Effect.suspend(() =>
                entry.version !== seen
                  ? Effect.void
                  : Effect.asVoid(Effect.timeoutOption(Deferred.await(entry.changed), atMost))
              )
          })
        )

      const closed = Deferred.makeUnsafe<void>()

      return SessionHub.of({
        notify,
        watch,
        closing: Deferred.await(closed),
        close: Effect.asVoid(Deferred.succeed(closed, undefined))
      })
    })
  )
}

export interface StoredEvent {
  readonly seq: string
  readonly name: string
  readonly data: string
}

/** One SSE frame. `data` is single-line JSON, so it needs one `data:` line. */
const sseFrame = (event: StoredEvent) => `id: ${event.seq}\nevent: ${event.name}\ndata: ${event.data}\n\n`

export const KEEP_ALIVE = ": keep-alive\n\n"

/**
 * What one read of a stream found: the events it may send now, in order, and
 * whether later ones exist that it may not send yet (an approval stream's
 * events wait for older transactions to finish, `approvals/OrgStream.ts`).
 */
export interface StreamRead {
  readonly rows: ReadonlyArray<StoredEvent>
  readonly held: boolean
}

/**
 * The first wait before a stream reads again events it found held back; each
 * further held read doubles it, up to the poll interval. Held events are sent
 * a fraction of a second to a few seconds after what held them ends, not up
 * to a whole poll interval later (no signal comes when it ends).
 */
export const HELD_RETRY_MS = 250

/**
 * The frames of a session stream after event id `after`: stored events in
 * order, then live ones as they come, with a keep-alive comment after
 * `keepAliveMs` of silence. `read` runs at start, after each wake-up, and at
 * most every `pollMs` (or `keepAliveMs`) while idle; sooner while it finds
 * events held back (`HELD_RETRY_MS`).
 */
export const sessionFrames = (options: {
  readonly after: string
  readonly read: (after: string) => Effect.Effect<StreamRead>
  /** Resolves when there may be new events, or after `ms`. `seen` comes from `version`. */
  readonly wait: (seen: number, ms: number) => Effect.Effect<void>
  readonly version: Effect.Effect<number>
  readonly keepAliveMs: number
  readonly pollMs: number
  /** Most rows `read` returns at once; a full batch is followed by another read at once. */
  readonly batch: number
}): Stream.Stream<string> => {
  interface State {
    readonly after: string
    readonly lastWrite: number
    readonly read: boolean
    /** Consecutive reads that found events held back. */
    readonly held: number
  }
  return Stream.unwrap(Effect.map(Clock.currentTimeMillis, (start) =>
    Stream.concat(
      Stream.make(": connected\n\n"),
      Stream.paginate<State, string>({ after: options.after, lastWrite: start, read: true, held: 0 }, (previous) =>
        Effect.gen(function*() {
          const seen = yield* options.version
          let state = previous
          if (state.read) {
            const { held, rows } = yield* options.read(state.after)
            state = { ...state, held: held ? state.held + 1 : 0 }
            if (rows.length > 0) {
              const now = yield* Clock.currentTimeMillis
              // A short batch was everything up to `seen`; anything newer moved
              // the version, so the wait below returns at once.
              const more = rows.length >= options.batch
              return [
                rows.map(sseFrame),
                Option.some({ ...state, after: rows[rows.length - 1]!.seq, lastWrite: now, read: more })
              ] as const
            }
          }
          const now = yield* Clock.currentTimeMillis
          const silent = now - state.lastWrite
          if (silent >= options.keepAliveMs) {
            return [[KEEP_ALIVE], Option.some({ ...state, lastWrite: now, read: false })] as const
          }
          const poll = state.held === 0
            ? options.pollMs
            : Math.min(options.pollMs, HELD_RETRY_MS * 2 ** Math.min(state.held - 1, 16))
          yield* options.wait(seen, Math.min(options.keepAliveMs - silent, poll))
          return [[], Option.some({ ...state, read: true })] as const
        }))
    )))
}

/** Stored events of one stream table (`seq::text AS seq, name, data`), decoded. */
export const storedEvents = (table: string) =>
  rowsOf(table, Schema.Struct({ seq: Schema.String, name: Schema.String, data: Schema.String }))

/** Rows one read of a stream returns at most. */
export const STREAM_BATCH = 200

/**
 * A live stream of the hub's `key`: counted by `open` while it is open (its
 * metric), woken by the key's notifications, read with `read`, and ended
 * when the hub closes at shutdown. Session and approval streams are both
 * this; only their key and table differ.
 */
export const hubFrames = (hub: SessionHub["Service"], options: {
  readonly key: string
  readonly after: string
  readonly open: Effect.Effect<void, never, Scope.Scope>
  readonly read: (after: string) => Effect.Effect<StreamRead>
  readonly keepAliveMs: number
  readonly pollMs: number
}): Stream.Stream<string> =>
  Stream.unwrap(Effect.map(Effect.andThen(options.open, hub.watch(options.key)), (watch) =>
    sessionFrames({
      after: options.after,
      read: options.read,
      version: watch.version,
      wait: watch.wait,
      keepAliveMs: options.keepAliveMs,
      pollMs: options.pollMs,
      batch: STREAM_BATCH
    }))).pipe(Stream.interruptWhen(hub.closing))
