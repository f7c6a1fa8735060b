/**
 * PGlite's WebAssembly (9 MB) compiled once per process for every database
 * in memory the process opens, instead of once by each database's worker
 * thread.
 *
 * V8 compiles a module's functions with its baseline compiler and then
 * recompiles the hot ones with its optimizing compiler on background
 * threads; a module compiled on this thread and handed to each worker in
 * its `workerData` shares that code between them (a `WebAssembly.Module`
 * crosses threads of one process without being compiled again). A server
 * opens one database and gains nothing, so only databases in memory use
 * it: the test kit's services, of which a test process opens dozens.
 *
 * Speeds up: each further database in memory a process opens, 4.6 to 1.8
 * CPU-seconds for a migrated copy (`Database.memoryFrom`), measured as four
 * starts one after another in one process on a two-core machine.
 */
import { readFile } from "node:fs/promises"
import { createRequire } from "node:module"
import * as path from "node:path"

let compiled: Promise<WebAssembly.Module> | undefined

/** PGlite's compiled module, shared by the databases in memory of this process. */
export const compiledPglite = (): Promise<WebAssembly.Module> => {
  compiled ??= readFile(
    path.join(path.dirname(createRequire(import.meta.url).resolve("@electric-sql/pglite")), "pglite.wasm")
  ).then(
    (bytes) => WebAssembly.compile(bytes),
    (error: unknown) => {
      compiled = undefined
      throw error
    }
  )
  return compiled
}
