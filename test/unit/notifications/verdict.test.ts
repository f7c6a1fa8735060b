/**
 * The verdict of a webhook attempt is data: what the delivery becomes and
 * what the attempt says of its endpoint, from the answer, the clock and the
 * schedule alone.
 */
import { assert, describe, it } from "@effect/vitest"
import { Duration } from "effect"
import type { Claimed } from "../../../src/deliveries/Types.ts"
import { verdictOf } from "../../../src/notifications/send/Verdict.ts"
import { OutboundFailure } from "../../../src/outbound/OutboundHttp.ts"

const claimed = (attempts: number, targetFailures: number) =>
  ({ id: "d", attempts, targetFailures }) as unknown as Claimed
const schedule = [Duration.seconds(10)]
const answer = (status: number, headers: Record<string, string> = {}) => ({
  status,
  headers,
  body: new Uint8Array(),
  truncated: false,
  elapsedMs: 2
})
const url = "https://hooks.example.com/x"

describe("an attempt's verdict", () => {
  it("a 2xx is delivered; after failures it also says the endpoint recovered", () => {
    const healthy = verdictOf(schedule, claimed(1, 0), url, answer(200), 0, 2)
    assert.strictEqual(healthy.outcome._tag, "Delivered")
    assert.isUndefined(healthy.signal)
    assert.strictEqual(verdictOf(schedule, claimed(1, 3), url, answer(204), 0, 2).signal, "recovered")
  })

  it("a 410 fails the delivery and says the endpoint is gone", () => {
    const gone = verdictOf(schedule, claimed(1, 0), url, answer(410), 0, 2)
    assert.strictEqual(gone.outcome._tag, "Failed")
    assert.strictEqual(gone.signal, "gone")
  })

  it("another answer or a network failure is retried on the schedule, then failed, and says the endpoint is failing", () => {
    const first = verdictOf(schedule, claimed(1, 0), url, answer(500), 0, 2)
    assert.strictEqual(first.outcome._tag, "Retry")
    assert.strictEqual(first.signal, "failing")
    const last = verdictOf(
      schedule,
      claimed(2, 0),
      url,
      new OutboundFailure({ reason: "network", message: "refused" }),
      0,
      7
    )
    assert.strictEqual(last.outcome._tag, "Failed")
    assert.strictEqual(last.attempt.durationMs, 7)
    assert.strictEqual(last.signal, "failing")
  })

  it("a 429's Retry-After replaces the schedule's delay, within bounds", () => {
    const later = verdictOf(schedule, claimed(1, 0), url, answer(429, { "retry-after": "120" }), 0, 2)
    assert.deepStrictEqual(later.outcome._tag === "Retry" && Duration.toMillis(later.outcome.after), 120_000)
    const soon = verdictOf(schedule, claimed(1, 0), url, answer(503, { "retry-after": "0" }), 0, 2)
    assert.deepStrictEqual(soon.outcome._tag === "Retry" && Duration.toMillis(soon.outcome.after), 1_000)
  })
})
