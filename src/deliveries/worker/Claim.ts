/**
 * Claiming: when there is room to start something and reason to think a
 * claim finds work (something changed: a wakeup, a settled or released
 * delivery, a full claim; and what waits here is running low), one claim
 * statement takes leases on up to the room left (asking the log and the
 * per-row statement only when either may find something, `ClaimSides.ts`), and the claimed
 * deliveries wait in the admission model, each under the bound its target
 * shares (`Claimed.targetGroup`, read with the claim). A
 * wakeup claims at once even when plenty waits: the new work may be
 * another target's, blocked behind nothing.
 *
 * While outcomes wait to be recorded nothing is claimed: the settle loop's
 * retries are the probe that says when the database is back, and they go
 * first (a claim could take over this process's own leases).
 */
import { Clock, type Duration, Effect } from "effect"
import type { DeliveryQueue } from "../DeliveryQueue.ts"
import type { Claimed, DeliveryKind } from "../Types.ts"
import { claimLeft, takeLogWanted, takeRowsWanted } from "./ClaimSides.ts"
import { FAILING_TARGET_SENDS, type Limits } from "./Limits.ts"
import type { Settler } from "./Settle.ts"
import type { WorkerState } from "./State.ts"

export interface ClaimLoopOptions {
  readonly kind: DeliveryKind
  readonly concurrency: number
  readonly leaseFor: Duration.Input
}

export const makeClaim = (
  queue: DeliveryQueue["Service"],
  state: WorkerState,
  settler: Settler,
  limits: Limits,
  options: ClaimLoopOptions
) => {
  const { admission } = state

  const shouldClaim = () => {
    const waiting = admission.waiting
    return !settler.failing() &&
      admission.inFlight + (limits.prefetching ? 0 : waiting) < options.concurrency && waiting < limits.holdLimit &&
      (state.woken || (state.moreMayBeDue && waiting < limits.lowWater))
  }

  /** One claim; answers how many deliveries it took. */
  const claim = Effect.gen(function*() {
    const waiting = admission.waiting
    const limit = Math.max(
      0,
      limits.prefetching ? limits.holdLimit - waiting : options.concurrency - admission.inFlight - waiting
    )
    const claimedAt = yield* Clock.currentTimeMillis
    state.moreMayBeDue = false
    const log = takeLogWanted(state)
    const rows = takeRowsWanted(state, claimedAt)
    const skipTargets = admission.saturatedTargets()
    const answer = yield* queue.claimOrNextDue(options.kind, {
      limit,
      leaseFor: options.leaseFor,
      perTarget: limits.prefetch,
      perFailingTarget: FAILING_TARGET_SENDS,
      // Targets whose group is at its bound here: what this process could
      // not start is left to the others (or to a later claim).
      skipTargets,
      log,
      rows
    })
    const { claimed } = answer
    // The per-row statement not run: its last answer is this claim's.
    state.nextDue = claimed.length === 0 && !answer.rows.ran ? state.rowsNextDue : answer.nextDue
    admission.add(claimed.map((delivery: Claimed) => ({
      item: delivery,
      target: delivery.targetId,
      group: delivery.targetGroup,
      claimedAt,
      failing: delivery.targetFailures > 0
    })))
    // A full claim may have left more behind.
    const full = claimed.length >= limit && limit > 0
    if (full) state.moreMayBeDue = true
    claimLeft(state, full, skipTargets.length > 0, answer.rows)
    return claimed.length
  })

  return { shouldClaim, claim }
}
