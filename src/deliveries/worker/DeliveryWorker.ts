/**
 * Folder `worker/`: the process side of the queue, free of SQL (it calls
 * `DeliveryQueue`): this loop, `Admission.ts` (which claimed delivery may
 * start), `ClaimSides.ts` (which statements a claim runs), and a file per loop.
 * `DirectStart.ts` is the send without a fiber of its own beside
 * `Start.ts`.
 *
 * The loop that sends deliveries of one kind; the database is the source of
 * truth, so any number of processes can run it for the same kind. This file
 * wires the loops and runs the step loop: each step starts what may start
 * (`Start.ts`), gives back what must go back, claims when there is room and
 * reason to (`Claim.ts`), and otherwise waits; the settle loop writes
 * outcomes in batches (`Settle.ts`, `Outcomes.ts`).
 *
 * Giving back: claimed deliveries set aside (their target began to cool
 * down, or they waited too long to still finish within their lease) are
 * released unsent, their attempt not counted. At shutdown everything
 * waiting here goes back at once instead of after its lease, and sends
 * under way get a grace to finish and be recorded, so a stopping process
 * leaves nothing to be sent twice unless the grace runs out first.
 *
 * Waiting for the next event when a step claimed nothing: while something
 * is under way, its end, a wakeup or a short recheck (due work may be
 * blocked by per-target limits or other processes' locks); otherwise a
 * wakeup, the next due instant the database reports (a rate-limited
 * target's next token included; the empty claim's own answer when it
 * just ran), or the poll interval.
 */
import { Cause, Clock, Duration, Effect, FiberSet, Option, Queue } from "effect"
import { Topics, Wakeups } from "../../database/Wakeups.ts"
import { Metrics } from "../../observability/Metrics.ts"
import { type Claimed, type DeliveryKind, DeliveryQueue } from "../DeliveryQueue.ts"
import { Admission } from "./Admission.ts"
import { makeClaim } from "./Claim.ts"
import { mayBeAnywhere, woken, wokenForLog } from "./ClaimSides.ts"
import { FAILING_TARGET_SENDS, type LimitOptions, limitsOf, SETTLE_MARGIN_MS } from "./Limits.ts"
import { makeOutcomes, type SignalledTarget } from "./Outcomes.ts"
import { makeSettler } from "./Settle.ts"
import { makePump, type StartOptions } from "./Start.ts"
import { makeState, somethingChanged } from "./State.ts"

/** Longest a stopping worker waits for sends under way and their outcomes. */
const SHUTDOWN_GRACE_MAX_MS = 10_000
const SHUTDOWN_POLL = Duration.millis(10)
/** Longest the shutdown's release may take. */
const SHUTDOWN_RELEASE = Duration.seconds(2)

/** How often to look again when due work is blocked by per-target limits or other processes' locks. */
const BLOCKED_RECHECK_MS = 200

/** The loop's options: its limits (`Limits.ts`) and how it sends (`Start.ts`), each described there. */
export interface WorkerOptions<R> extends LimitOptions, Pick<StartOptions<R>, "handle" | "handleDirect" | "cooldown"> {
  readonly kind: DeliveryKind
  /**
   * Targets that share a bound (`Claimed.targetGroup`, set by
   * `DeliveryQueue.setGroup`; webhook endpoints of one organization on one
   * destination host): at most `perGroup` of their deliveries in flight at
   * once in this process, except that a target with none in flight may
   * always start one (so at most `perGroup` + targets − 1).
   */
  readonly perGroup?: number | undefined
}

/** What recorded attempts' signals wait in at most (batches): past it the settle loop waits for the taker. */
const SIGNAL_BATCHES = 64

