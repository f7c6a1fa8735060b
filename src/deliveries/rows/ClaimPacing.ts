/**
 * How often a claim that the log already fed also runs the per-row claim
 * (retries, replays, released rows, strict targets' heads, leases that ran
 * out): at once while it finds something, and otherwise at most every
 * `ROW_CLAIM_EVERY_MS`. A claim the log gave nothing always runs it.
 *
 * Speeds up: during a burst to a concurrent endpoint every claim ran the
 * per-row statement after the log's take and found nothing, about 470 µs of
 * the server's CPU each (`bench/notes/delivery-log.md`, "What was cut"). A
 * row on its own becomes due at most that much later while the log keeps
 * the worker busy.
 */

/** Longest a due row on its own waits for the per-row claim while the log keeps claims fed. */
export const ROW_CLAIM_EVERY_MS = 100

export interface RowClaimPacing {
  /** When the last per-row claim found nothing (epoch ms), while nothing was found since. */
  emptyAt: number | undefined
}

export const makeRowClaimPacing = (): RowClaimPacing => ({ emptyAt: undefined })

/** Whether this claim runs the per-row statement, `fromLog` rows having come from the log. */
export const rowClaimDue = (pacing: RowClaimPacing, now: number, fromLog: number): boolean =>
  fromLog === 0 || pacing.emptyAt === undefined || now - pacing.emptyAt >= ROW_CLAIM_EVERY_MS

/** What the per-row statement found. */
export const rowClaimRan = (pacing: RowClaimPacing, now: number, found: number): void => {
  pacing.emptyAt = found > 0 ? undefined : now
}
