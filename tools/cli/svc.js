#!/usr/bin/env node
/**
 * `npx svc <command>` inside the repository: the svc command line
 * (`src/cli/main.ts`, also `npm run cli --`), run from source. Installed,
 * svc's bin is bin/svc.js, which runs the compiled CLI (dist/).
 *
 * The bin belongs to this workspace rather than to the root package: npm
 * links it into node_modules/.bin, where `npx svc` finds it and runs it
 * directly. A bin of the root package itself would make npx install the
 * project into its cache on every call, checking the root's
 * `engines.node >=22.19` against the Node running npx (a warning each time).
 *
 * The CLI needs Node >= 22.19 (Effect 4; TypeScript run as is). `npx` may
 * start this file with an older Node (the machine's, which runs npm itself),
 * so it is plain JavaScript that any Node runs: on an older one it starts
 * the same command again with the Node that comes as the `node`
 * devDependency, and exits as that process does.
 */
import { spawnSync } from "node:child_process"
import { createRequire } from "node:module"
import { fileURLToPath } from "node:url"

const [major, minor] = process.versions.node.split(".").map(Number)

if (major > 22 || (major === 22 && minor >= 19)) {
  await import(new URL("../../src/cli/main.ts", import.meta.url).href)
} else {
  let node
  try {
    node = createRequire(import.meta.url).resolve("node/bin/node")
  } catch {
    console.error(`svc needs Node >= 22.19 (this is ${process.version}); run \`npm install\` first: it brings Node 24.`)
    process.exit(1)
  }
  const child = spawnSync(node, [fileURLToPath(import.meta.url), ...process.argv.slice(2)], { stdio: "inherit" })
  if (child.error !== undefined) {
    console.error(`svc: could not start ${node}: ${child.error.message}`)
    process.exit(1)
  }
  if (child.signal !== null) process.kill(process.pid, child.signal)
  process.exit(child.status ?? 1)
}
