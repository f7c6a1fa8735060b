/**
 * How many events the dispatcher takes per statement: a burst's first
 * statement takes a few, each full one twice as many as the last, up to
 * `MAX_BATCH`; one that finds fewer than it asked for starts over.
 *
 * Speeds up: a statement of 200 events holds the endpoints' rows it
 * counts into until it commits, and on the embedded database the one
 * session, so the worker's first claim of a burst waited behind it; with a
 * first statement of 16 events the first receipt on the server came at
 * 22.9 ms, not 45.1 (`bench/notes/delivery-log.md`, "What was cut").
 */

import { Duration } from "effect"

/** Events fanned out per statement at most: keeps each one short (PGlite is one session). */
export const MAX_BATCH = 200

/** The first statement of a burst. */
export const FIRST_BATCH = 16

/** The next statement's size, after one of `size` events that took `taken`. */
export const nextBatch = (size: number, taken: number): number =>
  taken >= size ? Math.min(MAX_BATCH, size * 2) : FIRST_BATCH

/**
 * How long the dispatcher waits before asking again when events past its
 * cursor are held back by an older transaction still running: 5 ms,
 * doubling up to 100 ms while it takes nothing, and 5 ms again after a
 * pass that took events; after such a pass it waits for the `events`
 * wakeup as well: the older transactions are then ending, most often
 * other writers of events (governed steps), whose commit wakes it at
 * once. After a pass that took nothing it only sleeps: a transaction that
 * writes no event (a report, a backup) sends no wakeup, and waking on
 * every other commit meanwhile would cost a statement each.
 *
 * Speeds up: an event committed while another transaction of the
 * cluster runs is fanned out at most 100 ms after that one ends, not at the
 * next poll, up to a second later (one pass per pause meanwhile); an
 * idle dispatcher asks nothing. Under a steady load of steps, events are
 * almost always held back by the next step's transaction. Measured alone
 * on two cores, server, 200 pending steps/s, one A/B run of the same svc
 * with and without this rule (`npm run bench -- latency`,
 * bench/notes/latency.md): webhook p95 / p99 59.7 / 87.9 ms with a plain
 * sleep that grew to 100 ms whatever was taken, 13.5 / 22.2 ms with it;
 * fan-out p95 51 → 5 ms. Its price at that rate: more, smaller passes,
 * CPU per step svc 2 023 → 2 572 µs, the backends 2 637 → 3 558 µs (none
 * at 50/s, none for events written straight to the outbox).
 */
export const FIRST_PAUSE = Duration.millis(5)
const MAX_PAUSE = Duration.millis(100)

export const nextPause = (pause: Duration.Duration): Duration.Duration =>
  Duration.min(Duration.times(pause, 2), MAX_PAUSE)

/** The pause to wait now, after `previous` (undefined: none since the dispatcher caught up) and a pass that took `taken` events. */
export const pauseAfter = (previous: Duration.Duration | undefined, taken: number): Duration.Duration =>
  previous === undefined || taken > 0 ? FIRST_PAUSE : nextPause(previous)

/**
 * Under a steady stream of events the dispatcher lets commits gather
 * before its next pass: when its passes took `STEADY_EVENTS` events or more
 * in the last `WINDOW` (a stream of 100 events a second or faster), it
 * waits after its wakeup for as long as the stream takes, at its rate over
 * that window, to bring `GATHER_EVENTS - 1` more (between `GATHER_MIN` and
 * `GATHER_MAX`), so that one pass (its statement, and downstream the
 * worker's claim and settle, which the pass wakes) serves the events of
 * several commits instead of one each. A lone event, a burst (taken by
 * full passes, which never wait) and a slower stream are fanned out at once.
 *
 * Speeds up: the work per event of a trickle of governed steps, where
 * each event found the passes idle and paid for all of them alone. Server,
 * 200 pending steps/s with their webhooks, alone on two cores, two A/B runs
 * (`npm run bench -- latency`, bench/notes/latency.md, "Gathering under a
 * steady load"): a fixed 5 ms, CPU per step, svc and PostgreSQL together,
 * 6 780 → 5 665 µs and 6 994 → 5 691 µs (-16 %, -19 %); webhook p95 66.9 →
 * 50 ms and 95.8 → 56.5 ms. The wait scaled to the stream's rate, for
 * three more events, against the fixed 5 ms in one run of four
 * alternating arms ("Passes of a few events"): transactions per step 3.15
 * → 1.94-2.00; CPU per step, svc and PostgreSQL together, 4 852 → 2 704
 * and 4 524 → 3 757 µs; webhook p50 9.0-9.4 → 12.4-14.4 ms, p95 19.5-24.1
 * → 19.6-25.9 ms; at 500/s (a 6 ms wait) the same as before. The price:
 * up to `GATHER_MAX` on a webhook's way while the stream lasts.
 */
export const WINDOW = Duration.millis(100)
export const STEADY_EVENTS = 10
/** The events a steady stream's pass aims to carry. */
export const GATHER_EVENTS = 4
export const GATHER_MIN = Duration.millis(5)
export const GATHER_MAX = Duration.millis(20)

/** A pass that took events, and when it ended (ms). */
export interface Pass {
  readonly at: number
  readonly taken: number
}

/** The passes of the last `WINDOW` before `now`, `pass` added when it took events. */
export const recentPasses = (passes: ReadonlyArray<Pass>, pass: Pass): Array<Pass> => {
  const since = pass.at - Duration.toMillis(WINDOW)
  const kept = passes.filter((p) => p.at > since)
  if (pass.taken > 0) kept.push(pass)
  return kept
}

/**
 * How long the next pass lets commits gather at `now`: nothing unless the
 * stream is steady (its passes took `STEADY_EVENTS` or more in the last
 * `WINDOW`); else the time its rate over that window takes to bring
 * `GATHER_EVENTS - 1` more events, within `GATHER_MIN`..`GATHER_MAX`.
 */
export const gatherFor = (passes: ReadonlyArray<Pass>, now: number): Duration.Duration | undefined => {
  const since = now - Duration.toMillis(WINDOW)
  let taken = 0
  for (const p of passes) if (p.at > since) taken += p.taken
  if (taken < STEADY_EVENTS) return undefined
  const perEvent = Duration.toMillis(WINDOW) / taken
  return Duration.clamp(Duration.millis((GATHER_EVENTS - 1) * perEvent), { minimum: GATHER_MIN, maximum: GATHER_MAX })
}
