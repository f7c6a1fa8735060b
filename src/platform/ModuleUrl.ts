/**
 * The URL of a module beside the caller, for `new Worker(...)`: named by
 * its source file (`./embedded-worker.ts`), it is that file when svc runs
 * from source and the compiled `.js` when it runs from dist/ (the installed
 * package), where no `.ts` file exists.
 */
import { Worker, type WorkerOptions } from "node:worker_threads"

const compiled = !import.meta.url.endsWith(".ts")

export const siblingModule = (sourceName: string, callerUrl: string): URL =>
  new URL(compiled ? sourceName.replace(/\.ts$/, ".js") : sourceName, callerUrl)

/**
 * A worker thread running the module `script` with Node's compile cache
 * on (`compile-cached.ts`): every worker svc starts goes through it.
 */
export const startWorker = (script: URL, options: Omit<WorkerOptions, "argv">): Worker =>
  new Worker(siblingModule("./compile-cached.ts", import.meta.url), { ...options, argv: [script.href] })
