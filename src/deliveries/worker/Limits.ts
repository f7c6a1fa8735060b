/**
 * The worker's numbers, derived once from its options: how much it claims
 * ahead, how long a claimed delivery may wait here, when a claim is worth
 * making. Pure: no clock, no state.
 */
import { Duration } from "effect"

/** A delivery may always wait this long here for its turn (lease permitting: see `maxWaitMs`). */
const MIN_WAIT_MS = 1_000

/** Time kept back beyond `handleTimeout` for recording the outcome before the lease ends. */
export const SETTLE_MARGIN_MS = 2_000

/** Sends of a target whose latest attempt failed. */
export const FAILING_TARGET_SENDS = 1

export interface LimitOptions {
  /** Deliveries in flight at once in this process. */
  readonly concurrency: number
  /** Deliveries of one healthy target in flight at once in this process. */
  readonly perTarget: number
  /**
   * Most deliveries of one target claimed at once, all processes together
   * (in flight, waiting here to start, or being recorded). Defaults to
   * `perTarget`: then nothing waits here, and `perTarget` also bounds the
   * target's sends across processes.
   */
  readonly prefetch?: number | undefined
  /** Longer than the slowest `handle`: a lease that runs out lets another process send again. */
  readonly leaseFor: Duration.Input
  /** The longest a `handle` may take; a waiting delivery with less lease left than this (and a margin) is given back. */
  readonly handleTimeout?: Duration.Input | undefined
  /** Longest sleep when nothing is due (the cross-process fallback when no wakeup arrives). */
  readonly pollEvery: Duration.Input
}

export const limitsOf = (options: LimitOptions) => {
  const leaseMs = Duration.toMillis(options.leaseFor)
  const pollMs = Duration.toMillis(options.pollEvery)
  const handleMs = Duration.toMillis(options.handleTimeout ?? Duration.millis(leaseMs / 2))
  // Waiting here only makes sense if a delivery can still start some time
  // after its claim and finish within its lease. Otherwise the loop claims
  // only what it can start at once, and a failing target is not held back.
  const prefetching = handleMs + SETTLE_MARGIN_MS < leaseMs / 2 && (options.prefetch ?? 0) > options.perTarget
  const prefetch = prefetching ? options.prefetch! : options.perTarget
  return {
    leaseMs,
    pollMs,
    handleMs,
    /** Whether deliveries are claimed ahead of their turn, to wait here. */
    prefetching,
    /** Most deliveries of one target claimed at once, all processes together. */
    prefetch,
    /** The longest a delivery may wait here before it must be given back. */
    // At the shortest lease allowed, a second of the recording margin.
    maxWaitMs: Math.max(leaseMs - handleMs - SETTLE_MARGIN_MS, MIN_WAIT_MS),
    /** Claimed and not started, at most (beyond this the claim waits). */
    holdLimit: Math.max(options.concurrency, prefetch) * 2,
    /** Claim more for a busy target once fewer than this wait here. */
    lowWater: Math.max(1, Math.floor(prefetch / 4))
  }
}

export type Limits = ReturnType<typeof limitsOf>
