/**
 * Configuration lives in one table, in one place (docs/operations.md,
 * "Configuration"): every variable the service reads is a row there, every
 * row is a variable the service reads, and no other page keeps a table of
 * settings of its own.
 */
import { assert, describe, it } from "@effect/vitest"
import * as fs from "node:fs"
import * as path from "node:path"
import { documentationPages, read } from "../../support/markdown.ts"
import { root } from "../../support/process.ts"

const filesOf = (dir: string): Array<string> =>
  fs.readdirSync(dir, { withFileTypes: true }).flatMap((entry) =>
    entry.isDirectory() ? filesOf(path.join(dir, entry.name)) : entry.name.endsWith(".ts") ? [path.join(dir, entry.name)] : []
  )

/** The variables the service reads: named literals, and the OTLP exporter's names built from a suffix. */
export const variablesRead = (sources: ReadonlyArray<string>): Set<string> => {
  const names = new Set<string>()
  for (const text of sources) {
    for (const match of text.matchAll(/"((?:SVC|OTEL)_[A-Z0-9_]+)"/g)) names.add(match[1]!)
    for (const match of text.matchAll(/Config\.\w+\("([A-Z][A-Z0-9_]*)"\)/g)) names.add(match[1]!)
    for (const match of text.matchAll(/either\(env, "([A-Z_]+)"\)/g)) {
      names.add(`OTEL_EXPORTER_OTLP_TRACES_${match[1]}`)
      names.add(`OTEL_EXPORTER_OTLP_${match[1]}`)
    }
  }
  return names
}

/** The first column of the table under the page's "Configuration" heading, `[TRACES_]` spelled both ways. */
export const variablesDocumented = (page: string): Set<string> => {
  const section = /^## Configuration\n([\s\S]*?)(?=^## )/m.exec(page)?.[1] ?? ""
  const names = new Set<string>()
  for (const row of section.split("\n").filter((line) => line.startsWith("| `"))) {
    for (const code of row.split("|")[1]!.matchAll(/`([A-Z][A-Z0-9_[\]]*)(?:=[^`]*)?`/g)) {
      const name = code[1]!
      if (name.includes("[TRACES_]")) {
        names.add(name.replace("[TRACES_]", "TRACES_"))
        names.add(name.replace("[TRACES_]", ""))
      } else names.add(name)
    }
  }
  return names
}

describe("configuration in one table, in one place", () => {
  const operations = read("docs/operations.md")
  const read_ = variablesRead(filesOf(path.join(root, "src")).filter((file) => !file.includes(`${path.sep}receiver${path.sep}`)).map((file) => fs.readFileSync(file, "utf8")))
  const documented = variablesDocumented(operations)

  it("every variable the service reads is in the configuration table of docs/operations.md", () => {
    assert.isAbove(read_.size, 70)
    assert.deepStrictEqual([...read_].filter((name) => !documented.has(name)).sort(), [])
  })

  it("every variable in the table is one the service reads", () => {
    assert.deepStrictEqual([...documented].filter((name) => !read_.has(name)).sort(), [])
  })

  it("no other page keeps a table of settings: it links to the one table", () => {
    const others = documentationPages().filter((page) => page !== "docs/operations.md").flatMap((page) =>
      read(page).split("\n").flatMap((line, i) => /^\| `(?:SVC|OTEL)_[A-Z0-9_]+`/.test(line) ? [`${page}:${i + 1}`] : [])
    )
    assert.deepStrictEqual(others, [])
  })

  it("every SVC_ or OTEL_ name the pages mention is one the code reads (the service, the example receiver and agents, the tests)", () => {
    const code = ["src", "scripts", "examples", "test/browser", "tools/cli"].flatMap((dir) => filesOf(path.join(root, dir))).map((file) => fs.readFileSync(file, "utf8")).join("\n")
    const known = new Set([...read_, ...code.matchAll(/\b(?:SVC|OTEL)_[A-Z0-9_]*[A-Z0-9]\b/g)].map((match) => typeof match === "string" ? match : match[0]))
    const unknown = documentationPages().flatMap((page) =>
      [...read(page).matchAll(/\b(?:SVC|OTEL)_[A-Z0-9_]+/g)].map((match) => match[0]).filter((name) =>
        name.endsWith("_") ? ![...known].some((knownName) => knownName.startsWith(name)) : !known.has(name)
      ).map((name) => `${page}: ${name}`)
    )
    assert.deepStrictEqual([...new Set(unknown)], [])
  })

  it("the checks read what they claim: a variable in code, a row, the [TRACES_] spelling", () => {
    const code = ['const x = intAtLeast("SVC_NEW_LIMIT", 3)', 'Config.String("HOST")', 'either(env, "HEADERS")'].join("\n")
    assert.deepStrictEqual([...variablesRead([code])].sort(), ["HOST", "OTEL_EXPORTER_OTLP_HEADERS", "OTEL_EXPORTER_OTLP_TRACES_HEADERS", "SVC_NEW_LIMIT"])
    const page = "## Configuration\n\n| variable | meaning | default |\n| --- | --- | --- |\n| `PORT`, `HOST` | a | b |\n| `OTEL_EXPORTER_OTLP_[TRACES_]TIMEOUT` | c | `10000` |\n| `OTEL_SDK_DISABLED=true` | d | |\n\n## Next\n| `SVC_ELSEWHERE` | x | y |\n"
    assert.deepStrictEqual([...variablesDocumented(page)].sort(), ["HOST", "OTEL_EXPORTER_OTLP_TIMEOUT", "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "OTEL_SDK_DISABLED", "PORT"])
  })
})
