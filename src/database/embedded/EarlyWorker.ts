/**
 * The embedded database's worker thread, started by a process's entry
 * point before the modules that will open the database have loaded.
 *
 * A command or a server start spends its first few hundred milliseconds
 * loading modules on its main thread, and only then starts the database's
 * worker, which spends about as long again loading PGlite and compiling
 * its WebAssembly while the main thread waits. Started first, the worker
 * does that on the other core in the meantime, and waits to be told which
 * database to open (`takeEarlyWorker`, `EmbeddedSession.ts`): nothing
 * touches the data directory before its lock is held. A command that a
 * running server answers never starts it (`src/cli/main.ts`); a worker
 * nobody takes (a server still starting took the command after all)
 * keeps nothing alive and ends with the process.
 *
 * Speeds up: `svc orgs create` on the embedded database, about 1 010 to
 * 920 ms wall (medians of eight runs each, alternated, on two cores under
 * a load of 2; CPU unchanged, about 1.1 s); a server's start on it overlaps
 * the same way. `npm run bench -- cli` measures it.
 */
import type { Worker } from "node:worker_threads"
import { siblingModule, startWorker } from "../../platform/ModuleUrl.ts"

let early: { readonly worker: Worker; gone: boolean } | undefined

/** Starts the database's worker now, to be opened later (once per process). */
export const startEarlyWorker = (): void => {
  if (early !== undefined) return
  const worker = startWorker(siblingModule("./embedded-worker.ts", import.meta.url), { workerData: { early: true } })
  const entry = { worker, gone: false }
  const gone = () => {
    entry.gone = true
  }
  worker.once("error", gone)
  worker.once("exit", gone)
  worker.unref()
  early = entry
}

/** The worker started early, if there is one still running and nobody took it. */
export const takeEarlyWorker = (): Worker | undefined => {
  const entry = early
  early = undefined
  if (entry === undefined || entry.gone) return undefined
  entry.worker.ref()
  return entry.worker
}
