/**
 * Wake background workers when there is new work, without making the
 * database the only clock. The database stays the source of truth: a worker
 * claims rows, and when it finds none it waits here for a signal or for its
 * poll interval, whichever comes first.
 *
 * Signals reach workers of this process at once. On a PostgreSQL server they
 * also travel through `NOTIFY` to other processes (delivered at commit when
 * sent inside a transaction). PGlite's socket does not carry notifications
 * to other sessions, so there the poll interval is the cross-process path.
 *
 * Signal after the transaction that created the work has committed, or
 * put the signal's `pg_notify` into the statement that creates the work
 * (`Wakeups.inStatement`): one notification carries every topic of a
 * change. A notification names the process that sent it, which ignores it:
 * the sender already woke its own workers without a round trip.
 */
import { PgClient } from "@effect/sql-pg"
import { Context, Deferred, Duration, Effect, Latch, Layer, Queue, type Scope } from "effect"
import * as crypto from "node:crypto"
import { doubling } from "../platform/Backoff.ts"
import { DatabaseInfo } from "./Database.ts"

/** The channel every process listens on for wakeups. */
export const WAKEUP_CHANNEL = "svc_wakeup"

/**
 * What can be waited for. Every topic is named here, so a signal and its
 * waiters cannot drift apart by a typo.
 */
export type Topic = "events" | "approvals" | `deliveries:${string}`

/**
 * What a subscriber of this process handles (`Wakeups.subscribe`) rather
 * than a worker waits for: a stream key of `SessionHub` (`hub:<key>`), an
 * organization's approval policies changed (`policies:<org id>`).
 */
export type Broadcast = `hub:${string}` | `policies:${string}`

/** Anything one signal carries. */
export type Signal = Topic | Broadcast

export const Topics = {
  /** New outbox events for the dispatcher (approval lifecycle events). */
  events: "events",
  /** Approval deadlines changed: the scheduler re-reads its next one. */
  approvals: "approvals",
  /** New or released deliveries of one kind (`webhook`, `telemetry`). */
  deliveries: (kind: string): Topic => `deliveries:${kind}`,
  /**
   * New rows of one kind's log alone (`deliveries/log/`), no row on its
   * own among them: a worker asks the log, not the per-row statement.
   */
  deliveryLog: (kind: string): Topic => `deliveries:${kind}:log`
} as const

/** First and longest pause before listening again after the connection dropped. */
const RELISTEN_FIRST_MS = 1_000
const RELISTEN_MAX_MS = 30_000

/**
 * Keeps a `LISTEN channel` for the life of the scope, handing each payload
 * to `handle`. When its connection drops (the database restarted or was
 * unreachable), it listens again as soon as the database answers, backing
 * off to one attempt every 30 s, and then runs `resync` (notifications sent
 * meanwhile were lost: wake whoever waits). Until then callers poll, as
 * they do anyway across processes. Returns once the first attempt is done.
 */
export const keepListening = (options: {
  readonly sql: PgClient.PgClient
  readonly channel: string
  readonly handle: (payload: string) => Effect.Effect<void>
  readonly resync: Effect.Effect<void>
  /** Names the listener in log lines. */
  readonly what: string
}): Effect.Effect<void, never, Scope.Scope> =>
  Effect.gen(function*() {
    const firstAttempt = yield* Deferred.make<void>()
    let failures = 0
    const session = Effect.scoped(Effect.gen(function*() {
      const notifications = yield* options.sql.listen(options.channel)
      if (failures > 0) {
        yield* Effect.logInfo(`${options.what} listens again`)
        yield* options.resync
      }
      failures = 0
      yield* Deferred.succeed(firstAttempt, undefined)
      return yield* Queue.take(notifications).pipe(Effect.flatMap((n) => options.handle(n.payload)), Effect.forever)
    }))
    yield* session.pipe(
      Effect.catch((error) =>
        Effect.gen(function*() {
          // One line per outage, not one per attempt.
          if (failures === 0) {
            yield* Effect.logWarning(
              `${options.what} stopped listening; polling until the database answers again`,
              error
            )
          }
          failures++
        })
      ),
      Effect.andThen(Deferred.succeed(firstAttempt, undefined)),
      Effect.andThen(Effect.suspend(() => Effect.sleep(doubling(failures, RELISTEN_FIRST_MS, RELISTEN_MAX_MS)))),
      Effect.forever,
      Effect.forkScoped
    )
    yield* Deferred.await(firstAttempt)
  })

/** The prefix of a notification payload that names its sender: `~<origin> <signal> <signal> ...`. */
const ORIGIN_MARK = "~"

