/**
 * Folder `worker/`: the process side of the queue, free of SQL (it calls
 * `DeliveryQueue`): this loop, `Admission.ts` (which claimed delivery may
 * start), and a file per loop. `DirectStart.ts` is the send without a fiber
 * of its own beside `Start.ts`.
 *
 * The loop that sends deliveries of one kind; the database is the source of
 * truth, so any number of processes can run it for the same kind. This file
 * wires the loops and runs the step loop: each step starts what may start
 * (`Start.ts`), gives back what must go back (`GiveBack.ts`), claims when
 * there is room and reason to (`Claim.ts`), and otherwise waits (`Idle.ts`);
 * the settle loop writes outcomes in batches (`Settle.ts`, `Outcomes.ts`).
 */
import { Cause, Clock, Effect, FiberSet } from "effect"
import { Metrics } from "../../observability/Metrics.ts"
import { Wakeups } from "../../database/Wakeups.ts"
import { Admission } from "./Admission.ts"
import { type Claimed, type CooldownPolicy, type DeliveryKind, DeliveryQueue, type Settlement } from "../DeliveryQueue.ts"
import type { DirectHandle } from "./DirectStart.ts"
import { makeClaim } from "./Claim.ts"
import { releaseSetAside, shutdown } from "./GiveBack.ts"
import { makeIdle } from "./Idle.ts"
import { FAILING_TARGET_SENDS, type LimitOptions, limitsOf } from "./Limits.ts"
import { makeOutcomes } from "./Outcomes.ts"
import { makeSettler } from "./Settle.ts"
import type { SignalledTarget } from "./Outcomes.ts"
import { makePump } from "./Start.ts"
import { makeState, somethingChanged } from "./State.ts"

export type { Settlement } from "../Types.ts"
export type { SignalledTarget } from "./Outcomes.ts"

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
  /**
   * Applies what recorded attempts say of their targets (`TargetSignal`),
   * once per target and batch, after the batch is written: the recorded
   * consecutive failures are the settle's. A failure here is logged; the
   * outcomes stay recorded.
   */
  readonly health?: ((signals: ReadonlyArray<SignalledTarget>) => Effect.Effect<void>) | undefined
  /** Offered each delivery before `handle`: a send without a fiber of its own, when it takes it (`src/deliveries/worker/DirectStart.ts`). */
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
      settled: makeOutcomes(options.kind, state, metrics, startWaiting, options.health),
      mayLinger: () => admission.inFlight > 0 && !admission.waitsForRecording(),
      changed: () => somethingChanged(state)
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
