/**
 * Every relative link and anchor in the README, the changelog and docs/
 * resolves: a moved page or a renamed heading fails here, not in a reader's
 * browser. Anchors are GitHub's (github-slugger).
 */
import { assert, describe, it } from "@effect/vitest"
import * as fs from "node:fs"
import * as path from "node:path"
import {
  deadLink,
  documentationPages,
  linksOf,
  outsideFences,
  read,
  readRepositoryPath,
  slugsOf
} from "../../support/markdown.ts"
import { root } from "../../support/process.ts"

/** Code spans that name a file or folder of the repository: `src/feedback/KeywordScan.ts`, `Statements.ts`. */
export const namedPaths = (text: string): Array<string> =>
  [...outsideFences(text).matchAll(/`([^`\s]+)`/g)].map((match) => match[1]!).filter((span) =>
    /^(?:src|test|scripts|bench|tools|console|docs)\/[\w./-]*$/.test(span) || /^[\w-]+\.(?:ts|tsx)$/.test(span)
  )

const basenames = (dir: string, into = new Set<string>()): Set<string> => {
  for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
    if (entry.name === "node_modules" || entry.name === "dist") continue
    if (entry.isDirectory()) basenames(path.join(dir, entry.name), into)
    else into.add(entry.name)
  }
  return into
}

describe("links in the documentation", () => {
  it("every relative link names a file of the repository and every anchor a heading of its page", () => {
    // Beside the documentation, the contributors' guide and the READMEs of the benchmark and of the packages.
    const pages = [
      ...documentationPages(),
      "CONTRIBUTING.md",
      "bench/README.md",
      "packages/receiver/README.md",
      "packages/client/README.md",
      "packages/testing/README.md"
    ]
    const links = pages.flatMap((page) => linksOf(page, read(page)))
    assert.isAbove(links.length, 50, "the pages link to each other")
    const dead = links.flatMap((link) => {
      const reason = deadLink(link, readRepositoryPath)
      return reason === undefined ? [] : [`${link.page}:${link.line}: ${reason}`]
    })
    assert.deepStrictEqual(dead, [])
  })

  it("every file the pages name in code exists: a path by its path, a bare file name somewhere in the code", () => {
    const files = ["src", "test", "scripts", "bench", "tools", "console"].reduce(
      (set, dir) => basenames(path.join(root, dir), set),
      new Set<string>()
    )
    const missing = documentationPages().flatMap((page) =>
      namedPaths(read(page)).filter((name) =>
        name.includes("/") ? !fs.existsSync(path.join(root, name)) : !files.has(name)
      ).map((name) => `${page}: ${name}`)
    )
    assert.deepStrictEqual(missing, [])
    assert.deepStrictEqual(namedPaths("See `src/feedback/KeywordScan.ts`, `Gone.ts`, `npm test` and `svc/client`."), [
      "src/feedback/KeywordScan.ts",
      "Gone.ts"
    ])
  })

  it("the README links to every page of docs/", () => {
    const linked = new Set(linksOf("README.md", read("README.md")).map((link) => link.target.split("#")[0]))
    const missing = documentationPages().filter((page) => page.startsWith("docs/") && !linked.has(page))
    assert.deepStrictEqual(missing, [])
  })

  it("anchors follow GitHub's slugs: lower case, punctuation dropped, spaces made hyphens, repeats numbered", () => {
    const text = [
      "# Where svc stands",
      "## The service's own traces",
      "### `/metrics`",
      "## Verifying in Python, Go and Ruby",
      "## Setup",
      "## Setup",
      "## [Linked](x.md) **bold** SVC_DATA_DIR",
      "```sh",
      "# not a heading",
      "```"
    ].join("\n")
    assert.deepStrictEqual([...slugsOf(text)], [
      "where-svc-stands",
      "the-services-own-traces",
      "metrics",
      "verifying-in-python-go-and-ruby",
      "setup",
      "setup-1",
      "linked-bold-svc_data_dir"
    ])
  })

  it("the check finds a missing page, a missing anchor, an anchor into a file without headings, and passes what resolves", () => {
    const pages: Record<string, string> = { "docs/a.md": "# Title\n## Part one\n", "docs/b.md": "", "src/x.ts": "" }
    const readPage = (page: string) => pages[page]
    const check = (target: string) => deadLink({ page: "docs/b.md", line: 1, target }, readPage)
    assert.isUndefined(check("a.md#part-one"))
    assert.isUndefined(check("a.md"))
    assert.isUndefined(check("https://example.com/#anything"))
    assert.isUndefined(check("../src/x.ts"))
    assert.match(check("c.md") ?? "", /docs\/c\.md does not exist/)
    assert.match(check("a.md#part-two") ?? "", /no heading with the anchor #part-two/)
    assert.match(check("#title") ?? "", /no heading/)
    assert.match(check("../src/x.ts#L3") ?? "", /no headings/)
    assert.match(check("../../outside.md") ?? "", /leaves the repository/)
  })

  it("links inside code are not links", () => {
    const links = linksOf("docs/b.md", "See [a](a.md) and `[b](b.md)`.\n```md\n[c](c.md)\n```\n")
    assert.deepStrictEqual(links.map((link) => link.target), ["a.md"])
  })
})
