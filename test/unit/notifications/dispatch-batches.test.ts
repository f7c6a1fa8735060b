/**
 * The dispatcher's statement sizes through a burst: a few events first,
 * twice as many after each full statement, at most 200; a statement that
 * finds fewer than it asked for starts the next burst small again. Events
 * held back by an older transaction are asked for again after a pause that
 * grows while nothing is taken and starts over after a pass that took some.
 * Under a stream of 100 events a second or more, the next pass waits for
 * about three more commits at the stream's rate (5 to 20 ms); a lone
 * event or a slower stream never waits.
 */
import { assert, describe, it } from "@effect/vitest"
import { Duration } from "effect"
import {
  FIRST_BATCH,
  FIRST_PAUSE,
  gatherFor,
  MAX_BATCH,
  nextBatch,
  nextPause,
  type Pass,
  pauseAfter,
  recentPasses
} from "../../../src/notifications/dispatch/DispatchBatches.ts"

describe("dispatch batches", () => {
  it("a burst is taken 16, 32, 64, 128, then 200 at a time; a short statement starts over", () => {
    const sizes = [FIRST_BATCH]
    while (sizes.length < 7) sizes.push(nextBatch(sizes.at(-1)!, sizes.at(-1)!))
    assert.deepStrictEqual(sizes, [16, 32, 64, 128, 200, 200, 200])
    assert.strictEqual(MAX_BATCH, 200)
    assert.strictEqual(nextBatch(200, 150), FIRST_BATCH, "the burst is over")
    assert.strictEqual(nextBatch(64, 0), FIRST_BATCH)
  })

  it("events held back by an older transaction are asked for again after 5, 10, 20, 40, 80, then every 100 ms", () => {
    const pauses = [FIRST_PAUSE]
    while (pauses.length < 7) pauses.push(nextPause(pauses.at(-1)!))
    assert.deepStrictEqual(pauses.map(Duration.toMillis), [5, 10, 20, 40, 80, 100, 100])
  })

  it("the pause for held-back events starts over after a pass that took events, and after catching up", () => {
    assert.strictEqual(Duration.toMillis(pauseAfter(undefined, 0)), 5)
    assert.strictEqual(Duration.toMillis(pauseAfter(Duration.millis(40), 0)), 80)
    assert.strictEqual(Duration.toMillis(pauseAfter(Duration.millis(100), 0)), 100)
    // Progress: the older transaction ended, the next one will soon.
    assert.strictEqual(Duration.toMillis(pauseAfter(Duration.millis(100), 3)), 5)
  })

  it("a stream of 100 events a second or more gathers before the next pass; slower ones and lone events do not", () => {
    // One event every `gapMs`, each taken by a pass of its own: how long does the next pass wait after 300 ms of it?
    const after = (gapMs: number) => {
      let passes: Array<Pass> = []
      for (let at = 0; at <= 300; at += gapMs) passes = recentPasses(passes, { at, taken: 1 })
      const gather = gatherFor(passes, 300)
      return gather === undefined ? undefined : Duration.toMillis(gather)
    }
    assert.strictEqual(after(1), 5, "1 000 a second: three more come within 3 ms, but the least is 5")
    assert.strictEqual(after(4), 12, "250 a second: three more in 12 ms")
    assert.strictEqual(after(5), 15, "200 a second")
    assert.strictEqual(after(10), 20, "100 a second: 30 ms for three more, but the most is 20")
    assert.isUndefined(after(11), "91 a second")
    assert.isUndefined(after(20), "50 a second")
    // Nine events in one pass are not yet a stream; a tenth within 100 ms makes one, until the first pass is 100 ms old.
    const lone = recentPasses([], { at: 1_000, taken: 9 })
    assert.isUndefined(gatherFor(lone, 1_001))
    const ten = recentPasses(lone, { at: 1_050, taken: 1 })
    assert.isDefined(gatherFor(ten, 1_060))
    assert.isUndefined(gatherFor(ten, 1_101), "the first pass is over 100 ms old")
    // Passes that took nothing are not kept, and old ones are dropped as new ones come.
    assert.lengthOf(recentPasses(ten, { at: 1_060, taken: 0 }), 2)
    assert.lengthOf(recentPasses(ten, { at: 1_200, taken: 1 }), 1)
  })
})
