/**
 * `npm run cli -- <command>` (`svc <command>` when installed): organizations,
 * API keys, console sign-in and the database (`Program.ts`); `svc start`
 * runs the server itself, as `npm start` does.
 *
 * This entry point only picks what to load, so that each command loads no
 * more than it needs: `--version` loads nothing else, the commands load the
 * CLI without the server, and `start` the server without the CLI. With
 * Node's compile cache (kept in the system's temporary folder) this brings
 * `svc --version` from 1.2 s to about 0.1 s and `svc --help` from 1.3 s to
 * about 0.3 s on a busy two-core machine (`npm run bench -- cli`).
 */
import * as module from "node:module"
import { VERSION } from "../api/Version.ts"

module.enableCompileCache?.()

const argv = process.argv.slice(2)

if (argv.length === 1 && argv[0] === "--version") {
  process.stdout.write(`svc v${VERSION}\n`)
} else if (argv.length === 1 && argv[0] === "start") {
  const { runServer } = await import("../server/Serve.ts")
  runServer()
} else {
  await import("./Program.ts")
}
