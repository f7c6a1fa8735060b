/**
 * The error table of docs/api.md ("Errors") is the API's errors, no more
 * and no fewer: every problem code the service answers with, at its status
 * (the typed errors of `src/api`, the answers the router-wide middleware
 * makes of the framework's own, and those of `/metrics`), is a row, and
 * every row is one of them.
 */
import { assert, describe, it } from "@effect/vitest"
import * as fs from "node:fs"
import * as path from "node:path"
import { read } from "../../support/markdown.ts"
import { root } from "../../support/process.ts"

/** `CODE status` pairs the code answers with. */
export const problemsInCode = (sources: ReadonlyArray<string>): Set<string> => {
  const pairs = new Set<string>()
  for (const text of sources) {
    // A typed problem: `type: problemType("CODE"), status: 404`, or through
    // `Problem` of src/api/Errors.ts: `code: "CODE", status: 404`.
    for (const match of text.matchAll(/(?:problemType\("|\bcode: ")([A-Z_]+)"\)?,\s*status: (\d{3})/g)) {
      pairs.add(`${match[1]} ${match[2]}`)
    }
    // The middleware's problems for the framework's answers: `404: { code: "NOT_FOUND", ...`.
    // A wrong method (405) is answered as an unknown route, 404.
    for (const match of text.matchAll(/^\s*(\d{3}): \{ code: "([A-Z_]+)"/gm)) {
      if (match[1] === "405" && text.includes("response.status === 405 ? 404")) continue
      pairs.add(`${match[2]} ${match[1]}`)
    }
    // Hand-made problems: `problem(403, "FORBIDDEN", ...`.
    for (const match of text.matchAll(/\bproblem\((\d{3}), "([A-Z_]+)"/g)) pairs.add(`${match[2]} ${match[1]}`)
  }
  return pairs
}

/** `CODE status` pairs of the table under "## Errors": each code of a row at each status of it. */
export const problemsDocumented = (page: string): Set<string> => {
  const section = /^## Errors\n([\s\S]*?)(?=^## )/m.exec(page)?.[1] ?? ""
  const pairs = new Set<string>()
  for (const row of section.split("\n").filter((line) => /^\| \d{3}/.test(line))) {
    const [, statuses, codes] = row.split("|")
    for (const code of codes!.matchAll(/`([A-Z_]+)`/g)) {
      for (const status of statuses!.matchAll(/\d{3}/g)) pairs.add(`${code[1]} ${status[0]}`)
    }
  }
  return pairs
}

const API_SOURCES = ["src/api", "src/server/Middleware.ts", "src/observability/Http.ts"]

const sourcesOf = (entry: string): Array<string> => {
  const full = path.join(root, entry)
  return fs.statSync(full).isDirectory()
    ? fs.readdirSync(full).filter((name) => name.endsWith(".ts")).map((name) =>
      fs.readFileSync(path.join(full, name), "utf8")
    )
    : [fs.readFileSync(full, "utf8")]
}

describe("the error table of docs/api.md is the API's errors", () => {
  const inCode = problemsInCode(API_SOURCES.flatMap(sourcesOf))
  const documented = problemsDocumented(read("docs/api.md"))
  const codesDocumented = new Set([...documented].map((pair) => pair.split(" ")[0]!))
  const codesInCode = new Set([...inCode].map((pair) => pair.split(" ")[0]!))

  it("every code the API answers with is a row, at its status", () => {
    assert.isAbove(inCode.size, 34)
    assert.deepStrictEqual([...inCode].filter((pair) => !documented.has(pair)).sort(), [])
  })

  it("every code of the table is one the API answers with", () => {
    assert.deepStrictEqual([...codesDocumented].filter((code) => !codesInCode.has(code)).sort(), [])
  })

  it("the checks read what they claim: a typed problem, a middleware answer, a hand-made one, a row of several codes", () => {
    const code = [
      "export class X extends HttpApiError.Problem<X>()(\"X\", {\n  type: problemType(\"SOME_CODE\"),\n  status: 409,",
      "export class Y extends Problem<Y>()(\"Y\", {\n  code: \"OTHER_CODE\",\n  status: 400,",
      "const problems = {\n  406: { code: \"NOT_ACCEPTABLE\", title: \"x\" },\n}",
      "return problem(403, \"FORBIDDEN\", \"t\", \"d\")"
    ]
    assert.deepStrictEqual([...problemsInCode(code)].sort(), [
      "FORBIDDEN 403",
      "NOT_ACCEPTABLE 406",
      "OTHER_CODE 400",
      "SOME_CODE 409"
    ])
    const page =
      "## Errors\n\n| status | code | when |\n| --- | --- | --- |\n| 400, 410 | `A`, `B` | x |\n| 404 | `C` | `D` is not a code here |\n\n## Next\n| 500 | `E` | y |\n"
    assert.deepStrictEqual([...problemsDocumented(page)].sort(), ["A 400", "A 410", "B 400", "B 410", "C 404"])
  })
})
