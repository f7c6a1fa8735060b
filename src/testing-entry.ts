/**
 * The entry point of `svc/testing` (and so of `@svc/testing`): on a Node
 * older than 22.19 it says so in one line and exits, before it loads the kit
 * (`testing.ts`). The check cannot sit in the kit: the kit imports modules
 * an older Node does not have (`node:sqlite`), and ES module linking fails
 * on those before any of the kit's code runs, with an error that says
 * nothing of the Node version (and that vitest 5 on Node 20 cannot even
 * print). This file imports nothing statically, so any Node links it.
 */
const [major = 0, minor = 0] = process.versions.node.split(".").map(Number)
if (major < 22 || (major === 22 && minor < 19)) {
  process.stderr.write(`svc/testing needs Node >= 22.19 (this is ${process.version}).\n`)
  process.exit(1)
}

const kit = await import("./testing.ts")

// The kit's values; its types are dist/testing.d.ts (`types` in package.json's exports).
export const SvcTest = kit.SvcTest
export const Scopes = kit.Scopes
