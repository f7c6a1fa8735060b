/**
 * The contributor install leaves out what only a peer dependency asks for
 * (`omit=peer` in `.npmrc`). That is safe while those packages are ones
 * nothing here runs: redis and its parts, a peer of @effect/platform-node
 * for its Redis module (svc never imports it).
 * A package added later whose peer svc or its tools do need shows up here:
 * list that peer in package.json, and it is installed as any other.
 */
import { assert, describe, it } from "@effect/vitest"
import * as fs from "node:fs"
import * as path from "node:path"

const root = path.join(import.meta.dirname, "../../..")

describe("the packages the contributor install leaves out", () => {
  it("are only redis and its parts, as the lockfile marks peer-only; .npmrc says omit=peer", () => {
    const lock = JSON.parse(fs.readFileSync(path.join(root, "package-lock.json"), "utf8")) as {
      readonly packages: Record<string, { readonly peer?: boolean }>
    }
    const peerOnly = Object.entries(lock.packages).filter(([, entry]) => entry.peer === true)
      .map(([location]) => location.replace(/^.*node_modules\//, ""))
    assert.deepStrictEqual(
      peerOnly.filter((name) => !(name === "redis" || name.startsWith("@redis/"))),
      []
    )
    assert.include(peerOnly, "redis")
    assert.match(fs.readFileSync(path.join(root, ".npmrc"), "utf8"), /^omit=peer$/m)
  })

  it("are never loaded: nothing imports @effect/platform-node's index, which loads its Redis module", () => {
    const offenders: Array<string> = []
    const walk = (dir: string) => {
      for (const entry of fs.readdirSync(path.join(root, dir), { withFileTypes: true })) {
        const relative = path.join(dir, entry.name)
        if (entry.isDirectory()) {
          if (entry.name !== "node_modules" && entry.name !== "dist") walk(relative)
        } else if (/\.(ts|tsx|js|mjs)$/.test(entry.name)) {
          if (/from "@effect\/platform-node"/.test(fs.readFileSync(path.join(root, relative), "utf8"))) {
            offenders.push(relative)
          }
        }
      }
    }
    for (const dir of ["src", "test", "bench", "scripts", "examples", "packages", "console/src"]) {
      if (fs.existsSync(path.join(root, dir))) walk(dir)
    }
    assert.deepStrictEqual(offenders, [])
  })
})
