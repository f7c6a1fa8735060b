/**
 * Folder `worker/`: the process side of the queue, free of SQL (it calls
 * `DeliveryQueue`): this loop, `Admission.ts` (which claimed delivery may
 * start), and a file per loop. `StartFast.ts` is the send without a fiber
 * of its own beside `Start.ts`.
 *
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
 *   deliveries of a target stay within `UNSETTLED_PER_TARGET` (4) times
 *   `perTarget` (what a crash can make arrive twice). While
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
 * This file wires the loops and runs the step loop.
 */
import { Cause, Clock, Effect, FiberSet } from "effect"
import { Metrics } from "../../observability/Metrics.ts"
import { Wakeups } from "../../platform/Wakeups.ts"
import { Admission } from "./Admission.ts"
import { type Claimed, type CooldownPolicy, type DeliveryKind, DeliveryQueue } from "../DeliveryQueue.ts"
import type { DirectHandle } from "./StartFast.ts"
import { makeClaim } from "./Claim.ts"
import { releaseSetAside, shutdown } from "./GiveBack.ts"
import { makeIdle } from "./Idle.ts"
import { FAILING_TARGET_SENDS, type LimitOptions, limitsOf } from "./Limits.ts"
import { makeOutcomes } from "./Outcomes.ts"
import { makeSettler } from "./Settle.ts"
import { makePump, type Settlement } from "./Start.ts"
import { makeState } from "./State.ts"

export type { Settlement }

/** The loop's options: its limits (`worker/Limits.ts`, where each is described) and what it sends with. */
export interface WorkerOptions<R> extends LimitOptions {
  readonly kind: DeliveryKind
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
  /** Offered each delivery before `handle`: a send without a fiber of its own, when it takes it (`src/deliveries/worker/StartFast.ts`). */
  readonly handleDirect?: DirectHandle | undefined
}

/** Runs the loop in a fiber of the current scope. */
export const runWorker = <R>(options: WorkerOptions<R>) =>
  Effect.gen(function*() {
    const queue = yield* DeliveryQueue
    const wakeups = yield* Wakeups
    const metrics = yield* Metrics
    const fork = yield* FiberSet.makeRuntime<R>()
    const clock = yield* Clock.Clock
    const limits = limitsOf(options)
    const state = makeState(
      new Admission<Claimed>({
        concurrency: options.concurrency,
        perTarget: options.perTarget,
        perFailingTarget: FAILING_TARGET_SENDS,
        perGroup: options.perGroup ?? Number.POSITIVE_INFINITY,
        maxWaitMs: limits.maxWaitMs
      })
    )
    const { admission } = state

    // The settle loop frees room, and freed room starts the next sends:
    // `pump` is defined after the settler it reads.
    const startWaiting: Effect.Effect<void> = Effect.suspend(() => pump)
    const settler = yield* makeSettler(queue, {
      kind: options.kind,
      settled: makeOutcomes(options.kind, state, metrics, startWaiting),
      mayLinger: () => admission.inFlight > 0 && !admission.waitsForRecording(),
      changed: () => {
        state.moreMayBeDue = true
        state.changed.openUnsafe()
      }
    })
    const { claim, shouldClaim } = makeClaim(queue, state, settler, limits, options)
    const pump = makePump(state, settler, {
      handle: options.handle,
      handleDirect: options.handleDirect,
      cooldown: options.cooldown,
      fork,
      clock,
      wantsClaim: shouldClaim
    })
    const release = releaseSetAside(queue, state)
    const idle = makeIdle(options.kind, queue, wakeups, state, settler, limits)

    const step = Effect.gen(function*() {
      state.changed.closeUnsafe()
      yield* pump
      yield* release
      if (shouldClaim()) {
        state.woken = false
        const taken = yield* claim
        yield* pump
        yield* release
        if (taken > 0) return
      }
      yield* idle
    })

    yield* Effect.addFinalizer(() => shutdown(queue, state, settler, limits))

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
