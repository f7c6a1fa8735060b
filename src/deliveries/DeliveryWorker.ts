/**
 * The loop that sends deliveries of one kind. The database is the source of
 * truth, so any number of processes can run this loop for the same kind.
 *
 * - Claim: deliveries are taken with leases, a batch at a time. A busy
 *   target may have up to `prefetch` deliveries claimed (across processes),
 *   more than it may have in flight: they wait here, ready to start, so one
 *   claim statement serves many sends instead of one claim per free slot.
 * - Send: each delivery in its own fiber, at most `concurrency` in flight in
 *   this process and `perTarget` per target (one, while the target's latest
 *   attempt failed: a failing target is probed, not flooded). A slow target
 *   holds only its own slots.
 * - Settle: outcomes are written in batches, one statement each (whatever
 *   finished while the last batch was being written, plus a short linger
 *   unless a delivery waits only for recording), and a finished send frees
 *   its slot before its outcome is written: the send's fiber ends there and
 *   the settle loop does the rest for the whole batch. Sent-but-unrecorded
 *   deliveries of a target stay within twice `perTarget` (what a crash can
 *   make arrive twice). While
 *   outcomes cannot be written at all, nothing more starts or is claimed,
 *   and they are kept and written as soon as the database answers again.
 * - Groups: targets sharing a destination host (per organization) share
 *   `perGroup` sends in flight, beyond which each may still have one.
 * - Give back: a claimed delivery that waited here too long to still finish
 *   within its lease, or whose target began to cool down, is released unsent
 *   (its attempt not counted); so is everything waiting at shutdown.
 *
 * When nothing is due the loop sleeps until a wakeup, the next due instant,
 * or the poll interval.
 *
 * Which waiting delivery may start is decided by `Admission.ts` (a model
 * with no clock or fibers, property-tested); this file is its Effect shell:
 * claims, sends, settles, releases, and the time from `Clock`.
 */
import { Cause, Clock, Duration, Effect, Exit, FiberSet, Latch, Option } from "effect"
import { Metrics } from "../observability/Metrics.ts"
import { Wakeups } from "../platform/Wakeups.ts"
import { Admission, type Entry } from "./Admission.ts"
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
  /** Deliveries of one healthy target in flight at once in this process. */
  readonly perTarget: number
  /**
   * Most deliveries of one target claimed at once, all processes together
   * (in flight, waiting here to start, or being recorded). Defaults to
   * `perTarget`: then nothing waits here, and `perTarget` also bounds the
   * target's sends across processes.
   */
  readonly prefetch?: number | undefined
  /** Longer than the slowest `handle`: a lease that runs out lets another process send again. */
  readonly leaseFor: Duration.Input
  /** The longest a `handle` may take; a waiting delivery with less lease left than this (and a margin) is given back. */
  readonly handleTimeout?: Duration.Input | undefined
  /** Longest sleep when nothing is due (the cross-process fallback when no wakeup arrives). */
  readonly pollEvery: Duration.Input
  readonly cooldown?: CooldownPolicy | undefined
  /**
   * Targets that share a bound (webhook endpoints of one organization on one
   * destination host): at most `perGroup` of their deliveries in flight at
   * once in this process, except that a target with none in flight may
   * always start one (so at most `perGroup` + targets − 1). Asked once per
   * claimed target and claim.
   */
  readonly group?: ((delivery: Claimed) => Effect.Effect<string | undefined, never, R>) | undefined
  readonly perGroup?: number | undefined
  /** Sends one delivery and says how it went; it should not fail (a defect is recorded as a retry). */
  readonly handle: (delivery: Claimed) => Effect.Effect<Settlement, never, R>
}

/** Most settlements written in one statement. */
const SETTLE_BATCH = 256

/** How long a settle batch may wait for more outcomes while sends are finishing. */
const SETTLE_LINGER = Duration.millis(5)

/** How often to look again when due work is blocked by per-target limits or other processes' locks. */
const BLOCKED_RECHECK_MS = 200

/** After a defect in `handle`, try the delivery again this much later. */
const DEFECT_RETRY = Duration.seconds(30)

