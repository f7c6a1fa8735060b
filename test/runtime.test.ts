import { assert, describe, it } from "vitest"

describe("runtime", () => {
  it("runs on Node >= 22.19 (Effect 4 needs it; npm scripts use the pinned node@24)", () => {
    const [major, minor] = process.versions.node.split(".").map(Number) as [number, number]
    assert.isTrue(major > 22 || (major === 22 && minor >= 19), `tests ran on Node ${process.versions.node}`)
  })
})
