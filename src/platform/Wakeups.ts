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
import { Context, Duration, Effect, Latch, Layer, Queue } from "effect"
import { DatabaseInfo } from "./Database.ts"

const CHANNEL = "svc_wakeup"

export class Wakeups extends Context.Service<Wakeups, {
  /** New work for `topic`: wake its waiters here and, on a server, in other processes. */
  readonly signal: (topic: string) => Effect.Effect<void>
  /** Returns when `topic` is signalled or after `atMost`, whichever is first. */
  readonly wait: (topic: string, atMost: Duration.Input) => Effect.Effect<void>
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
        const notifications = yield* sql.listen(CHANNEL)
        yield* Queue.take(notifications).pipe(
          Effect.flatMap((notification) => wakeLocal(notification.payload)),
          Effect.forever,
          Effect.catch((error) => Effect.logWarning("wakeup listener stopped; workers fall back to polling", error)),
          Effect.forkScoped
        )
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

      const wait = (topic: string, atMost: Duration.Input) => {
        const l = latch(topic)
        return l.await.pipe(
          Effect.timeoutOption(atMost),
          Effect.andThen(l.close),
          Effect.asVoid
        )
      }

      return Wakeups.of({ signal: (topic) => Effect.asVoid(signal(topic)), wait })
    })
  )
}
