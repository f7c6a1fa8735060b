/**
 * Starting sends: `pump` starts what the admission model lets start now
 * (target by target in turn) and sets aside what must be given back; each
 * started delivery runs `handle` in a fiber of its own, which ends with the
 * send. A finished send frees its slot at once and leaves its outcome to
 * the settle loop; the next waiting delivery starts then, whatever the
 * claim loop is doing.
 */
import { Cause, type Clock, Duration, Effect, Exit, type Fiber, Option } from "effect"
import { databaseUnavailable } from "../../platform/DatabaseUnavailable.ts"
import { type Claimed, type CooldownPolicy, Outcome, type Settlement } from "../Types.ts"
import type { Entry } from "./Admission.ts"
import type { DirectHandle } from "./DirectStart.ts"
import type { Settler } from "./Settle.ts"
import type { WorkerState } from "./State.ts"

/** After a defect in `handle`, try the delivery again this much later. */
const DEFECT_RETRY = Duration.seconds(30)

export interface StartOptions<R> {
  /** Sends one delivery and says how it went; it should not fail (a defect is recorded as a retry). */
  readonly handle: (delivery: Claimed) => Effect.Effect<Settlement, never, R>
  /** Offered each delivery before `handle`: a send without a fiber of its own, when it takes it (`DirectStart.ts`). */
  readonly handleDirect?: DirectHandle | undefined
  readonly cooldown?: CooldownPolicy | undefined
  /** Forks into the worker's fiber set. */
  readonly fork: (effect: Effect.Effect<Settlement, never, R>) => Fiber.Fiber<Settlement, never>
  /** The worker's clock, read when deciding what starts. */
  readonly clock: Clock.Clock
  /** Whether the claim loop has something to do after a send ended. */
  readonly wantsClaim: () => boolean
}

/**
 * What a send that died answers: given back when the database was
 * unavailable (a send that could not read its endpoint, or could not
 * record what its answer means for the endpoint's health, is no failure
 * of the receiver: counted, a database restart of a few seconds cooled
 * every endpoint down for a minute); otherwise retried later, its error
 * logged.
 */
export const defectSettlement = (delivery: Claimed, cause: Cause.Cause<unknown>) => {
  const outage = databaseUnavailable(cause)
  return (Option.isSome(outage)
    ? Effect.logWarning(`the database is unavailable (${outage.value}); the delivery is given back`).pipe(
      Effect.as(
        {
          outcome: Outcome.retry(Duration.zero, outage.value),
          attempt: { error: outage.value, durationMs: 0 },
          giveBack: true
        } satisfies Settlement
      )
    )
    : Effect.logError("delivery handler failed; retrying later", Cause.squash(cause)).pipe(
      Effect.as(
        {
          outcome: Outcome.retry(DEFECT_RETRY, "internal error"),
          attempt: { error: "internal error", durationMs: 0 }
        } satisfies Settlement
      )
    )).pipe(Effect.annotateLogs({ delivery_id: delivery.id, org_id: delivery.orgId }))
}

/**
 * `pump`: starts what may start now; nothing starts while closing or while
 * outcomes cannot be recorded. What a send's end does (free its slot, queue
 * its outcome, start the next) runs synchronously when its fiber ends, as
 * an observer of the fiber, not as more steps of it (an `Effect.onExit`
 * frame, a suspended `pump` and a clock effect per send): 11.1 → 10.1 µs
 * of CPU per delivery in process (`bench/notes/webhook-sender.md`).
 */
export const makePump = <R>(state: WorkerState, settler: Settler, options: StartOptions<R>) => {
  const { admission } = state

  /** `settlement` undefined: the send was interrupted (nothing to record). */
  const afterSend = (entry: Entry<Claimed>, settlement: Settlement | undefined) => {
    if (settlement?.giveBack === true) {
      admission.sendEnded(entry, undefined)
      state.toRelease.push(entry.item)
    } else if (settlement !== undefined) {
      const { attempt, outcome, signal } = settlement
      admission.sendEnded(entry, outcome._tag === "Retry" || outcome._tag === "Failed")
      settler.push({
        item: { claimed: entry.item, outcome, attempt, cooldown: options.cooldown, signal },
        target: entry.target
      })
    } else {
      admission.sendEnded(entry, undefined)
    }
    startNow()
    // What could start has started: if something now waits only for
    // outcomes to be recorded, record them without lingering.
    if (settler.lingering() && admission.waitsForRecording()) settler.hurry()
    // The claim loop runs again only when it has something to do (a
    // claim, a give-back, or going idle), not after every send.
    if (state.toRelease.length > 0 || options.wantsClaim() || (admission.inFlight === 0 && admission.waiting === 0)) {
      state.changed.openUnsafe()
    }
  }

  const send = (entry: Entry<Claimed>) =>
    options.handle(entry.item).pipe(Effect.catchCause((cause) => defectSettlement(entry.item, cause)))

  const startNow = () => {
    const decision = admission.admit(options.clock.currentTimeMillisUnsafe(), state.closing || settler.failing())
    for (const item of decision.giveBack) state.toRelease.push(item)
    // Forked after the decision: a fiber that runs (and ends) at once
    // asks the model again, which is already consistent.
    for (const entry of decision.start) {
      if (
        options.handleDirect !== undefined &&
        options.handleDirect(entry.item, (settlement) => afterSend(entry, settlement))
      ) {
        continue
      }
      options.fork(send(entry)).addObserver((exit) => afterSend(entry, Exit.isSuccess(exit) ? exit.value : undefined))
    }
  }

  return Effect.sync(startNow)
}
