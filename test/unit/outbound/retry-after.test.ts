import { assert, describe, it } from "@effect/vitest"
import * as fc from "fast-check"
import { parseRetryAfter } from "../../../src/outbound/RetryAfter.ts"

const now = Date.parse("2026-11-22T12:00:00Z")

describe("Retry-After, one parser for receivers and collectors", () => {
  it("delay-seconds is digits only; an HTTP-date is in GMT; anything else is unreadable", () => {
    fc.assert(fc.property(fc.integer({ min: 0, max: 9_999_999_999 }), (seconds) => {
      assert.strictEqual(parseRetryAfter(` ${seconds} `, now), seconds * 1000)
    }))
    fc.assert(fc.property(fc.integer({ min: -86_400, max: 86_400 }), (offset) => {
      const at = new Date(Math.floor(now / 1000) * 1000 + offset * 1000)
      assert.strictEqual(parseRetryAfter(at.toUTCString(), now), Math.max(0, at.getTime() - now))
    }))
    for (
      const bad of [
        "-5",
        "1.5",
        "soon",
        "",
        "12345678901",
        "2026-11-22T12:00:10+01:00",
        "Sun, 22 Nov 2026 12:01:30 PST"
      ]
    ) {
      assert.isUndefined(parseRetryAfter(bad, now), bad)
    }
    assert.isUndefined(parseRetryAfter(undefined, now))
    assert.strictEqual(parseRetryAfter(["3", "9"], now), 3000, "a repeated header: the first counts")
  })
})
