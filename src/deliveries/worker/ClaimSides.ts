/**
 * Which of its two statements a claim runs: the log's take (`Log.take`) and
 * the per-row claim (retries, replays, released rows, strict targets'
 * heads, leases run out). Each runs only when something says it may find
 * what the last claim did not hand out.
 *
 * The log: a wakeup or a recheck (new work may be anywhere), a release, a
 * full claim, one that skipped targets, and a settle whose statement saw
 * rows of the log waiting for its targets (`Settled.logWaiting`) each say
 * it may; a settle of successes that saw none does not.
 *
 * The per-row claim: when it last took nothing it answered when the next
 * delivery becomes claimable; that answer stands until a wakeup (but one
 * for new rows of the log alone, `Topics.deliveryLog`) or a recheck, a release, a full claim, one that skipped targets, a settle
 * that recorded anything but the log's successes, or one that ended a
 * target's failures or cooldown (`Settled.rowsChanged`; a settle of the
 * log's successes alone adds no row of its own and only frees room, which
 * an answer of "due now" already covers). While it stands and its instant
 * has not come, the statement is not run and the answer is the claim's
 * own. What another process changes without a wakeup (a release at its
 * shutdown) is found at the poll interval, as by an idle worker.
 *
 * When the log's take fed the claim, the per-row statement wanted after it
 * runs at once while it finds something, and otherwise at most every
 * `ROW_CLAIM_EVERY_MS` (each worker its own pace); wanted and not run, it
 * stays owed. A claim the log gave nothing always runs it.
 *
 * Speeds up: under a trickle every settle was followed by a claim; the
 * log's take and the per-row statement each found nothing, a statement
 * and a transaction apiece. Server, 200 pending steps a second for 120 s,
 * alone (`npm run bench -- latency`, `pg_stat_statements`,
 * `bench/notes/latency.md`, "Three statements fewer per step"): the
 * log's take 1.56 → 0.91 per step, transactions per step 5.00 → 4.20; run
 * again in the other order, 4.89 → 4.33, CPU per step svc 1 749 → 1 670
 * µs and PostgreSQL 2 132 → 2 004 µs. The per-row answer standing, at 50
 * pending steps a second in two runs of four alternating arms ("The
 * per-row answer stands after the log's settles"): the per-row statement
 * 1.00 → 0.21 per step, transactions per step 5.09 → 4.28; CPU per step,
 * svc and PostgreSQL together, 14 090 → 14 141 µs (arms of the same code
 * 10 % apart). Pacing the per-row statement after a take: during a burst
 * to a concurrent endpoint every claim ran it after the log's take and
 * found nothing, about 470 µs of the server's CPU each
 * (`bench/notes/delivery-log.md`, "What was cut").
 */
import { Option } from "effect"
import type { WorkerState } from "./State.ts"

/** A release (or what `woken` says): either statement may find something. */
export const mayBeAnywhere = (state: WorkerState) => {
  state.logMayHaveMore = true
  state.rowsMayHaveMore = true
}

/** A wakeup or a recheck: new work may be anywhere. */
export const woken = (state: WorkerState) => {
  state.woken = true
  mayBeAnywhere(state)
}

/** A wakeup for new rows of the log alone (`Topics.deliveryLog`): the log may hold more. */
export const wokenForLog = (state: WorkerState) => {
  state.woken = true
  state.logMayHaveMore = true
}

/** Whether the claim about to run asks the log; no longer, until something says it may hold more. */
export const takeLogWanted = (state: WorkerState): boolean => {
  const log = state.logMayHaveMore
  state.logMayHaveMore = false
  return log
}

/**
 * Whether the claim about to run asks the per-row statement at `now`
 * (epoch ms): unless the last one's answer stands and its instant is
 * still to come.
 */
export const takeRowsWanted = (state: WorkerState, now: number): boolean => {
  const standing = state.rowsNextDue
  const wanted = state.rowsMayHaveMore || standing === undefined ||
    (Option.isSome(standing) && standing.value.getTime() <= now)
  state.rowsMayHaveMore = false
  return wanted
}

/**
 * After a claim made at `now` (epoch ms): a full one, or one that skipped
 * targets, left rows behind (`left`); the per-row statement's answer when
 * it ran (`rows.nextDue`: when it took nothing, the next due instant;
 * undefined when it took something) stands for the claims after it, and
 * paces the per-row statement after a take (`rowsPacedIn`).
 */
export const claimLeft = (
  state: WorkerState,
  now: number,
  left: boolean,
  rows: { readonly ran: boolean; readonly nextDue: Option.Option<Date> | undefined }
) => {
  if (rows.ran) {
    state.rowsNextDue = rows.nextDue
    state.rowsEmptyAt = rows.nextDue === undefined ? undefined : now
  }
  if (left) mayBeAnywhere(state)
}

/** Longest a due row on its own waits for the per-row statement while the log keeps claims fed. */
export const ROW_CLAIM_EVERY_MS = 100

/** Whether the per-row statement runs at `now` (epoch ms) after a take that handed out `fromLog` rows. */
export const rowsPacedIn = (state: WorkerState, now: number, fromLog: number): boolean =>
  fromLog === 0 || state.rowsEmptyAt === undefined || now - state.rowsEmptyAt >= ROW_CLAIM_EVERY_MS
