/**
 * Waiting for the next event when a step claimed nothing: while something
 * is under way, its end, a wakeup or a short recheck (due work may be
 * blocked by per-target limits or other processes' locks); otherwise a
 * wakeup, the next due instant the database reports (a rate-limited
 * target's next token included), or the poll interval.
 */
import { Clock, Duration, Effect, Option } from "effect"
import { Topics, Wakeups } from "../../database/Wakeups.ts"
import type { DeliveryQueue } from "../DeliveryQueue.ts"
import type { DeliveryKind } from "../Types.ts"
import type { Limits } from "./Limits.ts"
import type { Settler } from "./Settle.ts"
import type { WorkerState } from "./State.ts"

/** How often to look again when due work is blocked by per-target limits or other processes' locks. */
const BLOCKED_RECHECK_MS = 200

export const makeIdle = (
  kind: DeliveryKind,
  queue: DeliveryQueue["Service"],
  wakeups: Wakeups["Service"],
  state: WorkerState,
  settler: Settler,
  limits: Limits
) => {
  const wake = wakeups.wait(Topics.deliveries(kind), Duration.infinity).pipe(
    Effect.andThen(Effect.sync(() => {
      state.woken = true
    }))
  )
  const next = Effect.raceFirst(wake, state.changed.await)
  return Effect.gen(function*() {
    if (state.admission.inFlight > 0 || state.admission.waiting > 0 || settler.pending() > 0) {
      // Something is under way: its end (or new work, or a short recheck) is the next event.
      const result = yield* next.pipe(Effect.timeoutOption(Duration.millis(Math.min(limits.pollMs, BLOCKED_RECHECK_MS))))
      if (Option.isNone(result)) state.woken = true
      return
    }
    const due = yield* queue.nextDue(kind)
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
    yield* next.pipe(Effect.timeoutOption(Duration.millis(untilDue)))
    state.woken = true
  })
}
