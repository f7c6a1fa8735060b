/**
 * The two rules every retry in svc is built from: a delay that doubles per
 * attempt up to a cap, and a jitter that spreads retries of many senders
 * apart. Webhooks take their delays from `SVC_WEBHOOK_RETRY_SCHEDULE`
 * (jittered ±10 %), telemetry export from `SVC_TELEMETRY_RETRY_SCHEDULE`
 * (±20 %); listeners and the outcome recorder double without jitter.
 */

/** `firstMs` · 2^(attempt − 1), at most `capMs` (attempt 1 waits `firstMs`). */
export const doubling = (attempt: number, firstMs: number, capMs: number): number =>
  Math.min(capMs, firstMs * 2 ** Math.max(0, attempt - 1))

/** `baseMs` spread uniformly over ± `spread` (0.1 = ±10 %) by `random` in [0, 1). */
export const jittered = (baseMs: number, spread: number, random: number): number =>
  Math.round(baseMs * (1 - spread + 2 * spread * random))
