/**
 * The CLI table of docs/operations.md ("The CLI") is the CLI: every command
 * of its tree (`src/cli/Commands.ts`, walked as effect/cli builds its help)
 * is a row with every flag it takes, and every command and flag of the
 * table is one the CLI has. `--json`, which every command takes, is said
 * once above the table.
 */
import { assert, describe, it } from "@effect/vitest"
import type { Command } from "effect/cli"
import { commands } from "../../../src/cli/Commands.ts"
import { read } from "../../support/markdown.ts"

interface Leaf {
  readonly path: string
  readonly flags: ReadonlySet<string>
}

/** What `--help` of a command lists, from the help document effect/cli renders it from. */
interface WithHelp {
  readonly buildHelpDoc: (path: ReadonlyArray<string>) => { readonly flags: ReadonlyArray<{ readonly name: string }> }
}

/** The commands that run something (no subcommands), with the flags each takes. */
export const leavesOf = (command: Command.Command.Any, path: ReadonlyArray<string> = []): Array<Leaf> => {
  const children = command.subcommands.flatMap((group) => group.commands)
  if (children.length > 0) return children.flatMap((child) => leavesOf(child, [...path, child.name]))
  const doc = (command as unknown as WithHelp).buildHelpDoc(["svc", ...path])
  return [{
    path: path.join(" "),
    flags: new Set(doc.flags.map((flag) => flag.name).filter((name) => name !== "json"))
  }]
}

/** Each code span of the table's first column: the command's words, then the flags it shows. */
export const leavesDocumented = (page: string): Array<Leaf> => {
  const section = /^## The CLI\n([\s\S]*?)(?=^## )/m.exec(page)?.[1] ?? ""
  return section.split("\n").filter((line) => line.startsWith("| `")).flatMap((row) => {
    const first = row.split(/(?<!\\)\|/)[1]!
    return [...first.matchAll(/`([^`]+)`/g)].map((match) => {
      const words = match[1]!.split(/\s+/)
      const path = words.slice(0, words.findIndex((word) => !/^[a-z][a-z-]*$/.test(word)) >>> 0).join(" ")
      return {
        path,
        flags: new Set(
          [...match[1]!.matchAll(/--([a-z][a-z-]*)/g)].map((flag) => flag[1]!).filter((name) => name !== "json")
        )
      }
    })
  })
}

describe("the CLI table of docs/operations.md is the CLI", () => {
  const tree = leavesOf(commands)
  const table = leavesDocumented(read("docs/operations.md"))

  it("every command of the CLI is in the table, and every command of the table is one the CLI has", () => {
    assert.isAtLeast(tree.length, 12)
    assert.deepStrictEqual(table.map((leaf) => leaf.path).sort(), tree.map((leaf) => leaf.path).sort())
  })

  it("each command's row shows every flag it takes, and no other", () => {
    const differences = tree.flatMap((leaf) => {
      const row = table.find((documented) => documented.path === leaf.path)
      if (row === undefined) return []
      const missing = [...leaf.flags].filter((flag) => !row.flags.has(flag)).map((flag) =>
        `${leaf.path}: --${flag} is not in the table`
      )
      const extra = [...row.flags].filter((flag) => !leaf.flags.has(flag)).map((flag) =>
        `${leaf.path}: the table's --${flag} is not a flag of it`
      )
      return [...missing, ...extra]
    })
    assert.deepStrictEqual(differences, [])
  })

  it("the checks read what they claim: a command's words and flags, several commands in a row, a pipe in a cell", () => {
    const page =
      "## The CLI\n\n| command | does |\n| --- | --- |\n| `orgs create --name NAME`, `orgs list` | a |\n| `console login --preset a\\|b [--ttl 15m]` | b |\n| `db query \"SELECT 1\"` | c |\n\n## Next\n"
    assert.deepStrictEqual(leavesDocumented(page).map((leaf) => [leaf.path, [...leaf.flags]]), [
      ["orgs create", ["name"]],
      ["orgs list", []],
      ["console login", ["preset", "ttl"]],
      ["db query", []]
    ])
    const keysCreate = tree.find((leaf) => leaf.path === "keys create")
    assert.deepStrictEqual([...keysCreate!.flags].sort(), ["name", "org", "scopes"])
  })
})
