/**
 * `Retry-After` (RFC 9110 §10.2.3) from a receiver or collector: either
 * delay-seconds (digits only) or an HTTP-date, which RFC 9110 requires in
 * GMT (IMF-fixdate and the two obsolete forms all end in "GMT"). Anything
 * else (a negative number, a fraction, a date in another zone, free text)
 * is unreadable and ignored, as the RFC asks of an invalid field. Callers
 * bound the result by their own rules.
 */

/** How long the peer asked us to wait, in milliseconds from `now`; `undefined` when absent or unreadable. */
export const parseRetryAfter = (value: string | ReadonlyArray<string> | undefined, now: number): number | undefined => {
  const text = typeof value === "string" ? value : value?.[0]
  if (text === undefined) return undefined
  const trimmed = text.trim()
  // Ten digits is over 300 years: more is not a delay anyone means.
  if (/^\d{1,10}$/.test(trimmed)) return Number(trimmed) * 1000
  if (!/^[A-Za-z]{3}.*\bGMT$/.test(trimmed)) return undefined
  const at = Date.parse(trimmed)
  return Number.isNaN(at) ? undefined : Math.max(0, at - now)
}
