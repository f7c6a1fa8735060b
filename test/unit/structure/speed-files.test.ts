/**
 * In the delivery engine a faster path sits beside the rule it speeds up
 * and is named for it (`SettleFast.ts` beside the settle): each `*Fast.ts`
 * says what it buys, and a file that says what it buys is a `*Fast.ts`,
 * except the two whose speed is the only way there is (the exchange on
 * undici's handler API, and the send targets' mirror kept with the lookups
 * it mirrors).
 */
import { assert, describe, it } from "@effect/vitest"
import * as fs from "node:fs"
import * as path from "node:path"

const src = path.join(import.meta.dirname, "../../../src")
const ONLY_WAY = ["outbound/Exchange.ts", "notifications/SendTargets.ts"]

const filesOf = (dir: string): Array<string> =>
  fs.readdirSync(dir, { withFileTypes: true }).flatMap((entry) =>
    entry.isDirectory() ? filesOf(path.join(dir, entry.name)) : entry.name.endsWith(".ts") ? [path.join(dir, entry.name)] : []
  )

describe("the engine's faster paths", () => {
  it("every *Fast.ts says what it buys, and what says so is a *Fast.ts beside its rule", () => {
    const misnamed: Array<string> = []
    for (const file of ["deliveries", "notifications", "outbound"].flatMap((folder) => filesOf(path.join(src, folder)))) {
      const relative = path.relative(src, file)
      const buys = fs.readFileSync(file, "utf8").includes("What it buys")
      const fast = file.endsWith("Fast.ts")
      if (fast && !buys) misnamed.push(`${relative}: named Fast, says nothing of what it buys`)
      if (!fast && buys && !ONLY_WAY.includes(relative)) misnamed.push(`${relative}: a faster path not named *Fast.ts`)
    }
    assert.deepStrictEqual(misnamed, [])
  })
})
