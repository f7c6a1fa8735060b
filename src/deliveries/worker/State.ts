/**
 * What one worker knows locally (the database stays the truth): the
 * admission model of what waits and what is in flight, what is set aside
 * to give back, and the flags its loops share. One object, so each loop's
 * file reads and changes the same state by name.
 */
import { Latch, type Option } from "effect"
import type { Claimed } from "../Types.ts"
import { Admission } from "./Admission.ts"

export const makeState = (admission: Admission<Claimed>) => ({
  admission,
  /** Claimed deliveries to give back unsent (cooling target, waited too long). */
  toRelease: [] as Array<Claimed>,
  /** Something changed that may make a claim find more (new work, room freed, a claim that was full). */
  moreMayBeDue: true,
  /** A wakeup arrived (or a recheck is due) since the last claim. */
  woken: true,
  /** Rows of the log may wait that the last claim did not hand out (`ClaimSides.ts`). */
  logMayHaveMore: true,
  /** Something may have made rows on their own claimable since the per-row statement last ran (`ClaimSides.ts`). */
  rowsMayHaveMore: true,
  /**
   * The last per-row statement's answer when it took nothing: when the
   * next delivery becomes claimable; undefined when it took something or
   * has not run. It stands while `rowsMayHaveMore` is false.
   */
  rowsNextDue: undefined as Option.Option<Date> | undefined,
  /** When the claim whose answer `rowsNextDue` holds ran (epoch ms); undefined with it (`ClaimSides.ts`). */
  rowsEmptyAt: undefined as number | undefined,
  /**
   * When the next delivery becomes claimable, as the last claim answered
   * when it took nothing (`DeliveryQueue.claimOrNextDue`); undefined when
   * that claim took something or did not ask. The idle wait reads it once.
   */
  nextDue: undefined as Option.Option<Date> | undefined,
  /** Shutting down: nothing more starts. */
  closing: false,
  /** Opened when the claim loop has something to look at. */
  changed: Latch.makeUnsafe(false)
})

export type WorkerState = ReturnType<typeof makeState>

/**
 * Settled or released leases no longer count against their targets' claim
 * limits: look again (the log unless `logWaiting` is false, the per-row
 * statement unless `rowsChanged` is false: `ClaimSides.ts`).
 */
export const somethingChanged = (state: WorkerState, logWaiting = true, rowsChanged = true) => {
  state.moreMayBeDue = true
  if (logWaiting) state.logMayHaveMore = true
  if (rowsChanged) state.rowsMayHaveMore = true
  state.changed.openUnsafe()
}
