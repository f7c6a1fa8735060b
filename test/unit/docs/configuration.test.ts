/**
 * Configuration lives in one table, in one place (docs/operations.md,
 * "Configuration"): every variable the service reads is a row there, every
 * row is a variable the service reads, each default the table gives is the
 * code's, and no other page keeps a table of settings of its own.
 */
import { assert, describe, it } from "@effect/vitest"
import { ConfigProvider, Duration, Effect } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import { parseOtelEnv } from "../../../src/observability/OtelEnv.ts"
import { svcConfig } from "../../../src/platform/Config.ts"
import { documentationPages, read } from "../../support/markdown.ts"
import { root } from "../../support/process.ts"

const filesOf = (dir: string): Array<string> =>
  fs.readdirSync(dir, { withFileTypes: true }).flatMap((entry) =>
    entry.isDirectory()
      ? filesOf(path.join(dir, entry.name))
      : entry.name.endsWith(".ts")
      ? [path.join(dir, entry.name)]
      : []
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

/**
 * The defaults the table gives, by variable: a default cell that starts
 * with code (`8080`) is the default of the row's variables, one value per
 * variable in their order (`PORT`, `HOST` | `8080`, `127.0.0.1`). A cell
 * that starts with words ("unset: …", "empty") gives none to check.
 */
export const defaultsDocumented = (page: string): Map<string, string> => {
  const section = /^## Configuration\n([\s\S]*?)(?=^## )/m.exec(page)?.[1] ?? ""
  const defaults = new Map<string, string>()
  for (const row of section.split("\n").filter((line) => line.startsWith("| `"))) {
    const cells = row.split(/(?<!\\)\|/).map((cell) => cell.trim())
    const names = [...cells[1]!.matchAll(/`([A-Z][A-Z0-9_[\]]*)`/g)].map((match) => match[1]!)
    const cell = cells[3] ?? ""
    if (!cell.startsWith("`")) continue
    const values = [...cell.matchAll(/`([^`]*)`/g)].map((match) => match[1]!)
    names.forEach((name, i) => {
      const value = values[i]
      if (value === undefined) return
      for (
        const spelled of name.includes("[TRACES_]")
          ? [name.replace("[TRACES_]", "TRACES_"), name.replace("[TRACES_]", "")]
          : [name]
      ) {
        defaults.set(spelled, value)
      }
    })
  }
  return defaults
}

/** What svc makes of an environment, read the way it reads it: one value to compare. */
const readers = {
  config: (env: Record<string, string>) =>
    JSON.stringify(
      Effect.runSync(Effect.provideService(svcConfig, ConfigProvider.ConfigProvider, ConfigProvider.fromUnknown(env)))
    ),
  // The operator's traces are read only when a collector is named.
  otel: (env: Record<string, string>) =>
    JSON.stringify(parseOtelEnv({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://collector.test:4318", ...env }))
}

describe("configuration in one table, in one place", () => {
  const operations = read("docs/operations.md")
  const read_ = variablesRead(
    filesOf(path.join(root, "src")).filter((file) => !file.includes(`${path.sep}receiver${path.sep}`)).map((file) =>
      fs.readFileSync(file, "utf8")
    )
  )
  const documented = variablesDocumented(operations)

  it("every variable the service reads is in the configuration table of docs/operations.md", () => {
    assert.isAbove(read_.size, 70)
    assert.deepStrictEqual([...read_].filter((name) => !documented.has(name)).sort(), [])
  })

  it("every variable in the table is one the service reads", () => {
    assert.deepStrictEqual([...documented].filter((name) => !read_.has(name)).sort(), [])
  })

  it("each default the table gives is the code's: setting a variable to it changes nothing svc reads", () => {
    const defaults = defaultsDocumented(operations)
    const configSource = fs.readFileSync(path.join(root, "src/platform/Config.ts"), "utf8")
    const checked: Array<string> = []
    const wrong: Array<string> = []
    for (const [name, value] of defaults) {
      const reader = configSource.includes(`"${name}"`)
        ? readers.config
        : name.startsWith("OTEL_") || name === "SVC_OPERATOR_TRACE_PARENT_RATE"
        ? readers.otel
        : undefined
      if (reader === undefined) continue
      checked.push(name)
      let same: boolean
      try {
        same = reader({ [name]: value }) === reader({})
      } catch (error) {
        same = false
        wrong.push(`${name}=${value}: ${String(error)}`)
        continue
      }
      if (!same) wrong.push(`${name}: the table says \`${value}\`, the code's default is another`)
    }
    assert.deepStrictEqual(wrong, [])
    // Most rows give a default; every one is checked.
    assert.isAbove(checked.length, 60)
    assert.deepStrictEqual([...defaults.keys()].filter((name) => !checked.includes(name)), [])
  })

  it("the defaults check sees a wrong default", () => {
    const page =
      "## Configuration\n\n| variable | meaning | default |\n| --- | --- | --- |\n| `PORT`, `HOST` | a | `9090`, `127.0.0.1` |\n| `SVC_PUBLIC_URL` | b | unset: `http://HOST:PORT` |\n\n## Next\n"
    const defaults = defaultsDocumented(page)
    assert.deepStrictEqual([...defaults], [["PORT", "9090"], ["HOST", "127.0.0.1"]])
    assert.notStrictEqual(readers.config({ PORT: "9090" }), readers.config({}))
    assert.strictEqual(readers.config({ HOST: "127.0.0.1" }), readers.config({}))
  })

  it("the retry time docs/webhooks.md promises is the sum of the default SVC_WEBHOOK_RETRY_SCHEDULE", () => {
    const config = Effect.runSync(
      Effect.provideService(svcConfig, ConfigProvider.ConfigProvider, ConfigProvider.fromUnknown({}))
    )
    const minutes = Math.round(
      config.webhookRetrySchedule.reduce((sum, delay) => sum + Duration.toMillis(delay), 0) / 60_000
    )
    const said = `${Math.floor(minutes / 60)} h ${minutes % 60} min`
    const webhooks = read("docs/webhooks.md")
    assert.strictEqual(said, "27 h 35 min")
    assert.isAtLeast(
      webhooks.split(said).length - 1,
      2,
      `docs/webhooks.md says ${said} in its introduction and under Delivery`
    )
    // No other span of retrying is promised there.
    assert.notMatch(webhooks, /day and a half|\b\d+ h \d+ min\b(?<!27 h 35 min)/)
  })

  it("no other page keeps a table of settings: it links to the one table", () => {
    const others = documentationPages().filter((page) => page !== "docs/operations.md").flatMap((page) =>
      read(page).split("\n").flatMap((line, i) =>
        /^\| `(?:SVC|OTEL)_[A-Z0-9_]+`/.test(line) ? [`${page}:${i + 1}`] : []
      )
    )
    assert.deepStrictEqual(others, [])
  })

  it("every SVC_ or OTEL_ name the pages mention is one the code reads (the service, the example receiver and agents, the tests)", () => {
    const code = ["src", "scripts", "examples", "test/browser", "tools/cli"].flatMap((dir) =>
      filesOf(path.join(root, dir))
    ).map((file) => fs.readFileSync(file, "utf8")).join("\n")
    const known = new Set(
      [...read_, ...code.matchAll(/\b(?:SVC|OTEL)_[A-Z0-9_]*[A-Z0-9]\b/g)].map((match) =>
        typeof match === "string" ? match : match[0]
      )
    )
    const unknown = documentationPages().flatMap((page) =>
      [...read(page).matchAll(/\b(?:SVC|OTEL)_[A-Z0-9_]+/g)].map((match) => match[0]).filter((name) =>
        name.endsWith("_") ? ![...known].some((knownName) => knownName.startsWith(name)) : !known.has(name)
      ).map((name) => `${page}: ${name}`)
    )
    assert.deepStrictEqual([...new Set(unknown)], [])
  })

  it("the checks read what they claim: a variable in code, a row, the [TRACES_] spelling", () => {
    const code = ["const x = intAtLeast(\"SVC_NEW_LIMIT\", 3)", "Config.String(\"HOST\")", "either(env, \"HEADERS\")"]
      .join("\n")
    assert.deepStrictEqual([...variablesRead([code])].sort(), [
      "HOST",
      "OTEL_EXPORTER_OTLP_HEADERS",
      "OTEL_EXPORTER_OTLP_TRACES_HEADERS",
      "SVC_NEW_LIMIT"
    ])
    const page =
      "## Configuration\n\n| variable | meaning | default |\n| --- | --- | --- |\n| `PORT`, `HOST` | a | b |\n| `OTEL_EXPORTER_OTLP_[TRACES_]TIMEOUT` | c | `10000` |\n| `OTEL_SDK_DISABLED=true` | d | |\n\n## Next\n| `SVC_ELSEWHERE` | x | y |\n"
    assert.deepStrictEqual([...variablesDocumented(page)].sort(), [
      "HOST",
      "OTEL_EXPORTER_OTLP_TIMEOUT",
      "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT",
      "OTEL_SDK_DISABLED",
      "PORT"
    ])
  })
})
