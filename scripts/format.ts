/**
 * `npm run format` formats the files dprint.json selects, in place, with the
 * settings it names; `npm run format:check` (`--check`) lists the files that
 * are not formatted and exits 1 if there are any.
 *
 * It runs dprint's TypeScript plugin (`@dprint/typescript`, WebAssembly) in
 * dprint's own host for JavaScript (`@dprint/formatter`): the same output
 * as the dprint CLI with the same plugin and configuration, without the CLI's
 * 27 MB native binary in every contributor's install. Files are those git
 * tracks or would track (the CLI also skips what .gitignore names), outside
 * dprint.json's `excludes`, whose names end as its `includes` say; files
 * named after the options narrow it to those.
 */
import { createFromBuffer, type GlobalConfiguration } from "@dprint/formatter"
import { execFileSync } from "node:child_process"
import { globSync, readFileSync, writeFileSync } from "node:fs"
import { join, matchesGlob, relative } from "node:path"
import { fileURLToPath } from "node:url"

interface Config extends GlobalConfiguration {
  readonly $schema?: string
  readonly typescript?: Record<string, unknown>
  readonly includes: ReadonlyArray<string>
  readonly excludes: ReadonlyArray<string>
  readonly plugins: ReadonlyArray<string>
}

const root = fileURLToPath(new URL("../", import.meta.url))
const config: Config = JSON.parse(readFileSync(join(root, "dprint.json"), "utf8"))
const check = process.argv.includes("--check")
// `npm run format -- src/a.ts test/b.ts`: only those of the selected files.
const named = new Set(process.argv.slice(2).filter((arg) => !arg.startsWith("--")).map((file) => relative(root, file)))

// `**/name` leaves out a folder of that name anywhere; `name` the one at the top; a
// pattern with a wildcard elsewhere (`console/src/**/*.tsx`) the files it matches.
const excluded = (file: string) =>
  config.excludes.some((pattern) => {
    const parts = file.split("/")
    if (pattern.startsWith("**/")) return parts.slice(0, -1).includes(pattern.slice(3)) || file === pattern.slice(3)
    if (pattern.includes("*")) return matchesGlob(file, pattern)
    return file === pattern || file.startsWith(`${pattern}/`)
  })

// `**/*.{ts,tsx}` style: the extensions inside the braces, or the one after the last dot.
const extensions = new Set(config.includes.flatMap((pattern) => {
  const braces = /\{([^}]*)\}$/.exec(pattern)
  return braces !== null ? braces[1]!.split(",").map((ext) => `.${ext}`) : [pattern.slice(pattern.lastIndexOf("."))]
}))

const candidates = (): ReadonlyArray<string> => {
  try {
    const listed = execFileSync("git", ["ls-files", "-z", "--cached", "--others", "--exclude-standard"], {
      cwd: root,
      encoding: "utf8",
      maxBuffer: 64 * 1024 * 1024,
      stdio: ["ignore", "pipe", "ignore"]
    })
    return listed.split("\0").filter((file) => file !== "")
  } catch {
    // Not a git checkout: every file under the root.
    return globSync("**/*", { cwd: root, exclude: (name) => name === "node_modules" || name === ".git" })
  }
}

const files = [...new Set(candidates())]
  .filter((file) => extensions.has(file.slice(file.lastIndexOf("."))) && !excluded(file))
  .filter((file) => named.size === 0 || named.has(file))
  .sort()

const formatter = createFromBuffer(readFileSync(join(root, config.plugins[0]!)))
// The global settings dprint.json holds: all but the schema, the file selection and the plugins.
const { $schema: _schema, excludes: _excludes, includes: _includes, plugins: _plugins, typescript, ...global } = config
formatter.setConfig(global, typescript ?? {})
const diagnostics = formatter.getConfigDiagnostics()
if (diagnostics.length > 0) {
  for (const diagnostic of diagnostics) console.error(`dprint.json: ${diagnostic.propertyName}: ${diagnostic.message}`)
  process.exit(2)
}

// Like the CLI, format again until the text no longer changes: one pass can
// leave a line that the next pass wraps differently (about 40 files here).
const stable = (path: string, text: string) => {
  let current = text
  for (let pass = 0; pass < 5; pass++) {
    const next = formatter.formatText({ filePath: path, fileText: current })
    if (next === current) return current
    current = next
  }
  throw new Error("formatting is not stable after 5 passes")
}

let unformatted = 0
let failed = 0
for (const file of files) {
  const path = join(root, file)
  let text: string
  try {
    text = readFileSync(path, "utf8")
  } catch {
    continue // listed by git but deleted in the working tree
  }
  let formatted: string
  try {
    formatted = stable(path, text)
  } catch (error) {
    failed++
    console.error(`${relative(root, path)}: ${error instanceof Error ? error.message : String(error)}`)
    continue
  }
  if (formatted === text) continue
  unformatted++
  if (check) console.log(file)
  else writeFileSync(path, formatted)
}

if (check && unformatted > 0) {
  console.error(`${unformatted} of ${files.length} files are not formatted (npm run format)`)
} else if (!check) console.error(`${unformatted} of ${files.length} files formatted`)
process.exit(failed > 0 || (check && unformatted > 0) ? 1 : 0)
