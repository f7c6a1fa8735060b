/**
 * The bundle the installed `svc` command runs (scripts/bundle-cli.ts): one
 * copy of Effect in a process, every worker thread and child process found beside the module
 * that starts it, and no file that nothing loads.
 */
import { assert, describe, it } from "@effect/vitest"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { importsOf } from "../../../scripts/build-packages.ts"
import { BUNDLE_ENTRIES, bundleCli } from "../../../scripts/bundle-cli.ts"

const root = path.join(import.meta.dirname, "../../..")

const sourcesUnder = (dir: string): Array<string> =>
  fs.readdirSync(dir, { recursive: true, withFileTypes: true })
    .filter((entry) => entry.isFile() && entry.name.endsWith(".ts"))
    .map((entry) => path.join(entry.parentPath, entry.name))

describe("the CLI bundle", () => {
  it("has an entry point for every module svc starts as a worker thread", () => {
    const workers = sourcesUnder(path.join(root, "src")).flatMap((file) =>
      [...fs.readFileSync(file, "utf8").matchAll(/siblingModule\("(\.\/[^"]+\.ts)"/g)].map((match) =>
        path.relative(root, path.resolve(path.dirname(file), match[1]!)).split(path.sep).join("/")
      )
    )
    assert.isAbove(workers.length, 3)
    const entries: ReadonlyArray<string> = Object.values(BUNDLE_ENTRIES)
    assert.deepStrictEqual([...new Set(workers)].filter((worker) => !entries.includes(worker)), [])
  })

  it("imports no Effect package from node_modules, and holds only files its entry points load", async () => {
    const out = fs.mkdtempSync(path.join(os.tmpdir(), "svc-cli-bundle-"))
    try {
      await bundleCli(out)
      const files = fs.readdirSync(out)
      const imported = new Set<string>()
      const effectImports: Array<string> = []
      for (const file of files) {
        for (const specifier of importsOf(fs.readFileSync(path.join(out, file), "utf8"))) {
          if (specifier.startsWith("./")) imported.add(specifier.slice(2))
          else if (specifier === "effect" || specifier.startsWith("effect/") || specifier.startsWith("@effect/")) {
            effectImports.push(`${file}: ${specifier}`)
          }
        }
      }
      assert.deepStrictEqual(effectImports, [])
      const entries = new Set(Object.keys(BUNDLE_ENTRIES).map((name) => `${name}.js`))
      assert.deepStrictEqual(files.filter((file) => !entries.has(file) && !imported.has(file)), [])
      assert.deepStrictEqual([...imported].filter((file) => !files.includes(file)), [])
    } finally {
      fs.rmSync(out, { recursive: true, force: true })
    }
  })
})
