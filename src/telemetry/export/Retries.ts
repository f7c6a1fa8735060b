/**
 * How often, and how long apart, a telemetry batch is tried: one attempt
 * more per round than `SVC_TELEMETRY_RETRY_SCHEDULE` has delays (a first
 * attempt from memory counts; a replay starts a new round), spaced by the
 * schedule's delays (±20 %) or the collector's `Retry-After`, whichever is
 * longer.
 */
import { Duration } from "effect"
import type { Claimed } from "../../deliveries/DeliveryQueue.ts"
import { jittered } from "../../platform/Backoff.ts"
import type { ExportResult } from "../Collector.ts"

/** Attempts per round of the default schedule: the rounds of rows written before rounds were recorded. */
export const MAX_ATTEMPTS = 5

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

/** Delay before retry `n` (1 = after the first attempt): the schedule's `n`th (its last past its end), ±20 % jitter. */
export const backoff = (
  schedule: ReadonlyArray<Duration.Duration>,
  n: number,
  random: number = Math.random()
): Duration.Duration => {
  const delay = schedule[Math.min(n, schedule.length) - 1]
  return Duration.millis(delay === undefined ? 0 : jittered(Duration.toMillis(delay), 0.2, random))
}

/** Delay before the next attempt after a retryable answer to attempt `round`. */
export const retryDelay = (
  schedule: ReadonlyArray<Duration.Duration>,
  round: number,
  result: Extract<ExportResult, { _tag: "Retryable" }>
): Duration.Duration =>
  Duration.millis(Math.max(
    Duration.toMillis(backoff(schedule, round)),
    result.retryAfter === undefined ? 0 : Duration.toMillis(result.retryAfter)
  ))
