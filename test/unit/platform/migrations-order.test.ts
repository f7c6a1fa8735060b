import { assert, describe, it } from "@effect/vitest"
import * as fs from "node:fs"
import * as path from "node:path"

const dir = path.join(import.meta.dirname, "../../../src/platform/migrations")

describe("migration ids", () => {
  it("index.ts lists every migration file once, in ascending id order (the migrator skips an id below the latest applied)", () => {
    const index = fs.readFileSync(path.join(dir, "index.ts"), "utf8")
    const listed = [...index.matchAll(/^\s+"(\d{4})_[a-z0-9_]+": m\d{4},?$/gm)].map((m) => m[1]!)
    const files = fs.readdirSync(dir).filter((f) => /^\d{4}_.*\.ts$/.test(f)).map((f) => f.slice(0, 4)).sort()
    assert.deepStrictEqual(listed, files)
    assert.deepStrictEqual([...listed].sort(), listed)
    assert.strictEqual(new Set(listed).size, listed.length)
  })
})
