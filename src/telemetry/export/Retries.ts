/**
 * How often, and how long apart, a telemetry batch is tried: at most
 * `MAX_ATTEMPTS` attempts per round (a first attempt from memory counts; a
 * replay starts a new round), spaced by a doubling backoff or the
 * collector's `Retry-After`, whichever is longer.
 */
import { Duration } from "effect"
import type { Claimed } from "../../deliveries/DeliveryQueue.ts"
import { doubling, jittered } from "../../platform/Backoff.ts"
import type { ExportResult } from "../Collector.ts"

/** Attempts per round (a replay starts a new round). */
export const MAX_ATTEMPTS = 5
const BACKOFF_BASE_MS = 1000
const BACKOFF_CAP_MS = 30_000

/**
 * Which attempt of its round a claimed batch is on. A round begins at
 * enqueue (`round_start` 0) and again at each replay: every failure records
 * `round_start` = the attempts made so far, so a replay gets a full
 * `MAX_ATTEMPTS` whether the batch failed after one attempt (a 400) or after
 * exhausting its retries. (Rows without it: the old `replays` arithmetic.)
 */
export const attemptInRound = (delivery: Pick<Claimed, "attempts" | "replays" | "meta">): number => {
  const start = Number(delivery.meta.round_start)
  return delivery.attempts - (Number.isFinite(start) ? start : MAX_ATTEMPTS * delivery.replays)
}

/** Delay before retry `n` (1 = after the first attempt): 1 s, 2 s, 4 s... at most 30 s, ±20 % jitter. */
export const backoff = (n: number, random: number = Math.random()): Duration.Duration => {
  return Duration.millis(jittered(doubling(n, BACKOFF_BASE_MS, BACKOFF_CAP_MS), 0.2, random))
}

/** Delay before the next attempt after a retryable answer to attempt `round`. */
export const retryDelay = (round: number, result: Extract<ExportResult, { _tag: "Retryable" }>): Duration.Duration =>
  Duration.millis(Math.max(
    Duration.toMillis(backoff(round)),
    result.retryAfter === undefined ? 0 : Duration.toMillis(result.retryAfter)
  ))
