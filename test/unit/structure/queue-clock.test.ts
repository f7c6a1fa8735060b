/**
 * One clock per instant: every instant the delivery queue compares with the
 * database's `now()` is computed by the database, and the engine's other
 * times come from `Clock` (so worker tests can run on `TestClock`). The
 * queue knows no HTTP: what a refused replay means to a client is decided
 * on the server side.
 */
import { assert, describe, it } from "@effect/vitest"
import * as fs from "node:fs"
import * as path from "node:path"

const src = path.join(import.meta.dirname, "../../../src")

const filesOf = (dir: string): Array<string> =>
  fs.readdirSync(dir, { withFileTypes: true }).flatMap((entry) =>
    entry.isDirectory()
      ? filesOf(path.join(dir, entry.name))
      : entry.name.endsWith(".ts")
      ? [path.join(dir, entry.name)]
      : []
  )

const WALL_CLOCK = /\bDate\.now\(\)|new Date\(\)/g
const HTTP_SIDE = /from "(?:\.\.\/)+(?:api|server)\//g

const matches = (folders: ReadonlyArray<string>, pattern: RegExp) =>
  folders.flatMap((folder) =>
    filesOf(path.join(src, folder)).flatMap((file) =>
      [...fs.readFileSync(file, "utf8").matchAll(pattern)].map((m) => `${path.relative(src, file)}: ${m[0]}`)
    )
  )

describe("the delivery engine's clocks and layers", () => {
  it("no Date.now() or new Date() in src/deliveries, src/notifications or src/telemetry", () => {
    assert.deepStrictEqual(matches(["deliveries", "notifications", "telemetry"], WALL_CLOCK), [])
  })

  it("src/deliveries imports nothing from the HTTP side (src/api, src/server)", () => {
    assert.deepStrictEqual(matches(["deliveries"], HTTP_SIDE), [])
  })

  it("the checks see what they look for", () => {
    assert.strictEqual([..."const t = Date.now() + new Date()".matchAll(WALL_CLOCK)].length, 2)
    assert.strictEqual([...`import { X } from "../api/Deliveries.ts"`.matchAll(HTTP_SIDE)].length, 1)
    assert.strictEqual([...`import { X } from "../../server/App.ts"`.matchAll(HTTP_SIDE)].length, 1)
  })
})