/** Sends of a target whose latest attempt failed. */
const FAILING_TARGET_SENDS = 1

/** Retrying a settle the database did not answer: first after this, doubling up to the maximum. */
const SETTLE_RETRY_MIN_MS = 50
const SETTLE_RETRY_MAX_MS = 1_000

/** Failed tries of one settle batch, while the database answers otherwise, before it is given up. */
const SETTLE_REFUSALS = 3

/** Longest a stopping worker waits for sends under way and their outcomes. */
const SHUTDOWN_GRACE_MAX_MS = 10_000
const SHUTDOWN_POLL = Duration.millis(10)

/** A delivery may always wait this long here for its turn (lease permitting: see `maxWaitMs`). */
const MIN_WAIT_MS = 1_000

/** Time kept back beyond `handleTimeout` for recording the outcome before the lease ends. */
const SETTLE_MARGIN_MS = 2_000

/** Runs the loop in a fiber of the current scope. */
export const runWorker = <R>(options: WorkerOptions<R>) =>
  Effect.gen(function*() {
    const queue = yield* DeliveryQueue
    const wakeups = yield* Wakeups
    const metrics = yield* Metrics
    const fork = yield* FiberSet.makeRuntime<R>()
    const leaseMs = Duration.toMillis(options.leaseFor)
    const pollMs = Duration.toMillis(options.pollEvery)
    const handleMs = Duration.toMillis(options.handleTimeout ?? Duration.millis(leaseMs / 2))
    // Waiting here only makes sense if a delivery can still start some time
    // after its claim and finish within its lease. Otherwise the loop claims
    // only what it can start at once, and a failing target is not held back.
    const prefetching = handleMs + SETTLE_MARGIN_MS < leaseMs / 2 && (options.prefetch ?? 0) > options.perTarget
    const prefetch = prefetching ? options.prefetch! : options.perTarget
    /**
     * The longest a delivery may wait here before it must be given back (at
     * the shortest lease allowed, a second of the recording margin).
     */
    const maxWaitMs = Math.max(leaseMs - handleMs - SETTLE_MARGIN_MS, MIN_WAIT_MS)
    const perGroup = options.perGroup ?? Number.POSITIVE_INFINITY
    /** Claimed and not started, at most (beyond this the claim waits). */
    const holdLimit = Math.max(options.concurrency, prefetch) * 2
    /** Claim more for a busy target once fewer than this wait here. */
    const lowWater = Math.max(1, Math.floor(prefetch / 4))

    // --- local state (this process's view; the database stays the truth)
    const admission = new Admission<Claimed>({
      concurrency: options.concurrency,
      perTarget: options.perTarget,
      perFailingTarget: FAILING_TARGET_SENDS,
      perGroup,
      maxWaitMs
    })
    let toRelease: Array<Claimed> = []
    /** Something changed that may make a claim find more (new work, room freed, a claim that was full). */
    let moreMayBeDue = true
    /** Shutting down: nothing more starts. */
    let closing = false
    /**
     * The last outcome could not be written (the database is unreachable):
     * nothing more starts, since what is sent now could not be recorded
     * either and would be sent again. A statement that works clears it.
     */
    let recordingFails = false
    const changed = Latch.makeUnsafe(false)
    const poke = () => changed.openUnsafe()

    // --- settling in batches
    //
    // An outcome this process knows is never dropped because the database
    // did not answer: the batch stays here and is written as soon as the
    // database answers again (typically well within the lease), so a
    // delivery is sent twice only if this process stops before that. Only a
    // batch the database refuses while it answers other statements (a
    // statement that cannot succeed) is given up, after a few tries: its
    // deliveries are then sent again once their leases run out.
    //
    // A send's fiber ends with its send: its outcome waits here, and the
    // settle loop does the rest for the whole batch (counts what the
    // database held, warns of lost leases, frees the target's unrecorded
    // room) instead of one fiber per delivery waiting for its statement.
    const settling: Array<{ readonly item: SettleItem; readonly target: string }> = []
    const settleWanted = Latch.makeUnsafe(false)
    /** The settle loop lingers for more outcomes; `settleUrgent` ends that early. */
    let lingering = false
    const settleUrgent = Latch.makeUnsafe(false)
    let settleBackoffMs = SETTLE_RETRY_MIN_MS
    let refusals = 0
    /** The batch's outcomes are written (`held`: which ones the database took) or given up: their room is free again. */
    const settled = (
      batch: ReadonlyArray<{ readonly item: SettleItem; readonly target: string }>,
      held: ReadonlyArray<boolean> | Cause.Cause<unknown>
    ) =>
      Effect.suspend(() => {
        const lost: Array<string> = []
        if (Cause.isCause(held)) {
          // Given up: say so of each delivery, instead of letting it wait unseen.
          const error = Cause.squash(held)
          for (const { target } of batch) admission.recorded(target)
          moreMayBeDue = true
          poke()
          return Effect.andThen(
            Effect.forEach(batch, ({ item }) =>
              Effect.logError("recording a delivery outcome failed; it is retried once its lease runs out", error).pipe(
                Effect.annotateLogs({ delivery_id: item.claimed.id, org_id: item.claimed.orgId })
              ), { discard: true }),
            pump
          )
        }
        batch.forEach((entry, i) => {
          const { item } = entry
          if (held[i] === true) {
            // Counted once recorded: what the database says happened.
            metrics.deliveryAttempt(options.kind, item.outcome._tag, item.attempt.durationMs)
          } else {
            lost.push(item.claimed.id)
          }
          admission.recorded(entry.target)
        })
        // Settled leases no longer count against their targets' claim limits.
        moreMayBeDue = true
        poke()
        return lost.length === 0 ? pump : Effect.andThen(
          Effect.forEach(lost, (id) =>
            Effect.logWarning("delivery lease lost before settling; the outcome was not recorded").pipe(
              Effect.annotateLogs({ delivery_id: id })
            ), { discard: true }),
          pump
        )
      })
    yield* Effect.gen(function*() {
      yield* settleWanted.await
      settleWanted.closeUnsafe()
      // While sends are still finishing, let a few more join the batch: one
      // statement for many outcomes leaves the database to the others. Not
      // when a delivery waits only for outcomes to be recorded: lingering
      // would hold its target's sends back (the linger used to cap a busy
      // endpoint at its unrecorded bound per linger, ~4 000/s).
      if (
        admission.inFlight > 0 && settling.length < SETTLE_BATCH / 4 && !recordingFails && !admission.waitsForRecording()
      ) {
        lingering = true
        settleUrgent.closeUnsafe()
        yield* settleUrgent.await.pipe(Effect.timeoutOption(SETTLE_LINGER))
        lingering = false
      }
      while (settling.length > 0) {
        const batch = settling.slice(0, SETTLE_BATCH)
        const exit = yield* Effect.exit(queue.settleMany(batch.map((entry) => entry.item)))
        if (Exit.isSuccess(exit)) {
          settling.splice(0, batch.length)
          const result = exit.value
          if (recordingFails) {
            yield* Effect.logInfo("delivery outcomes are recorded again").pipe(
              Effect.annotateLogs({ kind: options.kind, recorded: batch.length })
            )
          }
          recordingFails = false
          refusals = 0
          settleBackoffMs = SETTLE_RETRY_MIN_MS
          if (result.coolingFor.size > 0) {
            const now = yield* Clock.currentTimeMillis
            const until = new Map<string, number>()
            for (const [target, left] of result.coolingFor) until.set(target, now + Duration.toMillis(left))
            admission.coolDown(until, now)
          }
          yield* settled(batch, result.held)
        } else {
          const reachable = yield* queue.reachable.pipe(Effect.orElseSucceed(() => false))
          if (reachable && ++refusals >= SETTLE_REFUSALS) {
            // The database answers but refuses this batch: give it up. Its
            // deliveries stay `sending` until their leases run out, then
            // they are sent again.
            settling.splice(0, batch.length)
            refusals = 0
            recordingFails = false
            yield* Effect.logError(
              "the database refused to record delivery outcomes; they are sent again once their leases run out",
              Cause.squash(exit.cause)
            ).pipe(Effect.annotateLogs({ kind: options.kind, given_up: batch.length }))
            yield* settled(batch, exit.cause)
          } else {
            if (!recordingFails) {
              yield* Effect.logError(
                "recording delivery outcomes failed; they are kept here and recorded as soon as the database answers",
                Cause.squash(exit.cause)
              ).pipe(Effect.annotateLogs({ kind: options.kind, waiting: settling.length }))
            }
            // Nothing more starts meanwhile (see `pump`), nothing is claimed.
            recordingFails = true
            yield* Effect.sleep(Duration.millis(settleBackoffMs))
            settleBackoffMs = Math.min(SETTLE_RETRY_MAX_MS, settleBackoffMs * 2)
          }
        }
        // Settled or released leases no longer count against their targets' claim limits.
        moreMayBeDue = true
        poke()
      }
    }).pipe(Effect.forever, Effect.forkScoped)

    const defectSettlement = (delivery: Claimed, cause: Cause.Cause<unknown>) =>
      Effect.logError("delivery handler failed; retrying later", Cause.squash(cause)).pipe(
        Effect.annotateLogs({ delivery_id: delivery.id, org_id: delivery.orgId }),
        Effect.as({
          outcome: Outcome.retry(DEFECT_RETRY, "internal error"),
          attempt: { error: "internal error", durationMs: 0 }
        } satisfies Settlement)
      )

    const process = (entry: Entry<Claimed>) => {
      const delivery = entry.item
      return options.handle(delivery).pipe(
        Effect.catchCause((cause) => defectSettlement(delivery, cause)),
        Effect.onExit((exit) =>
          Effect.suspend(() => {
            // The slot is free once the send is over (the outcome is written
            // after, by the settle loop), and the next waiting delivery
            // starts at once, whatever the claim loop is doing.
            if (Exit.isSuccess(exit)) {
              const { attempt, outcome } = exit.value
              admission.sendEnded(entry, outcome._tag === "Retry" || outcome._tag === "Failed")
              settling.push({ item: { claimed: delivery, outcome, attempt, cooldown: options.cooldown }, target: entry.target })
              settleWanted.openUnsafe()
            } else {
              admission.sendEnded(entry, undefined)
            }
            return Effect.andThen(pump, Effect.sync(() => {
              // What could start has started: if something now waits only
              // for outcomes to be recorded, record them without lingering.
              if (lingering && admission.waitsForRecording()) settleUrgent.openUnsafe()
              // The claim loop runs again only when it has something to do
              // (a claim, a give-back, or going idle), not after every send.
              if (toRelease.length > 0 || shouldClaim() || (admission.inFlight === 0 && admission.waiting === 0)) poke()
            }))
          })
        )
      )
    }

    /** Starts what may start now, target by target in turn; sets aside what must be given back. */
    const pump: Effect.Effect<void> = Effect.flatMap(Clock.currentTimeMillis, (now) =>
      Effect.sync(() => {
        const decision = admission.admit(now, closing || recordingFails)
        for (const item of decision.giveBack) toRelease.push(item)
        // Forked after the decision: a fiber that runs (and ends) at once
        // asks the model again, which is already consistent.
        for (const entry of decision.start) fork(process(entry))
      }))

    const releaseSetAside = Effect.suspend(() => {
      if (toRelease.length === 0) return Effect.void
      const batch = toRelease
      toRelease = []
      return queue.release(batch).pipe(
        Effect.andThen(Effect.sync(() => {
          moreMayBeDue = true
        })),
        // Not given back now: try again next time (or their leases run out).
        Effect.onError(() => Effect.sync(() => toRelease.push(...batch)))
      )
    })

    const claim = Effect.gen(function*() {
      const waitingCount = admission.waiting
      const limit = Math.max(
        0,
        prefetching ? holdLimit - waitingCount : options.concurrency - admission.inFlight - waitingCount
      )
      const claimedAt = yield* Clock.currentTimeMillis
      moreMayBeDue = false
      const claimed = yield* queue.claim(options.kind, {
        limit,
        leaseFor: options.leaseFor,
        perTarget: prefetch,
        perFailingTarget: FAILING_TARGET_SENDS,
        // Targets whose group is at its bound here: what this process could
        // not start is left to the others (or to a later claim).
        skipTargets: admission.saturatedTargets()
      })
      const groups = new Map<string, string | undefined>()
      if (options.group !== undefined) {
        for (const delivery of claimed) {
          if (groups.has(delivery.targetId)) continue
          groups.set(delivery.targetId, yield* options.group(delivery).pipe(Effect.catchCause(() => Effect.succeed(undefined))))
        }
      }
      admission.add(claimed.map((delivery) => ({
        item: delivery,
        target: delivery.targetId,
        group: groups.get(delivery.targetId),
        claimedAt,
        failing: delivery.targetFailures > 0
      })))
      // A full claim may have left more behind.
      if (claimed.length >= limit && limit > 0) moreMayBeDue = true
      return claimed.length
    })

    // Claim when there is room to start something and reason to think a
    // claim finds work: something changed (a wakeup, a settled or released
    // delivery, a full claim) and what waits here is running low. A wakeup
    // claims at once even when plenty waits: the new work may be another
    // target's, blocked behind nothing.
    let woken = true
    // While outcomes wait to be recorded, nothing is claimed: the settle
    // loop's retries are the probe that says when the database is back, and
    // they go first (a claim could take over this process's own leases).
    const shouldClaim = () => {
      const waitingCount = admission.waiting
      return !recordingFails &&
        admission.inFlight + (prefetching ? 0 : waitingCount) < options.concurrency && waitingCount < holdLimit &&
        (woken || (moreMayBeDue && waitingCount < lowWater))
    }

    const wake = wakeups.wait(wakeTopic(options.kind), Duration.infinity).pipe(
      Effect.andThen(Effect.sync(() => {
        woken = true
      }))
    )

    const idle = Effect.gen(function*() {
      if (admission.inFlight > 0 || admission.waiting > 0 || settling.length > 0) {
        // Something is under way: its end (or new work, or a short recheck) is the next event.
        yield* Effect.raceFirst(wake, changed.await).pipe(
          Effect.timeoutOption(Duration.millis(Math.min(pollMs, BLOCKED_RECHECK_MS))),
          Effect.andThen((result) =>
            Effect.sync(() => {
              if (Option.isNone(result)) woken = true
            })
          )
        )
        return
      }
      const next = yield* queue.nextDue(options.kind)
      const now = yield* Clock.currentTimeMillis
      const untilDue = Option.match(next, {
        onNone: () => pollMs,
        // Due now but the claim did not take it (other processes hold the
        // rows, or its target is at its limit): look again shortly.
        onSome: (at) => {
          const wait = at.getTime() - now
          return wait <= 0 ? BLOCKED_RECHECK_MS : Math.min(pollMs, wait)
        }
      })
      yield* Effect.raceFirst(wake, changed.await).pipe(
        Effect.timeoutOption(Duration.millis(untilDue)),
        Effect.andThen(() =>
          Effect.sync(() => {
            woken = true
          })
        )
      )
    })

    const step = Effect.gen(function*() {
      changed.closeUnsafe()
      yield* pump
      yield* releaseSetAside
      if (shouldClaim()) {
        woken = false
        const taken = yield* claim
        yield* pump
        yield* releaseSetAside
        if (taken > 0) return
      }
      yield* idle
    })

    // At shutdown, what waits here goes back at once instead of after its lease.
    yield* Effect.addFinalizer(() =>
      Effect.suspend(() => {
        closing = true
        const rest = [...toRelease, ...admission.takeAllWaiting()]
        toRelease = []
        return queue.release(rest).pipe(
          Effect.timeout(Duration.seconds(2)),
          Effect.ignore,
          // Sends under way may finish and their outcomes be recorded: a
          // stopping process then leaves nothing to be sent twice, unless
          // this grace runs out first.
          Effect.andThen(
            Effect.gen(function*() {
              while (admission.inFlight > 0 || settling.length > 0) yield* Effect.sleep(SHUTDOWN_POLL)
            }).pipe(Effect.timeout(Duration.millis(Math.min(handleMs + SETTLE_MARGIN_MS, SHUTDOWN_GRACE_MAX_MS))), Effect.ignore)
          )
        )
      })
    )

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
