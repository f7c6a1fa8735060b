/**
 * What a written (or given-up) settle batch means here: the outcomes the
 * database held are counted, lost leases are reported, targets the
 * database says cool down stop starting, and the batch's room is free
 * again, so the next waiting deliveries may start. What the recorded
 * attempts say of their targets, with the failures the settle counted, is
 * offered to the worker's `signals` (data the sender takes, not a call
 * into it; a full queue holds the settle loop back, as applying them did).
 */
import { Cause, Clock, Duration, Effect, Queue } from "effect"
import type { MetricsShape } from "../../observability/Metrics.ts"
import type { Claimed, DeliveryKind, Settled, TargetSignal } from "../Types.ts"
import type { Pending } from "./Settle.ts"
import { somethingChanged, type WorkerState } from "./State.ts"

/** A target's signal in a written batch: the last attempt that gave one (a `gone` wins), and its recorded failures. */
export interface SignalledTarget {
  readonly claimed: Claimed
  readonly signal: TargetSignal
  readonly failures: number
  /** The attempt's error, if it failed. */
  readonly error: string
}

const signalsOf = (batch: ReadonlyArray<Pending>, result: Settled) => {
  const byTarget = new Map<string, SignalledTarget>()
  batch.forEach(({ item }, i) => {
    if (item.signal === undefined || result.held[i] !== true) return
    const target = item.claimed.targetId
    if (byTarget.get(target)?.signal === "gone") return
    byTarget.set(target, {
      claimed: item.claimed,
      signal: item.signal,
      failures: result.failures.get(target) ?? 0,
      error: item.attempt.error ?? ""
    })
  })
  return [...byTarget.values()]
}

export const makeOutcomes = (
  kind: DeliveryKind,
  state: WorkerState,
  metrics: MetricsShape,
  /** Starts what may start now. */
  pump: Effect.Effect<void>,
  signals: Queue.Enqueue<ReadonlyArray<SignalledTarget>>
) =>
(batch: ReadonlyArray<Pending>, result: Settled | Cause.Cause<unknown>): Effect.Effect<void> =>
  Effect.suspend(() => {
    const { admission } = state
    if (Cause.isCause(result)) {
      // Given up: say so of each delivery, instead of letting it wait unseen.
      const error = Cause.squash(result)
      for (const { target } of batch) admission.recorded(target)
      somethingChanged(state)
      return Effect.andThen(
        Effect.forEach(batch, ({ item }) =>
          Effect.logError("recording a delivery outcome failed; it is retried once its lease runs out", error).pipe(
            Effect.annotateLogs({ delivery_id: item.claimed.id, org_id: item.claimed.orgId })
          ), { discard: true }),
        pump
      )
    }
    const cooling = result.coolingFor.size === 0 ? Effect.void : Effect.map(Clock.currentTimeMillis, (now) => {
      const until = new Map<string, number>()
      for (const [target, left] of result.coolingFor) {
        until.set(target, now + Duration.toMillis(left))
      }
      admission.coolDown(until, now)
    })
    const lost: Array<string> = []
    batch.forEach(({ item, target }, i) => {
      if (result.held[i] === true) {
        // Counted once recorded: what the database says happened.
        metrics.deliveryAttempt(kind, item.outcome._tag, item.attempt.durationMs)
      } else {
        lost.push(item.claimed.id)
      }
      admission.recorded(target)
    })
    somethingChanged(state, result.logWaiting !== false, result.rowsChanged !== false)
    const warnings = lost.length === 0 ?
      Effect.void :
      Effect.forEach(lost, (id) =>
        Effect.logWarning("delivery lease lost before settling; the outcome was not recorded").pipe(
          Effect.annotateLogs({ delivery_id: id })
        ), { discard: true })
    const recorded = signalsOf(batch, result)
    const offered = recorded.length === 0 ? Effect.void : Queue.offer(signals, recorded)
    return Effect.andThen(cooling, Effect.andThen(warnings, Effect.andThen(pump, offered)))
  })
