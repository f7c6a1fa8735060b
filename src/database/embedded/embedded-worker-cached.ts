/**
 * The embedded database's worker (`embedded-worker.ts`) started with
 * Node's compile cache. The cache `main.ts` enables holds for its own
 * thread only: a worker thread compiles (and, from source, strips the
 * types of) its modules anew at every start, PGlite's included, unless it
 * enables the cache itself before it loads them, which a static import
 * cannot wait for.
 *
 * Speeds up: about 50 ms of CPU at each start of the embedded
 * database, a `svc orgs create` included (1.20 s to 1.15 s CPU on a
 * shared two-core machine; `npm run bench -- cli` measures the command).
 */
import * as module from "node:module"

module.enableCompileCache?.()
await import("./embedded-worker.ts")
