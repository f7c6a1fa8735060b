import { assert, describe, it } from "@effect/vitest"
import * as fs from "node:fs"
import * as path from "node:path"
import { VERSION } from "../../../src/api/Version.ts"

const root = path.join(import.meta.dirname, "../../..")

/** The repository's package.json files that ship: the root's, the receiver's and each package's. */
const manifests = () =>
  [
    "package.json",
    "src/receiver/package.json",
    ...(fs.existsSync(path.join(root, "packages"))
      ? fs.readdirSync(path.join(root, "packages")).map((name) => path.join("packages", name, "package.json"))
      : [])
  ].filter((file) => fs.existsSync(path.join(root, file)))

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
})
