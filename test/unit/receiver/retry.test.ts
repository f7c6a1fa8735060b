/** The sender's retry arithmetic: schedule with jitter, Retry-After parsing. */
import { assert, describe, it } from "@effect/vitest"
import { Duration } from "effect"
import * as fc from "fast-check"
import { retryDelay } from "../../../src/notifications/send/Verdict.ts"
import { parseRetryAfter } from "../../../src/outbound/RetryAfter.ts"

describe("retry delays", () => {
  const schedule = [Duration.seconds(5), Duration.minutes(5), Duration.minutes(30)]

  it("retry n waits the n-th delay of the schedule within ±10 %; none after the last", () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 3 }), fc.double({ min: 0, max: 0.999999, noNaN: true }), (attempt, r) => {
        const base = Duration.toMillis(schedule[attempt - 1]!)
        const delay = retryDelay(schedule, attempt, () => r)!
        return delay >= base * 0.9 - 1 && delay <= base * 1.1 + 1
      })
    )
    assert.isUndefined(retryDelay(schedule, 4))
  })

  it("Retry-After is read as seconds or an HTTP date; anything else is ignored", () => {
    const now = Date.parse("2026-11-22T12:00:00Z")
    assert.strictEqual(parseRetryAfter("120", now), 120_000)
    assert.strictEqual(parseRetryAfter(" 0 ", now), 0)
    assert.strictEqual(parseRetryAfter("Sun, 22 Nov 2026 12:01:30 GMT", now), 90_000)
    assert.strictEqual(parseRetryAfter("Sun, 22 Nov 2026 11:00:00 GMT", now), 0)
    assert.isUndefined(parseRetryAfter(undefined, now))
    assert.isUndefined(parseRetryAfter("soon", now))
    assert.isUndefined(parseRetryAfter("-5", now))
    fc.assert(fc.property(fc.string(), (value) => {
      const parsed = parseRetryAfter(value, now)
      return parsed === undefined || (Number.isFinite(parsed) && parsed >= 0)
    }))
  })
})
