/**
 * The entry of every worker thread svc starts (the embedded database's,
 * the correction and answer-schema workers): it turns on Node's compile
 * cache, then loads the worker module named by the last `argv` entry
 * (`startWorker`, `ModuleUrl.ts`). The cache `main.ts` enables holds for
 * its own thread only: a worker thread compiles (and, from source, strips
 * the types of) every module it loads anew at each start, unless it
 * enables the cache itself before loading them, which a static import
 * cannot wait for.
 *
 * Speeds up: a correction worker's start (it loads the secret-detection
 * rules and the schema compiler), 1.5-1.7 to 0.8 CPU-seconds from the
 * second start on; the embedded database's worker, about 50 ms of CPU at
 * each start, a `svc orgs create` included (`npm run bench -- cli`).
 */
import * as module from "node:module"

module.enableCompileCache?.()
await import(process.argv[process.argv.length - 1]!)
