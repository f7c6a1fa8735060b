/**
 * A page defines what its commands use: every shell variable a command
 * block reads (`$NAME`, `${NAME}`) is set earlier on the same page (`NAME=`,
 * `for NAME in`), so a reader who runs the page from its top never sends a
 * request to an empty `$SVC` or decides a stale `$APPROVAL`. The one
 * exception is the README's "Your first calls" credentials, `ORG` and
 * `KEY`, which only the CLI makes; the README itself sets them.
 */
import { assert, describe, it } from "@effect/vitest"
import { codeBlocks, read } from "../../support/markdown.ts"
import { consumerPages } from "../../support/run-blocks.ts"

const SHELLS = new Set(["sh", "bash", "shell", "console", "zsh"])
/** The README's credentials, and variables of every shell. */
const GIVEN = new Set(["ORG", "KEY", "HOME", "PATH", "PWD", "USER"])

const setIn = (code: string) =>
  [...code.matchAll(
    /(?:^|[\s;(&|])(?:export\s+|local\s+)?([A-Za-z_][A-Za-z0-9_]*)=|\bfor\s+([A-Za-z_][A-Za-z0-9_]*)\s+in\b|\bread\s+(?:-r\s+)?([A-Za-z_][A-Za-z0-9_]*)/g
  )]
    .map((match) => match[1] ?? match[2] ?? match[3]!)

const readIn = (code: string) =>
  [...code.replace(/'[^']*'/g, "''").matchAll(/\$\{?([A-Za-z_][A-Za-z0-9_]*)/g)].map((match) => match[1]!)

describe("a page defines what its commands use", () => {
  it("every variable a shell block of README, docs/ or a package README reads is set earlier on the page (but ORG and KEY)", () => {
    const undefinedUses: Array<string> = []
    for (const page of ["README.md", ...consumerPages().filter((p) => p !== "README.md")]) {
      const set = new Set(page === "README.md" ? [] : GIVEN)
      for (const name of ["HOME", "PATH", "PWD", "USER"]) set.add(name)
      for (const block of codeBlocks(page, read(page))) {
        if (!SHELLS.has(block.lang)) continue
        // Set in the block before use, or earlier on the page.
        const lines = block.code.split("\n")
        lines.forEach((line, i) => {
          for (const name of readIn(line)) {
            if (!set.has(name)) undefinedUses.push(`${page}:${block.line + i + 1}: $${name}`)
          }
          for (const name of setIn(line)) set.add(name)
        })
      }
    }
    assert.deepStrictEqual(undefinedUses, [])
  })

  it("the check reads what it claims: a use before the assignment is found, one after it is not", () => {
    assert.deepStrictEqual(readIn(`curl "$SVC/v1" -d '{"a":"$NOT"}'`), ["SVC"])
    assert.deepStrictEqual(setIn(`APPROVAL=$(echo "$STEP" | jq -r .approval_id)`), ["APPROVAL"])
    assert.deepStrictEqual(setIn(`for group in finance cfo; do`), ["group"])
  })
})
