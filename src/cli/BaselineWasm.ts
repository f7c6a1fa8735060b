/**
 * A one-shot command's embedded database, compiled once and never again.
 *
 * PGlite is PostgreSQL compiled to WebAssembly (9 MB). V8 compiles each of
 * its functions with its baseline compiler (Liftoff) when first called,
 * then recompiles the hot ones with its optimizing compiler (TurboFan) on
 * a background thread. A server lives long enough to profit; a command
 * that opens the database, runs a few statements and exits does not, and
 * pays twice: the recompiling competes with the command for the CPU, and
 * the process cannot exit before the background thread has finished what
 * it started (V8's platform joins its threads at exit).
 *
 * Speeds up: `svc orgs create` on the embedded database, on two cores
 * shared with other work, 1.20 s to 0.93 s wall and a third less CPU
 * (1.8 s to 1.2 s under heavy load); `npm run bench -- cli` measures it.
 * The flags are process-wide and read when WebAssembly is compiled, so
 * they are set before the database's worker starts, and only by the CLI
 * (`main.ts`, with the worker started early): `svc start` never loads
 * this module.
 */
import * as v8 from "node:v8"

/** Keeps WebAssembly compiled later in this process on V8's baseline compiler. */
export const baselineWasmOnly = (): void => {
  v8.setFlagsFromString("--no-wasm-dynamic-tiering")
  v8.setFlagsFromString("--no-wasm-tier-up")
}
