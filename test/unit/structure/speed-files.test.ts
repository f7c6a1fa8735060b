/**
 * A file is named for its job (`ClaimSides.ts`, `SettleSuccesses.ts`),
 * never for a motive (`*Fast.ts`). A file that exists to make something
 * faster says so in its header, in a paragraph that starts `Speeds up:`
 * and carries the figure it was kept for.
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

/** The header's `Speeds up:` paragraph, if the file has one. */
const speedsUp = (text: string) => {
  const header = text.match(/^\/\*\*[\s\S]*?\*\//)?.[0] ?? ""
  return header.match(/^ \* Speeds up: [\s\S]*?(?=\n \*\s*\n|\n \*\/)/m)?.[0]
}

describe("faster paths", () => {
  it("files are named for their job, and a speed file's header says what it speeds up and the figure", () => {
    const wrong: Array<string> = []
    let speedFiles = 0
    for (const file of filesOf(src)) {
      const relative = path.relative(src, file)
      const text = fs.readFileSync(file, "utf8")
      const paragraph = speedsUp(text)
      if (file.endsWith("Fast.ts")) wrong.push(`${relative}: named for a motive, not its job`)
      if (text.includes("What it buys")) wrong.push(`${relative}: says what it buys outside a \`Speeds up:\` header`)
      if (paragraph === undefined) continue
      speedFiles++
      if (!/\d/.test(paragraph)) wrong.push(`${relative}: \`Speeds up:\` without a figure`)
    }
    assert.deepStrictEqual(wrong, [])
    assert.isAbove(speedFiles, 20)
  })

  it("reads the header's paragraph, not a mention elsewhere", () => {
    assert.isUndefined(speedsUp("/**\n * The claim.\n */\n// Speeds up: 1 %"))
    assert.match(
      speedsUp("/**\n * The claim.\n *\n * Speeds up: the claim,\n * 470 µs.\n *\n * More.\n */") ?? "",
      /470/
    )
  })
})
