/**
 * The verdict of one webhook attempt: a pure function of the answer (or the
 * failure), the clock and the retry schedule, the same for every way a
 * delivery is sent. It says what the delivery becomes, what to record of
 * the attempt, and what the attempt says of the endpoint (`TargetSignal`),
 * which `EndpointHealth.ts` applies once the attempt is recorded:
 *
 * - 2xx: delivered (`recovered` when the endpoint had failed before).
 * - 410 Gone: failed; the endpoint is `gone` (deactivated, its undelivered
 *   deliveries failed; PATCH reactivates it).
 * - 429 / 503 with `Retry-After`: the next try waits that long, within
 *   [1 s, 1 h], instead of the schedule's delay.
 * - anything else (3xx included, timeouts, network and TLS failures): retried
 *   after the next delay of `SVC_WEBHOOK_RETRY_SCHEDULE` (±10 % jitter);
 *   failed when the schedule is used up; `failing` for the endpoint.
 *
 * The attempt record keeps the status and a truncated response snippet,
 * never the payload.
 */
import { Duration } from "effect"
import type { Claimed, Settlement } from "../../deliveries/Types.ts"
import { Outcome } from "../../deliveries/Types.ts"
import type { Sent } from "../../outbound/DirectExchange.ts"
import { OutboundFailure } from "../../outbound/OutboundHttp.ts"
import { perUrl } from "../../outbound/Request.ts"
import { parseRetryAfter } from "../../outbound/RetryAfter.ts"
import { jittered } from "../../platform/Backoff.ts"
import { fromOutside, urlNeedles } from "../../secrets/Masking.ts"

export const SNIPPET_BYTES = 512
const DELIVERED = Outcome.delivered()
const RETRY_AFTER_MIN_MS = 1_000
const RETRY_AFTER_MAX_MS = 3_600_000

/** Why a 410 deactivates its endpoint (`deactivated_reason`). */
export const GONE = "the receiver answered 410 Gone"

/** Delay before retry number `attempt` (1-based), jittered ±10 %; `undefined` when the schedule is used up. */
export const retryDelay = (schedule: ReadonlyArray<Duration.Duration>, attempt: number, random = Math.random) => {
  const base = schedule[attempt - 1]
  return base === undefined ? undefined : jittered(Duration.toMillis(base), 0.1, random())
}

/** A failed attempt's outcome: the schedule's next retry, or the receiver's `Retry-After` within bounds, or failed when the schedule is used up. */
export const failedAttempt = (
  schedule: ReadonlyArray<Duration.Duration>,
  delivery: Claimed,
  error: string,
  attempt: Settlement["attempt"],
  retryAfterMs?: number
): Settlement => {
  const delay = retryDelay(schedule, delivery.attempts)
  if (delay === undefined) {
    return { outcome: Outcome.failed(`${error}; no retries left`), attempt, signal: "failing" }
  }
  const wait = retryAfterMs === undefined
    ? delay
    : Math.min(RETRY_AFTER_MAX_MS, Math.max(RETRY_AFTER_MIN_MS, retryAfterMs))
  return { outcome: Outcome.retry(Duration.millis(wait), error), attempt, signal: "failing" }
}

/** A delivery that could not be sent at all, and why. */
export const notSent = (error: string): Settlement => ({
  outcome: Outcome.failed(error),
  attempt: { error, durationMs: 0 }
})

/** An acknowledged attempt: delivered, and the end of a failing streak if there was one. */
export const delivered = (delivery: Claimed, attempt: Settlement["attempt"]): Settlement =>
  delivery.targetFailures > 0 ? { outcome: DELIVERED, attempt, signal: "recovered" } : { outcome: DELIVERED, attempt }

const decoder = new TextDecoder("utf-8", { fatal: false })

/** `urlNeedles` of the last few URLs answered. */
const needlesOf = perUrl(1_000, urlNeedles)

/**
 * The start of a receiver's answer, with the parts of its URL that may carry
 * a credential masked (a 404 page often echoes the path it was asked for).
 */
const snippet = (body: Uint8Array, truncated: boolean, url: string) => {
  // Most receivers answer with no body at all: nothing to decode or mask.
  if (body.length === 0 && !truncated) return ""
  return fromOutside(decoder.decode(body.subarray(0, SNIPPET_BYTES)), needlesOf(url), {
    cut: truncated || body.length > SNIPPET_BYTES
  })
}

/** The error an answer that is not 2xx records. */
export const httpError = (status: number) =>
  status >= 300 && status < 400 ? `HTTP ${status} (redirects are not followed)` : `HTTP ${status}`

/** What the answer (or the failure) of an attempt started at `started` makes of the delivery, `now` being its end. */
export const verdictOf = (
  schedule: ReadonlyArray<Duration.Duration>,
  delivery: Claimed,
  url: string,
  sent: Sent,
  started: number,
  now: number
): Settlement => {
  if (sent instanceof OutboundFailure) {
    return failedAttempt(schedule, delivery, sent.message, { error: sent.message, durationMs: now - started })
  }
  const attempt = {
    statusCode: sent.status,
    responseSnippet: snippet(sent.body, sent.truncated, url),
    durationMs: sent.elapsedMs
  }
  if (sent.status >= 200 && sent.status < 300) return delivered(delivery, attempt)
  if (sent.status === 410) {
    return {
      outcome: Outcome.failed(`410 Gone: endpoint deactivated`),
      attempt: { ...attempt, error: GONE },
      signal: "gone"
    }
  }
  const error = httpError(sent.status)
  const retryAfter = sent.status === 429 || sent.status === 503
    ? parseRetryAfter(sent.headers["retry-after"], now)
    : undefined
  return failedAttempt(schedule, delivery, error, { ...attempt, error }, retryAfter)
}
