/**
 * On a new checkout (no durations of an earlier run) the suite starts the
 * files that start processes or a browser first: a short one of them left
 * to the end would run alone on one worker (test/support/sequencer.ts).
 */
import { assert, describe, it } from "@effect/vitest"
import * as fs from "node:fs"
import * as path from "node:path"
import { firstRunOrder, weightOf } from "../../support/sequencer.ts"

const root = path.join(import.meta.dirname, "../../..")

const testFiles = (dir: string): Array<string> =>
  fs.readdirSync(dir, { withFileTypes: true }).flatMap((entry) =>
    entry.isDirectory()
      ? testFiles(path.join(dir, entry.name))
      : entry.name.endsWith(".test.ts") ? [path.join(dir, entry.name)] : []
  )

describe("the order of a first run", () => {
  it("files that start processes or a browser come first, then integration files, then the rest; largest first within each", () => {
    const files = testFiles(path.join(root, "test"))
    const order = firstRunOrder(files)
    assert.sameMembers(order, files)
    const at = (file: string) => order.indexOf(path.join(root, file))
    // Short files that start processes, ahead of every file that starts none.
    for (const file of ["test/integration/foundation/liveness.test.ts", "test/integration/foundation/operations-cli.test.ts"]) {
      assert.strictEqual(weightOf(path.join(root, file)), 0, file)
      assert.isBelow(at(file), at("test/integration/telemetry/export.test.ts"), file)
    }
    assert.strictEqual(weightOf(path.join(root, "test/browser/signin.test.ts")), 0)
    assert.strictEqual(weightOf(path.join(root, "test/integration/telemetry/export.test.ts")), 1)
    assert.strictEqual(weightOf(path.join(root, "test/unit/structure/test-order.test.ts")), 2)
    const weights = order.map(weightOf)
    assert.deepStrictEqual(weights, [...weights].sort((a, b) => a - b))
    for (let i = 1; i < order.length; i++) {
      if (weights[i] === weights[i - 1]) assert.isAtMost(fs.statSync(order[i]!).size, fs.statSync(order[i - 1]!).size)
    }
  })
})
