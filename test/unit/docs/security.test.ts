/**
 * docs/security.md says what each scope permits, and nothing more: its
 * table of scopes is the API's definition (each operation's required scope,
 * read from the endpoints), its table of operations without a key is the
 * operations that need none, and its presets are the console's.
 */
import { assert, describe, it } from "@effect/vitest"
import { Context, Option } from "effect"
import { HttpApi } from "effect/http-api"
import { Api } from "../../../src/api/Api.ts"
import { ConsolePresets, RequiredScope, scopeAlternatives, Scopes } from "../../../src/api/Security.ts"
import { read } from "../../support/markdown.ts"

/** `scope` -> operations (`METHOD /path`) that scope permits, and the operations that need none under `""`. */
export const scopesInCode = (): Map<string, Set<string>> => {
  const permits = new Map<string, Set<string>>([
    ["", new Set()],
    ...Scopes.map((scope) => [scope, new Set<string>()] as const)
  ])
  HttpApi.reflect(Api, {
    onGroup() {},
    onEndpoint({ endpoint }) {
      const operation = `${endpoint.method} ${endpoint.path}`
      const required = Option.getOrUndefined(Context.getOption(endpoint.annotations, RequiredScope))
      for (const scope of required === undefined ? [""] : scopeAlternatives(required)) {
        permits.get(scope)!.add(operation)
      }
    }
  })
  return permits
}

/** The rows of the first table under `## heading`: first cell -> the code spans of the second. */
export const tableUnder = (page: string, heading: string): Map<string, Array<string>> => {
  const section = new RegExp(`^## ${heading}\\n([\\s\\S]*?)(?=^## |(?![\\s\\S]))`, "m").exec(page)?.[1] ?? ""
  const rows = new Map<string, Array<string>>()
  const lines = section.split("\n")
  const start = lines.findIndex((line) => line.startsWith("|"))
  for (const line of lines.slice(start + 2)) {
    if (!line.startsWith("|")) break
    const [, first, second] = line.split("|")
    rows.set(first!.trim(), [...second!.matchAll(/`([^`]+)`/g)].map((match) => match[1]!))
  }
  return rows
}

const unquote = (cell: string) => cell.replace(/^`|`$/g, "")

describe("docs/security.md against the code", () => {
  const page = read("docs/security.md")
  const inCode = scopesInCode()

  it("the scope table has one row per scope, each listing exactly the operations that scope permits", () => {
    const documented = tableUnder(page, "Scopes")
    assert.deepStrictEqual([...documented.keys()].map(unquote).sort(), [...Scopes].sort())
    const wrong: Array<string> = []
    for (const [cell, operations] of documented) {
      const scope = unquote(cell)
      const expected = [...(inCode.get(scope) ?? [])].sort()
      const listed = [...operations].sort()
      if (JSON.stringify(expected) !== JSON.stringify(listed)) {
        wrong.push(
          `${scope}: missing ${expected.filter((op) => !listed.includes(op)).join(", ") || "none"}; ` +
            `not permitted ${listed.filter((op) => !expected.includes(op)).join(", ") || "none"}`
        )
      }
    }
    assert.deepStrictEqual(wrong, [])
  })

  it("the operations without a key are exactly those that need no scope", () => {
    const documented = [...tableUnder(page, "Operations without a key").keys()].flatMap((cell) =>
      [...cell.matchAll(/`([^`]+)`/g)].map((match) => match[1]!)
    )
    assert.deepStrictEqual(documented.sort(), [...inCode.get("")!].sort())
  })

  it("the presets table is the console's presets", () => {
    const documented = tableUnder(page, "Console people and presets")
    assert.deepStrictEqual([...documented.keys()].map(unquote).sort(), Object.keys(ConsolePresets).sort())
    for (const [cell, scopes] of documented) {
      const preset = unquote(cell) as keyof typeof ConsolePresets
      const expected = preset === "admin" ? [] : [...ConsolePresets[preset]].sort()
      assert.deepStrictEqual([...scopes].sort(), expected, preset)
    }
    assert.deepStrictEqual([...ConsolePresets.admin].sort(), [...Scopes].sort(), "admin holds every scope")
  })

  it("the checks read what they claim: a row, its code spans, a scope of several alternatives", () => {
    const sample =
      "## Scopes\n\ntext\n\n| scope | ops |\n| --- | --- |\n| `a.b` | `GET /x`, `POST /y` |\n\nafter\n\n## Next\n| `c` | `GET /z` |\n"
    assert.deepStrictEqual([...tableUnder(sample, "Scopes")], [["`a.b`", ["GET /x", "POST /y"]]])
    assert.include([...inCode.get("feedback.review")!], "POST /v1/feedback/:feedback_id/stage")
    assert.include([...inCode.get("feedback.write")!], "POST /v1/feedback/:feedback_id/stage")
    assert.include([...inCode.get("")!], "GET /health")
  })
})