/**
 * Runs the loop in a fiber of the current scope. Answers `signals`: what
 * recorded attempts say of their targets (`TargetSignal`), once per target
 * and batch, after the batch is written, with the consecutive failures the
 * settle recorded. A kind whose settlements carry signals (webhooks) takes
 * them; others never see one offered.
 */
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
    const signals = yield* Queue.bounded<ReadonlyArray<SignalledTarget>>(SIGNAL_BATCHES)
    const settler = yield* makeSettler(queue, {
      kind: options.kind,
      settled: makeOutcomes(options.kind, state, metrics, startWaiting, signals),
      mayLinger: () => admission.inFlight > 0 && !admission.waitsForRecording(),
      changed: (logWaiting, rowsChanged) => somethingChanged(state, logWaiting, rowsChanged)
    })
    const { claim, shouldClaim } = makeClaim(queue, state, settler, limits, options, startWaiting)
    const pump = makePump(state, settler, { ...options, fork, clock, wantsClaim: shouldClaim })
    // Releases what was set aside; what the database did not take is tried
    // again next time (or its lease runs out).
    const release = Effect.suspend(() => {
      if (state.toRelease.length === 0) return Effect.void
      const batch = state.toRelease
      state.toRelease = []
      return queue.release(batch).pipe(
        Effect.andThen(Effect.sync(() => {
          state.moreMayBeDue = true
          mayBeAnywhere(state)
        })),
        Effect.onError(() => Effect.sync(() => state.toRelease.push(...batch)))
      )
    })

    const next = Effect.raceAll([
      wakeups.wait(Topics.deliveries(options.kind), Duration.infinity).pipe(
        Effect.andThen(Effect.sync(() => {
          woken(state)
        }))
      ),
      wakeups.wait(Topics.deliveryLog(options.kind), Duration.infinity).pipe(
        Effect.andThen(Effect.sync(() => {
          wokenForLog(state)
        }))
      ),
      state.changed.await
    ])
    const idle = Effect.gen(function*() {
      if (admission.inFlight > 0 || admission.waiting > 0 || settler.pending() > 0) {
        // Something is under way: its end (or new work, or a short recheck) is the next event.
        const result = yield* next.pipe(
          Effect.timeoutOption(Duration.millis(Math.min(limits.pollMs, BLOCKED_RECHECK_MS)))
        )
        if (Option.isNone(result)) woken(state)
        return
      }
      // The claim just before may have answered it: unless something
      // changed since (a settle, a release), it stands.
      const known = state.moreMayBeDue ? undefined : state.nextDue
      state.nextDue = undefined
      const due = known ?? (yield* queue.nextDue(options.kind))
      const now = yield* Clock.currentTimeMillis
      const untilDue = Option.match(due, {
        onNone: () => limits.pollMs,
        // Due now but the claim did not take it (other processes hold the
        // rows, or its target is at its limit): look again shortly.
        onSome: (at) => {
          const wait = at.getTime() - now
          return wait <= 0 ? BLOCKED_RECHECK_MS : Math.min(limits.pollMs, wait)
        }
      })
      // A wakeup says itself what may have more; the time running out, anything.
      const result = yield* next.pipe(Effect.timeoutOption(Duration.millis(untilDue)))
      if (Option.isNone(result)) woken(state)
    })

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

    // Give back what waits, then let sends under way finish and be recorded.
    yield* Effect.addFinalizer(() => {
      state.closing = true
      const rest = [...state.toRelease, ...admission.takeAllWaiting()]
      state.toRelease = []
      return queue.release(rest).pipe(
        Effect.timeout(SHUTDOWN_RELEASE),
        Effect.ignore,
        Effect.andThen(
          Effect.gen(function*() {
            while (admission.inFlight > 0 || settler.pending() > 0) yield* Effect.sleep(SHUTDOWN_POLL)
          }).pipe(
            Effect.timeout(Duration.millis(Math.min(limits.handleMs + SETTLE_MARGIN_MS, SHUTDOWN_GRACE_MAX_MS))),
            Effect.ignore
          )
        )
      )
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
    return { signals: signals as Queue.Dequeue<ReadonlyArray<SignalledTarget>> }
  })
