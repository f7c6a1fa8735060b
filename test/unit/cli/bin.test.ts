/**
 * `npx svc --help` works. A newcomer's `npx` runs on the
 * machine's Node (20 here), which cannot run the CLI; the `svc` bin then
 * starts itself again on the Node 24 that comes as a devDependency. These
 * tests run it from a shell PATH without node_modules/.bin, as a newcomer's.
 */
import { assert, describe, it } from "@effect/vitest"
import { spawnSync } from "node:child_process"
import { existsSync } from "node:fs"
import { delimiter, join } from "node:path"
import { fileURLToPath } from "node:url"
import { VERSION } from "../../../src/api/Version.ts"

const root = fileURLToPath(new URL("../../../", import.meta.url))

/** The PATH of a shell outside npm scripts: no node_modules/.bin (whose `node` is Node 24). */
const shellPath = (process.env.PATH ?? "").split(delimiter).filter((dir) => !dir.includes("node_modules")).join(
  delimiter
)

const which = (command: string) =>
  shellPath.split(delimiter).map((dir) => join(dir, command)).find((file) => existsSync(file))

const run = (command: string, args: ReadonlyArray<string>) => {
  const result = spawnSync(command, args, {
    cwd: root,
    encoding: "utf8",
    timeout: 120_000,
    env: { ...process.env, PATH: shellPath, NO_COLOR: "1" }
  })
  if (result.error !== undefined) throw result.error
  return result
}

const machineNode = which("node")
const machineNpx = which("npx")

describe("the svc bin", () => {
  it.skipIf(machineNpx === undefined)("`npx svc --help` from the machine's npx prints the CLI's help", () => {
    // --no: never fetch a package named svc from the registry; the project's own bin must answer.
    const result = run(machineNpx!, ["--no", "--", "svc", "--help"])
    assert.strictEqual(result.status, 0, result.stderr)
    assert.include(result.stdout, "Administer svc")
    assert.notInclude(result.stderr, "EBADENGINE")
    for (const command of ["orgs", "keys"]) assert.include(result.stdout, command)
    // `start` (the server) is a command too, listed with the others.
    assert.match(result.stdout, /^\s+start\s+Serve the HTTP API on HOST:PORT/m)
  })

  it.skipIf(machineNode === undefined)(
    "started by the machine's Node, it runs the CLI on a Node that can (>= 22.19)",
    () => {
      const version = run(machineNode!, ["-p", "process.versions.node"]).stdout.trim()
      const result = run(machineNode!, [join(root, "tools/cli/svc.js"), "--version"])
      assert.strictEqual(result.status, 0, `on Node ${version}: ${result.stderr}`)
      assert.include(result.stdout, VERSION)
      const failing = run(machineNode!, [join(root, "tools/cli/svc.js"), "orgs", "create"])
      assert.notStrictEqual(failing.status, 0, "a failing command's status comes through")
    }
  )
})
