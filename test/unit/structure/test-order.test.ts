/**
 * On a new checkout (no durations of an earlier run) the suite starts the
 * longest files first, by the durations recorded in
 * test/support/durations.json; a file not recorded is placed by what it
 * does (test/support/sequencer.ts).
 */
import { assert, describe, it } from "@effect/vitest"
import * as fs from "node:fs"
import * as path from "node:path"
import { firstRunOrder, recorded, weightOf } from "../../support/sequencer.ts"

const root = path.join(import.meta.dirname, "../../..")

const testFiles = (dir: string): Array<string> =>
  fs.readdirSync(dir, { withFileTypes: true }).flatMap((entry) =>
    entry.isDirectory()
      ? testFiles(path.join(dir, entry.name))
      : entry.name.endsWith(".test.ts")
      ? [path.join(dir, entry.name)]
      : []
  )

const at = (order: ReadonlyArray<string>, file: string) => order.indexOf(path.join(root, file))

describe("the order of a first run", () => {
  it("longest recorded first; every recorded file exists", () => {
    const files = testFiles(path.join(root, "test"))
    const record = recorded()
    for (const file of Object.keys(record)) {
      assert.isTrue(
        fs.existsSync(path.join(root, file)),
        `${file} is recorded but gone: node test/support/sequencer.ts after a run`
      )
    }
    const order = firstRunOrder(files, record)
    assert.sameMembers(order, files)
    const seconds = order.map((file) => record[path.relative(root, file)]).filter((s) => s !== undefined)
    assert.deepStrictEqual(seconds, [...seconds].sort((a, b) => b - a))
  })

  it("a file not recorded is placed by what it does: one that starts processes or a browser among the long files", () => {
    const files = [
      "test/processes/foundation/liveness.test.ts",
      "test/integration/telemetry/export.test.ts",
      "test/unit/structure/test-order.test.ts",
      "test/browser/signin.test.ts"
    ]
      .map((file) => path.join(root, file))
    assert.strictEqual(weightOf(files[0]!), 0)
    assert.strictEqual(weightOf(files[1]!), 1)
    assert.strictEqual(weightOf(files[2]!), 2)
    assert.strictEqual(weightOf(files[3]!), 0)
    const order = firstRunOrder(files, { "test/integration/telemetry/export.test.ts": 10 })
    assert.isBelow(
      at(order, "test/processes/foundation/liveness.test.ts"),
      at(order, "test/integration/telemetry/export.test.ts")
    )
    assert.isBelow(
      at(order, "test/integration/telemetry/export.test.ts"),
      at(order, "test/unit/structure/test-order.test.ts")
    )
    assert.deepStrictEqual(firstRunOrder(files, {}).map(weightOf), [0, 0, 1, 2])
  })
})
