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

const nodePackages = path.join(root, "node_modules/node/node_modules")
if (fs.existsSync(nodePackages)) {
  for (const name of fs.readdirSync(nodePackages).filter((entry) => entry.startsWith("node-"))) {
    fs.rmSync(path.join(nodePackages, name, "include"), { recursive: true, force: true })
  }
}
