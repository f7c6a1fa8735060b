/**
 * The end of `npm install` / `npm ci` in a checkout (`prepare`, before the
 * builds), on the Node 24 of the dev dependencies:
 *
 * - says what npm's `EBADENGINE` warnings meant, when npm itself ran on a
 *   Node older than 22.19: npm compares the packages' `engines` with the Node
 *   that runs npm, while every script here runs on the Node 24 they accept;
 * - removes the C headers that the `node` package installs beside its binary
 *   (`include/`, 67 MB of the install's 540): they serve only to compile
 *   native addons against that Node, and nothing here compiles one (npm's
 *   node-gyp would fetch headers of its own if something did).
 *
 *   node scripts/after-install.ts
 */
import { spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import { fileURLToPath } from "node:url"

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..")

const npmNode = /\bnode\/v(\d+)\.(\d+)/.exec(process.env.npm_config_user_agent ?? "")
if (npmNode !== null) {
  const [major, minor] = [Number(npmNode[1]), Number(npmNode[2])]
  if (major < 22 || (major === 22 && minor < 19)) {
    console.log(
      `svc: the EBADENGINE lines above compare some packages' engines with Node v${major}.${minor}, which runs npm; ` +
        `here they run on Node ${process.versions.node} (node_modules/node), which they accept: harmless.`
    )
  }
}

/**
 * Strips `binary` in place (a copy is stripped, checked to run, then put in its
 * place), and `links`, the hard links npm made to it, are linked to the
 * stripped file again. Without `strip`, or when it fails, nothing changes.
 */
function stripBinary(binary: string, links: ReadonlyArray<string>) {
  const marker = `${binary}.stripped-size`
  if (!fs.existsSync(binary)) return
  const size = fs.statSync(binary).size
  if (fs.existsSync(marker) && fs.readFileSync(marker, "utf8") === String(size)) return
  const stripped = `${binary}.stripped-${process.pid}`
  const strip = spawnSync("strip", ["-o", stripped, binary], { stdio: "ignore" })
  const version = (file: string) => spawnSync(file, ["--version"], { encoding: "utf8" }).stdout?.trim()
  const runs = strip.status === 0 && version(stripped) === version(binary)
  if (!runs || fs.statSync(stripped).size >= size) {
    fs.rmSync(stripped, { force: true })
    return
  }
  fs.chmodSync(stripped, fs.statSync(binary).mode)
  const sameFile = links.filter((link) => fs.existsSync(link) && fs.statSync(link).ino === fs.statSync(binary).ino)
  fs.renameSync(stripped, binary)
  for (const link of sameFile) {
    fs.rmSync(link)
    fs.linkSync(binary, link)
  }
  fs.writeFileSync(marker, String(fs.statSync(binary).size))
}

const nodePackages = path.join(root, "node_modules/node/node_modules")
if (fs.existsSync(nodePackages)) {
  for (const name of fs.readdirSync(nodePackages).filter((entry) => entry.startsWith("node-"))) {
    fs.rmSync(path.join(nodePackages, name, "include"), { recursive: true, force: true })
    stripBinary(path.join(nodePackages, name, "bin", "node"), [path.join(root, "node_modules/node/bin/node")])
  }
}
