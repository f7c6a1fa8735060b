/**
 * The end of a checkout's install (scripts/after-install.ts, `prepare`):
 * when npm ran on a Node older than 22.19 it printed `EBADENGINE` warnings,
 * and the install's last lines say what they meant; on a newer Node there
 * were none, and it says nothing.
 */
import { assert, describe, it } from "@effect/vitest"
import { spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"

const root = path.join(import.meta.dirname, "../../..")
const script = path.join(root, "scripts/after-install.ts")
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

/** The section names of a 64-bit little-endian ELF file. */
const elfSections = (file: string): Array<string> => {
  const fd = fs.openSync(file, "r")
  try {
    const read = (offset: number, length: number) => {
      const buffer = Buffer.alloc(length)
      fs.readSync(fd, buffer, 0, length, offset)
      return buffer
    }
    const header = read(0, 64)
    const [offset, size, count, names] = [
      Number(header.readBigUInt64LE(0x28)),
      header.readUInt16LE(0x3a),
      header.readUInt16LE(0x3c),
      header.readUInt16LE(0x3e)
    ]
    const sections = read(offset, size * count)
    const at = (index: number) => ({
      name: sections.readUInt32LE(index * size),
      offset: Number(sections.readBigUInt64LE(index * size + 0x18)),
      size: Number(sections.readBigUInt64LE(index * size + 0x20))
    })
    const table = read(at(names).offset, at(names).size)
    return Array.from({ length: count }, (_, index) => {
      const start = at(index).name
      return table.subarray(start, table.indexOf(0, start)).toString("latin1")
    })
  } finally {
    fs.closeSync(fd)
  }
}

describe.skipIf(spawnSync("strip", ["--version"]).status !== 0 || process.platform !== "linux")(
  "the Node of the dev dependencies",
  () => {
    it("is stripped of its symbols and debug information, and both of npm's links are the one stripped file", () => {
      const binary = path.join(root, "node_modules/node/bin/node")
      const sections = elfSections(binary)
      assert.include(sections, ".text")
      assert.notInclude(sections, ".symtab")
      assert.notInclude(sections, ".debug_info")
      const packages = path.join(root, "node_modules/node/node_modules")
      for (const name of fs.readdirSync(packages).filter((entry) => entry.startsWith("node-"))) {
        const other = path.join(packages, name, "bin/node")
        if (fs.existsSync(other)) assert.strictEqual(fs.statSync(other).ino, fs.statSync(binary).ino)
      }
    })
  }
)
