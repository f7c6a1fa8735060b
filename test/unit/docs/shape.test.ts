/**
 * The README is the way in and stays short: what svc is, a picture, the
 * quick start, the first calls, the packages, where to go next, the layout
 * and how to contribute, in at most 300 lines; the rest is in docs/. The
 * changelog keeps the Keep a Changelog shape, one section per release, the
 * coming one (the version the code says) first, so every release and every
 * breaking change is found in the same place.
 */
import { assert, describe, it } from "@effect/vitest"
import { VERSION } from "../../../src/api/Version.ts"
import { compareVersions } from "../../../src/database/Migrations.ts"
import { codeBlocks, read } from "../../support/markdown.ts"

export const README_MAX_LINES = 300
const README_SECTIONS = [
  "Quick start",
  "Your first calls",
  "Install the packages",
  "Where to go next",
  "Layout",
  "Contributing"
]
const CHANGE_KINDS = new Set(["Added", "Changed", "Deprecated", "Removed", "Fixed", "Security"])

/** Why a changelog is out of shape, or nothing. */
export const changelogProblems = (text: string): Array<string> => {
  const problems: Array<string> = []
  const lines = text.split("\n")
  if (lines[0] !== "# Changelog") problems.push("the first line is not \"# Changelog\"")
  const releases = lines.filter((line) => line.startsWith("## "))
  if (releases[0] !== `## ${VERSION} (unreleased)`) {
    problems.push(`the first section is not "## ${VERSION} (unreleased)"`)
  }
  const released = releases.slice(1)
  for (const release of released) {
    if (!/^## \d+\.\d+\.\d+( - \d{4}-\d{2}-\d{2})?$/.test(release)) {
      problems.push(`"${release}" is not "## x.y.z" or "## x.y.z - YYYY-MM-DD"`)
    }
  }
  const versions = released.map((release) => release.slice(3).split(" ")[0]!)
  if (versions.some((version, i) => compareVersions(version, i === 0 ? VERSION : versions[i - 1]!) >= 0)) {
    problems.push("releases are not listed newest first, below the coming one")
  }
  for (const kind of lines.filter((line) => line.startsWith("### "))) {
    if (!CHANGE_KINDS.has(kind.slice(4))) problems.push(`"${kind}" is not one of ${[...CHANGE_KINDS].join(", ")}`)
  }
  for (const line of lines.filter((line) => /\bbreaking\b/i.test(line) && line.startsWith("- "))) {
    if (!/\*\*Breaking\*\*/.test(line)) problems.push(`"${line}" names a breaking change without **Breaking**`)
  }
  return problems
}

describe("the README is the way in", () => {
  const readme = read("README.md")

  it(`has at most ${README_MAX_LINES} lines`, () => {
    assert.isAtMost(readme.split("\n").length, README_MAX_LINES)
  })

  it("says what svc is, shows how it fits in a diagram, then the quick start, first calls, the packages, the pages, the layout and how to contribute", () => {
    const headings = readme.split("\n").filter((line) => line.startsWith("## ")).map((line) => line.slice(3))
    assert.deepStrictEqual(headings, README_SECTIONS)
    const beforeQuickStart = readme.slice(0, readme.indexOf("## Quick start"))
    assert.isTrue(
      codeBlocks("README.md", beforeQuickStart).some((block) => block.lang === "mermaid"),
      "a Mermaid diagram before the quick start"
    )
  })
})

describe("the changelog", () => {
  it("keeps the Keep a Changelog shape", () => {
    assert.deepStrictEqual(changelogProblems(read("CHANGELOG.md")), [])
  })

  it("the check sees a missing section for the coming release, a malformed release, an unknown kind and an unmarked breaking change", () => {
    const bad = "# Changelog\n\n## 1.0.0\n\n### Improved\n\n## v0.9\n\n- Breaking: renamed a field\n"
    assert.lengthOf(changelogProblems(bad), 4)
  })
})
