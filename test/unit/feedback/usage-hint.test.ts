import { assert, describe, it } from "@effect/vitest"
import { UsageHints } from "../../../src/feedback/UsageHint.ts"

describe("the feedback usage hint", () => {
  it("answers what was read for its age only, raised by what this process stored", () => {
    const hints = new UsageHints(2_000)
    assert.isUndefined(hints.get("org", 0))
    hints.stored("org", 100) // nothing read yet: nothing to raise
    assert.isUndefined(hints.get("org", 0))
    hints.read("org", 1_000, 10_000)
    assert.strictEqual(hints.get("org", 12_000), 1_000)
    hints.stored("org", 256)
    assert.strictEqual(hints.get("org", 12_000), 1_256)
    assert.isUndefined(hints.get("org", 12_001))
    assert.isUndefined(hints.get("other", 10_000))
  })

  it("holds at most its bound of organizations", () => {
    const hints = new UsageHints(2_000, 3)
    for (const org of ["a", "b", "c"]) hints.read(org, 1, 0)
    hints.read("a", 2, 0) // a known one is updated in place
    assert.strictEqual(hints.get("c", 0), 1)
    hints.read("d", 4, 0) // a fourth starts over
    assert.isUndefined(hints.get("a", 0))
    assert.strictEqual(hints.get("d", 0), 4)
  })
})
