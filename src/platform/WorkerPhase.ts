/**
 * What a pool's worker thread writes for the pool to read: the phase its
 * request is in. Apart from the pool (`WorkerPool.ts`) because a worker
 * imports it, and a worker's modules load no Effect (each worker is an
 * isolate of its own that would load it again: about 0.3 CPU-s per worker
 * and start).
 */

/** The phase cell: `[phase, ms from the request's start to the phase's start]`. */
export type PhaseCell = Int32Array

/**
 * In a worker: the request it received at `receivedAt` (`performance.now()`
 * in the worker when the request arrived) enters `phase` now. The offset is
 * a duration measured in the worker, added by the pool to the instant it
 * started the job on its own clock: no instant crosses threads, so the
 * pool's clock may be any `Clock`. (The offset leaves out the message's trip
 * to the worker: a later phase's deadline is early by that much, never
 * late.) The offset is stored first, so a reader that sees the new phase
 * sees its start too.
 */
export const enterPhase = (cell: PhaseCell | undefined, receivedAt: number, phase: number) => {
  if (cell === undefined) return
  Atomics.store(cell, 1, Math.round(performance.now() - receivedAt))
  Atomics.store(cell, 0, phase)
}
