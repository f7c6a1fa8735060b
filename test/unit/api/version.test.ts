import { assert, describe, it } from "@effect/vitest"
import * as fs from "node:fs"
import * as path from "node:path"
import { VERSION } from "../../../src/api/Version.ts"

const root = path.join(import.meta.dirname, "../../..")

/** The repository's package.json files: the root's (the server), each package's, and the in-repo bin's. */
const manifests = () =>
  [
    "package.json",
    "tools/cli/package.json",
    ...fs.readdirSync(path.join(root, "packages")).map((name) => path.join("packages", name, "package.json"))
  ].filter((file) => fs.existsSync(path.join(root, file)))

/** The pages that name a release: install commands with tarball names, the README's package table. */
const pages = () =>
  [
    "README.md",
    ...fs.readdirSync(path.join(root, "docs")).map((name) => path.join("docs", name)),
    ...fs.readdirSync(path.join(root, "packages")).map((name) => path.join("packages", name, "README.md"))
  ].filter((file) => file.endsWith(".md") && fs.existsSync(path.join(root, file)))

const RELEASE_MENTION = /svc(?:-client|-testing|-receiver)?-(\d+\.\d+\.\d+)\.tgz|all version (\d+\.\d+\.\d+)/g

describe("one version for everything", () => {
  it("VERSION is a release version (major.minor.patch)", () => {
    assert.match(VERSION, /^\d+\.\d+\.\d+$/)
  })

  it("the root package.json and every package's say VERSION", () => {
    const files = manifests()
    assert.include(files, "package.json")
    for (const file of files) {
      const manifest = JSON.parse(fs.readFileSync(path.join(root, file), "utf8")) as { version?: string }
      assert.strictEqual(manifest.version, VERSION, file)
    }
  })

  it("a package's dependencies on svc's own packages name VERSION exactly", () => {
    for (const file of manifests()) {
      const manifest = JSON.parse(fs.readFileSync(path.join(root, file), "utf8")) as {
        dependencies?: Record<string, string>
      }
      for (const [name, range] of Object.entries(manifest.dependencies ?? {})) {
        if (name === "svc" || name.startsWith("@svc/")) assert.strictEqual(range, VERSION, `${file}: ${name}`)
      }
    }
  })

  it("the pages' install commands and package table name VERSION", () => {
    const found: Array<string> = []
    for (const file of pages()) {
      for (const match of fs.readFileSync(path.join(root, file), "utf8").matchAll(RELEASE_MENTION)) {
        found.push(`${file}: ${match[1] ?? match[2]}`)
      }
    }
    assert.isAbove(found.length, 0)
    assert.deepStrictEqual(found.filter((line) => !line.endsWith(`: ${VERSION}`)), [])
  })
})
