/**
 * The end of a checkout's install (scripts/after-install.ts, `prepare`):
 * when npm ran on a Node older than 22.19 it printed `EBADENGINE` warnings,
 * and the install's last lines say what they meant; on a newer Node there
 * were none, and it says nothing.
 */
import { assert, describe, it } from "@effect/vitest"
import { spawnSync } from "node:child_process"
import * as path from "node:path"

const script = path.join(import.meta.dirname, "../../../scripts/after-install.ts")
const afterInstall = (userAgent: string) => {
  const result = spawnSync(process.execPath, [script], {
    encoding: "utf8",
    env: { ...process.env, npm_config_user_agent: userAgent }
  })
  assert.strictEqual(result.status, 0, result.stderr)
  return result.stdout
}

describe("the install's closing step", () => {
  it("after npm on Node 20: one line saying the EBADENGINE lines are about that Node, and which Node runs the packages", () => {
    const out = afterInstall("npm/11.19.1 node/v20.20.2 linux x64 workspaces/false")
    assert.lengthOf(out.trim().split("\n"), 1)
    assert.include(out, "EBADENGINE")
    assert.include(out, "Node v20.20, which runs npm")
    assert.include(out, `Node ${process.versions.node} (node_modules/node)`)
    assert.notMatch(out, /warn/i)
    assert.include(afterInstall("npm/11.19.1 node/v22.18.0 linux x64 workspaces/false"), "Node v22.18, which runs npm")
  })

  it("after npm on Node 22.19 or later, or outside npm: nothing", () => {
    assert.strictEqual(afterInstall("npm/11.19.1 node/v22.19.0 linux x64 workspaces/false"), "")
    assert.strictEqual(afterInstall("npm/11.19.1 node/v24.21.0 linux x64 workspaces/false"), "")
    assert.strictEqual(afterInstall(""), "")
  })
})
