/**
 * The deadline scheduler: a fiber that fires due approval deadlines. The
 * database is the source of truth (`approvals.next_due_at`); each deadline
 * is claimed with `FOR UPDATE SKIP LOCKED` in its own short transaction and
 * moved past in the same transaction as its outbox event, so it fires once
 * even with several processes on one PostgreSQL server, and a restarted
 * service fires what came due while it was down.
 *
 * Between rounds it sleeps until the earliest deadline, a `"approvals"`
 * wake-up (a new or decided approval), or the poll cap, whichever is first.
 */
import { Effect, Layer, Schedule } from "effect"
import { Topics, Wakeups } from "../database/Wakeups.ts"
import { forkSupervised } from "../platform/Supervised.ts"
import { Approvals } from "./Approvals.ts"
import { sleepMillis } from "./Deadlines.ts"

/** Longest sleep: the bound on noticing a deadline another process created. */
export const POLL_CAP_MS = 1000

/** Deadlines fired per round before the scheduler re-reads its next sleep. */
const ROUND = 100

/** Pause when due rows are all claimed by another process. */
const CONTENDED_MS = 50

export const ApprovalScheduler = {
  layer: Layer.effectDiscard(Effect.gen(function*() {
    const approvals = yield* Approvals
    const wakeups = yield* Wakeups

    const round = Effect.gen(function*() {
      // Both instants are the database's: a process clock that is off does
      // not move when a deadline fires.
      const { at: earliest, now } = yield* approvals.earliestDue
      if (earliest !== null && earliest <= now) {
        let fired = 0
        while (fired < ROUND && (yield* approvals.fireNextDue)) fired++
        // Nothing claimable although due: another process holds those rows
        // for a moment. Look again shortly rather than spin.
        if (fired === 0) yield* wakeups.wait(Topics.approvals, CONTENDED_MS)
        return
      }
      // Idle: one query per round, and no transaction.
      yield* wakeups.wait(Topics.approvals, sleepMillis(earliest, now, POLL_CAP_MS))
    })

    // A failed round (database away) is retried every POLL_CAP_MS, so
    // deadlines fire within about a second of the database's return.
    yield* forkSupervised({ name: "the approval scheduler", round, retry: Schedule.spaced(POLL_CAP_MS) })
  }))
}
