/**
 * `svc/testing`'s entry point (src/testing-entry.ts) checks the Node version
 * before it loads the kit, so it names the kit's values itself: it must name
 * every one, and link on any Node (no static import). What an older Node
 * prints is checked where one runs it: the packaging test, on Node 20.
 */
import { assert, describe, it } from "@effect/vitest"
import * as fs from "node:fs"
import * as path from "node:path"
import { importsOf } from "../../../scripts/build-packages.ts"

const root = path.join(import.meta.dirname, "../../..")

describe("the test kit's entry point", () => {
  it("exports every value the kit does, and the same ones", async () => {
    const [entry, kit] = await Promise.all([import("../../../src/testing-entry.ts"), import("../../../src/testing.ts")])
    assert.deepStrictEqual(Object.keys(entry).sort(), Object.keys(kit).sort())
    for (const name of Object.keys(kit)) {
      assert.strictEqual((entry as Record<string, unknown>)[name], (kit as Record<string, unknown>)[name], name)
    }
  })

  it("imports nothing statically (an older Node links it, then hears what it needs), and is the package's entry", () => {
    const code = fs.readFileSync(path.join(root, "src/testing-entry.ts"), "utf8")
    assert.deepStrictEqual(code.split("\n").filter((line) => /^\s*(import|export)\b.*\bfrom\b/.test(line)), [])
    assert.deepStrictEqual(importsOf(code), ["./testing.ts"])
    const manifest = JSON.parse(fs.readFileSync(path.join(root, "package.json"), "utf8"))
    assert.deepStrictEqual(manifest.exports["./testing"], {
      types: "./dist/testing.d.ts",
      default: "./dist/testing-entry.js"
    })
  })
})
