/**
 * When a claim asks the log (`Log.take`) and when the per-row statement
 * alone: the log only when rows of it may wait that the last claim did
 * not hand out. A wakeup or a recheck (new work may be anywhere), a
 * release, a full claim, one that skipped targets, and a settle whose
 * statement saw rows of the log waiting for its targets
 * (`Settled.logWaiting`) each say it may; a settle of successes that saw
 * none does not. The per-row statement runs either way and, taking
 * nothing, answers when the next delivery is due.
 *
 * Speeds up: under a trickle every settle was followed by a claim of the
 * log that found nothing, a statement and a transaction each. Server, 200
 * pending steps a second for 120 s, alone (`npm run bench -- latency`,
 * `pg_stat_statements`, `bench/notes/latency.md`, "Three statements fewer
 * per step"): the log's take 1.56 → 0.91 per step, transactions per step
 * 5.00 → 4.20; run again in the other order, 4.89 → 4.33, CPU per step
 * svc 1 749 → 1 670 µs and PostgreSQL 2 132 → 2 004 µs.
 */
import type { WorkerState } from "./State.ts"

/** A wakeup or a recheck: new work may be anywhere. */
export const woken = (state: WorkerState) => {
  state.woken = true
  state.logMayHaveMore = true
}

/** Whether the claim about to run asks the log; no longer, until something says it may hold more. */
export const takeLogWanted = (state: WorkerState): boolean => {
  const log = state.logMayHaveMore
  state.logMayHaveMore = false
  return log
}

/** After a claim: a full one, or one that skipped targets, left rows of the log behind. */
export const claimLeft = (state: WorkerState, full: boolean, skipped: boolean) => {
  if (full || skipped) state.logMayHaveMore = true
}
