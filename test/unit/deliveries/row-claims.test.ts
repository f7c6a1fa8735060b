/**
 * The per-row claim after a claim the log fed: it runs while it finds
 * something, else at most every 100 ms; always when the log gave nothing.
 */
import { assert, describe, it } from "@effect/vitest"
import {
  makeRowClaimPacing,
  ROW_CLAIM_EVERY_MS,
  rowClaimDue,
  rowClaimRan
} from "../../../src/deliveries/rows/ClaimPacing.ts"

describe("per-row claim pacing", () => {
  it("the per-row claim runs while it finds something, else every 100 ms; always when the log gave nothing", () => {
    const pacing = makeRowClaimPacing()
    assert.isTrue(rowClaimDue(pacing, 1_000, 5), "never ran")
    rowClaimRan(pacing, 1_000, 0)
    assert.isFalse(rowClaimDue(pacing, 1_000 + ROW_CLAIM_EVERY_MS - 1, 5), "it found nothing a moment ago")
    assert.isTrue(rowClaimDue(pacing, 1_000 + ROW_CLAIM_EVERY_MS - 1, 0), "the log gave nothing")
    assert.isTrue(rowClaimDue(pacing, 1_000 + ROW_CLAIM_EVERY_MS, 5), "100 ms on")
    rowClaimRan(pacing, 1_100, 2)
    assert.isTrue(rowClaimDue(pacing, 1_101, 5), "it found something: again at once")
  })
})
