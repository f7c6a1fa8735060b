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
 * Signal after the transaction that created the work has committed.
 */
import { PgClient } from "@effect/sql-pg"
import { Context, Deferred, Duration, Effect, Latch, Layer, Queue, type Scope } from "effect"
import { DatabaseInfo } from "./Database.ts"
import { doubling } from "./Backoff.ts"

const CHANNEL = "svc_wakeup"

/**
 * What can be waited for. Every topic is named here, so a signal and its
 * waiters cannot drift apart by a typo.
 */
export type Topic = "events" | "approvals" | `deliveries:${string}`

export const Topics = {
  /** New outbox events for the dispatcher (approval lifecycle events). */
  events: "events",
  /** Approval deadlines changed: the scheduler re-reads its next one. */
  approvals: "approvals",
  /** New or released deliveries of one kind (`webhook`, `telemetry`). */
  deliveries: (kind: string): Topic => `deliveries:${kind}`
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
          if (failures === 0) yield* Effect.logWarning(`${options.what} stopped listening; polling until the database answers again`, error)
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

export class Wakeups extends Context.Service<Wakeups, {
  /** New work for each topic: wake its waiters here and, on a server, in other processes. */
  readonly signal: (...topics: ReadonlyArray<Topic>) => Effect.Effect<void>
  /** Returns when `topic` is signalled or after `atMost`, whichever is first. */
  readonly wait: (topic: Topic, atMost: Duration.Input) => Effect.Effect<void>
}>()("svc/platform/Wakeups") {
  static readonly layer = Layer.effect(
    Wakeups,
    Effect.gen(function*() {
      const info = yield* DatabaseInfo
      const sql = yield* PgClient.PgClient
      const latches = new Map<string, Latch.Latch>()
      const latch = (topic: string) => {
        let found = latches.get(topic)
        if (found === undefined) {
          found = Latch.makeUnsafe(false)
          latches.set(topic, found)
        }
        return found
      }
      const wakeLocal = (topic: string) => latch(topic).open

      if (info.supportsNotify) {
        yield* keepListening({
          sql,
          channel: CHANNEL,
          handle: (topic) => Effect.asVoid(wakeLocal(topic)),
          // Work signalled while we were not listening: every waiter looks.
          resync: Effect.forEach([...latches.values()], (l) => l.open, { discard: true }),
          what: "the wakeup listener"
        })
      }

      const signal = (topic: string) =>
        info.supportsNotify
          ? Effect.andThen(
            wakeLocal(topic),
            sql.notify(CHANNEL, topic).pipe(
              Effect.catch((error) => Effect.logWarning("wakeup notify failed; other processes will poll", error))
            )
          )
          : Effect.asVoid(wakeLocal(topic))

      const signalAll = (topics: ReadonlyArray<Topic>) => Effect.forEach(topics, signal, { discard: true })

      const wait = (topic: Topic, atMost: Duration.Input) => {
        const l = latch(topic)
        return l.await.pipe(
          Effect.timeoutOption(atMost),
          Effect.andThen(l.close),
          Effect.asVoid
        )
      }

      return Wakeups.of({
        signal: (...topics) => signalAll(topics),
        wait
      })
    })
  )
}
