/**
 * `svc --help` and every CLI command load `src/cli/Program.ts` and what it
 * imports statically. An index module (`effect`, `effect/cli`, `effect/sql`)
 * loads every module of its package: `effect`'s alone about 85 more than
 * the CLI uses (`--help` 243 modules instead of 328). So the modules
 * `Program.ts` reaches name Effect's modules one by one (`effect/Effect`);
 * type-only imports cost nothing at run time.
 */
import { assert, describe, it } from "@effect/vitest"
import * as fs from "node:fs"
import * as path from "node:path"

const src = path.join(import.meta.dirname, "../../../src")
const INDEXES = new Set(["effect", "effect/cli", "effect/sql"])

/** The files `entry` loads through static, value imports of our own sources. */
const reached = (entry: string): Set<string> => {
  const seen = new Set<string>()
  const visit = (file: string) => {
    if (seen.has(file)) return
    seen.add(file)
    for (const match of fs.readFileSync(file, "utf8").matchAll(/^import (?!type )[^;"]*?from "(\.\.?\/[^"]+)"/gms)) {
      visit(path.resolve(path.dirname(file), match[1]!))
    }
  }
  visit(entry)
  return seen
}

describe("the CLI's modules", () => {
  it("import Effect's modules one by one, never an index that loads a whole package", () => {
    const offenders: Array<string> = []
    for (const file of reached(path.join(src, "cli/Program.ts"))) {
      for (const match of fs.readFileSync(file, "utf8").matchAll(/^import (?!type )[^;"]*?from "([^"]+)"/gms)) {
        if (INDEXES.has(match[1]!)) offenders.push(`${path.relative(src, file)}: ${match[1]}`)
      }
    }
    assert.deepStrictEqual(offenders, [])
  })
})