export class Wakeups extends Context.Service<Wakeups, {
  /** New work for each signal: wake its waiters and subscribers here and, on a server, in other processes (one NOTIFY). */
  readonly signal: (...signals: ReadonlyArray<Signal>) => Effect.Effect<void>
  /**
   * The same signals for a statement that makes the change: `notify` is the
   * `pg_notify(channel, payload)` arguments to run inside it (`undefined`
   * when notifications do not reach other processes: the embedded
   * database), and `local` wakes this process; run it after the statement.
   */
  readonly inStatement: (...signals: ReadonlyArray<Signal>) => {
    readonly notify: { readonly channel: string; readonly payload: string } | undefined
    readonly local: Effect.Effect<void>
  }
  /** Returns when `topic` is signalled or after `atMost`, whichever is first. */
  readonly wait: (topic: Topic, atMost: Duration.Input) => Effect.Effect<void>
  /**
   * Hands every signal with `prefix` (`"hub:"`, `"policies:"`) to `handle`
   * (without the prefix), from this process and others; `resync` runs when
   * notifications may have been lost (the listener connected again).
   */
  readonly subscribe: (
    prefix: string,
    handle: (rest: string) => Effect.Effect<void>,
    resync: Effect.Effect<void>
  ) => Effect.Effect<void>
}>()("svc/platform/Wakeups") {
  static readonly layer = Layer.effect(
    Wakeups,
    Effect.gen(function*() {
      const info = yield* DatabaseInfo
      const sql = yield* PgClient.PgClient
      // Our own notifications come back to us; this tag tells them apart.
      const origin = crypto.randomUUID()
      const latches = new Map<string, Latch.Latch>()
      const subscribers: Array<
        {
          readonly prefix: string
          readonly handle: (rest: string) => Effect.Effect<void>
          readonly resync: Effect.Effect<void>
        }
      > = []
      const latch = (topic: string) => {
        let found = latches.get(topic)
        if (found === undefined) {
          found = Latch.makeUnsafe(false)
          latches.set(topic, found)
        }
        return found
      }
      const wakeLocal = (signal: string): Effect.Effect<void> => {
        const handlers = subscribers.filter((s) => signal.startsWith(s.prefix))
        if (handlers.length === 0) return Effect.asVoid(latch(signal).open)
        return Effect.forEach(handlers, (s) => s.handle(signal.slice(s.prefix.length)), { discard: true })
      }
      const wakeAllLocal = (signals: ReadonlyArray<string>) => Effect.forEach(signals, wakeLocal, { discard: true })

      if (info.supportsNotify) {
        yield* keepListening({
          sql,
          channel: WAKEUP_CHANNEL,
          handle: (payload) => {
            // A payload without the mark is a bare topic, from SQL or an older process.
            if (!payload.startsWith(ORIGIN_MARK)) return wakeAllLocal([payload])
            const [sender, ...signals] = payload.slice(ORIGIN_MARK.length).split(" ")
            return sender === origin ? Effect.void : wakeAllLocal(signals.filter((s) => s.length > 0))
          },
          // Work signalled while we were not listening: every waiter looks.
          resync: Effect.andThen(
            Effect.forEach([...latches.values()], (l) => l.open, { discard: true }),
            Effect.forEach(subscribers, (s) => s.resync, { discard: true })
          ),
          what: "the wakeup listener"
        })
      }

      const payloadOf = (signals: ReadonlyArray<Signal>) => `${ORIGIN_MARK}${origin} ${signals.join(" ")}`

      const inStatement = (...signals: ReadonlyArray<Signal>) => ({
        notify: info.supportsNotify ? { channel: WAKEUP_CHANNEL, payload: payloadOf(signals) } : undefined,
        local: wakeAllLocal(signals)
      })

      const signal = (...signals: ReadonlyArray<Signal>) =>
        info.supportsNotify
          ? Effect.andThen(
            wakeAllLocal(signals),
            sql.notify(WAKEUP_CHANNEL, payloadOf(signals)).pipe(
              Effect.catch((error) => Effect.logWarning("wakeup notify failed; other processes will poll", error))
            )
          )
          : wakeAllLocal(signals)

      const wait = (topic: Topic, atMost: Duration.Input) => {
        const l = latch(topic)
        return l.await.pipe(
          Effect.timeoutOption(atMost),
          Effect.andThen(l.close),
          Effect.asVoid
        )
      }

      const subscribe = (prefix: string, handle: (rest: string) => Effect.Effect<void>, resync: Effect.Effect<void>) =>
        Effect.sync(() => void subscribers.push({ prefix, handle, resync }))

      return Wakeups.of({ signal, inStatement, wait, subscribe })
    })
  )
}
