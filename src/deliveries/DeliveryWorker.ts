/**
 * The loop that sends deliveries of one kind: claim while there are free
 * slots, handle each claimed delivery in its own fiber (a slow target holds
 * only its own slots), settle, and when nothing is due, sleep until a wakeup,
 * the next due instant, or the poll interval. The database is the source of
 * truth, so any number of processes can run this loop for the same kind.
 */
import { Cause, Deferred, Duration, Effect, FiberSet, Latch, Option } from "effect"
import { Wakeups } from "../platform/Wakeups.ts"
import {
  type AttemptRecord,
  type Claimed,
  type CooldownPolicy,
  type DeliveryKind,
  DeliveryQueue,
  Outcome,
  type SettleItem,
  wakeTopic
} from "./DeliveryQueue.ts"

export interface Settlement {
  readonly outcome: Outcome
  readonly attempt: AttemptRecord
}

export interface WorkerOptions<R> {
  readonly kind: DeliveryKind
  /** Deliveries in flight at once in this process. */
  readonly concurrency: number
  /** Deliveries of one target in flight at once, across processes. */
  readonly perTarget: number
  /** Longer than the slowest `handle`: a lease that runs out lets another process send again. */
  readonly leaseFor: Duration.Input
  /** Longest sleep when nothing is due (the cross-process fallback when no wakeup arrives). */
  readonly pollEvery: Duration.Input
  readonly cooldown?: CooldownPolicy | undefined
  /** Sends one delivery and says how it went; it should not fail (a defect is recorded as a retry). */
  readonly handle: (delivery: Claimed) => Effect.Effect<Settlement, never, R>
}

/** Most settlements written in one statement. */
const SETTLE_BATCH = 256

/** How often to look again when due work is blocked by per-target limits or other processes' locks. */
const BLOCKED_RECHECK_MS = 200

/** After a defect in `handle`, try the delivery again this much later. */
const DEFECT_RETRY = Duration.seconds(30)

/** Runs the loop in a fiber of the current scope. */
export const runWorker = <R>(options: WorkerOptions<R>) =>
  Effect.gen(function*() {
    const queue = yield* DeliveryQueue
    const wakeups = yield* Wakeups
    const fibers = yield* FiberSet.make()
    const slotFreed = Latch.makeUnsafe(false)
    let inFlight = 0

    // Settlements are written in batches: whatever finished while the last
    // batch was being written goes in the next statement. Under load that is
    // one statement for many deliveries instead of one each.
    const settling: Array<{ readonly item: SettleItem; readonly done: Deferred.Deferred<boolean> }> = []
    const settleWanted = Latch.makeUnsafe(false)
    yield* Effect.gen(function*() {
      yield* settleWanted.await
      settleWanted.closeUnsafe()
      while (settling.length > 0) {
        const batch = settling.splice(0, SETTLE_BATCH)
        yield* queue.settleMany(batch.map((entry) => entry.item)).pipe(
          Effect.matchCause({
            onSuccess: (held) => batch.forEach((entry, i) => Deferred.doneUnsafe(entry.done, Effect.succeed(held[i] ?? false))),
            onFailure: (cause) => batch.forEach((entry) => Deferred.doneUnsafe(entry.done, Effect.failCause(cause)))
          })
        )
      }
    }).pipe(Effect.forever, Effect.forkScoped)
    const settle = (item: SettleItem) =>
      Effect.suspend(() => {
        const done = Deferred.makeUnsafe<boolean>()
        settling.push({ item, done })
        settleWanted.openUnsafe()
        return Deferred.await(done)
      })

    const process = (delivery: Claimed) =>
      options.handle(delivery).pipe(
        Effect.catchCause((cause) =>
          Effect.as(
            Effect.logError("delivery handler failed; retrying later", Cause.squash(cause)).pipe(
              Effect.annotateLogs({ delivery_id: delivery.id, org_id: delivery.orgId })
            ),
            {
              outcome: Outcome.retry(new Date(Date.now() + Duration.toMillis(DEFECT_RETRY)), "internal error"),
              attempt: { error: "internal error", durationMs: 0 }
            } satisfies Settlement
          )
        ),
        Effect.flatMap(({ attempt, outcome }) => settle({ claimed: delivery, outcome, attempt, cooldown: options.cooldown })),
        Effect.flatMap((held) =>
          held
            ? Effect.void
            : Effect.logWarning("delivery lease lost before settling; the outcome was not recorded").pipe(
              Effect.annotateLogs({ delivery_id: delivery.id })
            )
        ),
        // A failed settle (the database is unreachable) leaves the delivery
        // `sending` until its lease runs out, then it is sent again: say so
        // instead of letting the fiber die unseen in the FiberSet.
        Effect.catchCause((cause) =>
          Cause.hasInterruptsOnly(cause)
            ? Effect.failCause(cause)
            : Effect.logError("recording a delivery outcome failed; it is retried once its lease runs out", Cause.squash(cause))
              .pipe(Effect.annotateLogs({ delivery_id: delivery.id, org_id: delivery.orgId }))
        ),
        Effect.ensuring(Effect.sync(() => {
          inFlight--
          slotFreed.openUnsafe()
        }))
      )

    const waitForWork = Effect.gen(function*() {
      const next = yield* queue.nextDue(options.kind)
      const poll = Duration.toMillis(options.pollEvery)
      const untilDue = Option.match(next, {
        onNone: () => poll,
        onSome: (at) => Math.max(0, Math.min(poll, at.getTime() - Date.now()))
      })
      // Work is due but the claim just made could not take it (its targets
      // are at their per-target limit, or another process holds the rows):
      // wait for one of our slots to free or a wakeup, briefly, instead of
      // claiming again at once in a busy loop.
      if (untilDue === 0) {
        yield* Effect.raceFirst(
          wakeups.wait(wakeTopic(options.kind), Duration.millis(Math.min(poll, BLOCKED_RECHECK_MS))),
          slotFreed.await
        )
        return
      }
      yield* Effect.raceFirst(
        wakeups.wait(wakeTopic(options.kind), Duration.millis(untilDue)),
        slotFreed.await
      )
    })

    const step = Effect.gen(function*() {
      slotFreed.closeUnsafe()
      const free = options.concurrency - inFlight
      if (free <= 0) {
        yield* slotFreed.await.pipe(Effect.timeoutOption(options.pollEvery))
        return
      }
      const claimed = yield* queue.claim(options.kind, {
        limit: free,
        leaseFor: options.leaseFor,
        perTarget: options.perTarget
      })
      for (const delivery of claimed) {
        inFlight++
        yield* FiberSet.run(fibers, process(delivery))
      }
      // A full claim may leave more behind; otherwise wait for something to
      // change. While deliveries are in flight, one of them finishing (or a
      // short recheck) is the next event: no need to ask when work is due.
      if (claimed.length < free) {
        yield* inFlight > 0
          ? Effect.raceFirst(
            wakeups.wait(wakeTopic(options.kind), Duration.millis(Math.min(Duration.toMillis(options.pollEvery), BLOCKED_RECHECK_MS))),
            slotFreed.await
          )
          : waitForWork
      }
    })

    yield* step.pipe(
      Effect.catchCause((cause) =>
        Cause.hasInterruptsOnly(cause)
          ? Effect.failCause(cause)
          : Effect.logError(`${options.kind} delivery loop step failed; retrying`, Cause.squash(cause)).pipe(
            Effect.andThen(Effect.sleep(options.pollEvery))
          )
      ),
      Effect.forever,
      Effect.forkScoped
    )
  })
