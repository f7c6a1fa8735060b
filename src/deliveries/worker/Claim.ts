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
import type { ClaimAnswer } from "../Leases.ts"
import { type Claimed, type ClaimOptions, type DeliveryKind, LOGGED_KINDS } from "../Types.ts"
import { claimLeft, rowsPacedIn, takeLogWanted, takeRowsWanted } from "./ClaimSides.ts"
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
  options: ClaimLoopOptions,
  /** Starts what may start now (`Start.ts`). */
  startWaiting: Effect.Effect<void>
) => {
  const { admission } = state
  const logged = LOGGED_KINDS.includes(options.kind)

  const shouldClaim = () => {
    const waiting = admission.waiting
    return !settler.failing() &&
      admission.inFlight + (limits.prefetching ? 0 : waiting) < options.concurrency && waiting < limits.holdLimit &&
      (state.woken || (state.moreMayBeDue && waiting < limits.lowWater))
  }

  const room = () => {
    const waiting = admission.waiting
    return Math.max(
      0,
      limits.prefetching ? limits.holdLimit - waiting : options.concurrency - admission.inFlight - waiting
    )
  }

  /** One statement of the claim on up to `limit`; answers what it took, added to the admission model. */
  const claimOne = (limit: number, claimedAt: number, sides: Pick<ClaimOptions, "log" | "rows">) =>
    Effect.gen(function*() {
      const skipTargets = admission.saturatedTargets()
      const answer = yield* queue.claimOrNextDue(options.kind, {
        limit,
        leaseFor: options.leaseFor,
        perTarget: limits.prefetch,
        perFailingTarget: FAILING_TARGET_SENDS,
        // Targets whose group is at its bound here: what this process could
        // not start is left to the others (or to a later claim).
        skipTargets,
        ...sides
      })
      admission.add(answer.claimed.map((delivery: Claimed) => ({
        item: delivery,
        target: delivery.targetId,
        group: delivery.targetGroup,
        claimedAt,
        failing: delivery.targetFailures > 0
      })))
      // A full claim, or one that skipped targets, may have left more behind.
      const full = answer.claimed.length >= limit && limit > 0
      return { answer, left: full || skipTargets.length > 0 }
    })

  /**
   * One claim; answers how many deliveries it took. The log's take and the
   * per-row statement run one after the other, and what the log handed
   * out starts before the per-row statement runs (paced when the take
   * handed something out, `ClaimSides.ts`).
   */
  const claim = Effect.gen(function*() {
    const claimedAt = yield* Clock.currentTimeMillis
    state.moreMayBeDue = false
    const log = logged && takeLogWanted(state)
    const rows = takeRowsWanted(state, claimedAt)
    let taken = 0
    let left = false
    let rowsAnswer: ClaimAnswer["rows"] = { ran: false, nextDue: undefined }
    if (log || rows) {
      const first = yield* claimOne(room(), claimedAt, { log, rows: !log })
      taken += first.answer.claimed.length
      left = first.left
      rowsAnswer = first.answer.rows
      if (log && rows) {
        yield* startWaiting
        const limit = room()
        if (limit > 0 && rowsPacedIn(state, claimedAt, taken)) {
          const second = yield* claimOne(limit, claimedAt, { log: false, rows: true })
          taken += second.answer.claimed.length
          left = left || second.left
          rowsAnswer = second.answer.rows
        }
      }
    }
    // Wanted but not run (paced, or no room left): still owed.
    if (rows && !rowsAnswer.ran) state.rowsMayHaveMore = true
    // Nothing taken: when the next delivery is due, as the per-row
    // statement answered now or (not run) last.
    state.nextDue = taken > 0 ? undefined : rowsAnswer.ran ? rowsAnswer.nextDue : state.rowsNextDue
    if (left) state.moreMayBeDue = true
    claimLeft(state, claimedAt, left, rowsAnswer)
    return taken
  })

  return { shouldClaim, claim }
}
