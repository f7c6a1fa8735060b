/**
 * `npm run cli -- <command>` (`svc <command>` when installed): organizations,
 * API keys, console sign-in and the database (`Program.ts`); `svc start`
 * runs the server itself, as `npm start` does.
 *
 * This entry point only picks what to load, so that each command loads no
 * more than it needs: `--version` loads nothing else, the commands load the
 * CLI without the server (and the database's modules only when a command
 * runs, `Commands.ts`), and `start` the server without the CLI. With
 * Node's compile cache (kept in the system's temporary folder), on a
 * two-core machine under load: `svc --version` 1.2 s to 0.07 s (1 540
 * modules to 2), `svc --help` 1.3 s to about 0.4 s (1 540 to 330 modules),
 * then to 243 modules and a fifth less CPU (0.41 s to 0.33 s, shared
 * machine) with Effect's modules imported one by one rather than through
 * its index (`test/unit/structure/cli-imports.test.ts`). The installed
 * `svc` runs a bundle of this module and what it loads
 * (`scripts/bundle-cli.ts`): `--help` in about 0.15 s. `npm run bench --
 * cli` measures them.
 */
import * as module from "node:module"
import { VERSION } from "../api/Version.ts"
import { DEFAULT_DATA_DIR, embeddedDatabase } from "../platform/EntrySettings.ts"
import { argv, local } from "./Argv.ts"

module.enableCompileCache?.()

/** Whether a server answers on the admin channel of the data directory the environment names. */
const serverAnswers = async () => {
  const { adminSocketPath, answers } = await import("./Admin.ts")
  return answers(adminSocketPath(process.env.SVC_DATA_DIR ?? DEFAULT_DATA_DIR))
}

if (argv.length === 1 && argv[0] === "--version") {
  process.stdout.write(`svc v${VERSION}\n`)
} else if (argv.length === 1 && argv[0] === "start") {
  // The same start as `npm start`.
  await import("../main.ts")
} else {
  // A command (not help) on the embedded database that no running server
  // takes through its admin channel (`Program.ts` sends it there when one
  // answers, and nothing here opens the database then): its worker loads
  // PGlite while the CLI's modules load, on V8's baseline compiler only
  // (`BaselineWasm.ts`). Sent to a server, a command costs about half the
  // CPU without the worker (`orgs create` 0.88 to 0.46 CPU-s and 597 to
  // 386 ms, `npm run bench -- cli`).
  if (!local && embeddedDatabase() && !(await serverAnswers())) {
    const [{ baselineWasmOnly }, { startEarlyWorker }] = await Promise.all([
      import("./BaselineWasm.ts"),
      import("../database/embedded/EarlyWorker.ts")
    ])
    baselineWasmOnly()
    startEarlyWorker()
  }
  await import("./Program.ts")
}
