/**
 * One statement of this worker on its targets' rows at a time: its claim
 * and its settle take turns instead of running side by side on two
 * connections.
 *
 * What it buys: the log's lease statement locks a target's row `SKIP
 * LOCKED`, so a claim that ran while this worker's own settle held the row
 * of its busy endpoint skipped that endpoint and came back empty, and the
 * settle waited for the claim's lock anyway. In the `webhooks` drain on a
 * PostgreSQL server (one endpoint) 128 of 275 takes handed out nothing,
 * each about 1.5 ms of the server's CPU (planning and running the
 * statement); the figures with turns are in `docs/performance.md` ("The
 * drain's cost").
 */
import { type Effect, Semaphore } from "effect"

export interface Turn {
  /** Runs `effect` when no other statement of this worker's turn is running. */
  readonly run: <A, E, R>(effect: Effect.Effect<A, E, R>) => Effect.Effect<A, E, R>
}

export const makeTurn = (): Turn => {
  const semaphore = Semaphore.makeUnsafe(1)
  return { run: (effect) => semaphore.withPermit(effect) }
}
