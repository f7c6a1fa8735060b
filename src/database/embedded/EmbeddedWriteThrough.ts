/**
 * Whether PGlite's file system writes through: on svc's two, `NodeFS` (the
 * data folder) and `MemoryFS` (a fresh database in memory, tests), every
 * write PostgreSQL makes is already a write of the file system, and
 * `syncToFs` does nothing (PGlite's base `Filesystem.syncToFs` is empty; only
 * the browser's IndexedDB and OPFS file systems copy files out). PGlite's
 * `query` calls it after every statement outside a transaction, through a
 * mutex and three promises; the worker skips it on these two and keeps it
 * for any other.
 *
 * Speeds up: about a tenth of the database thread's own work on a
 * near-empty statement (with the one-pass answer, `EmbeddedAnswer.ts`: 78
 * to 48 µs) (`bench/inprocess/round-trip.ts`, figures in
 * bench/notes/embedded.md).
 */
import { MemoryFS } from "@electric-sql/pglite"
import { NodeFS } from "@electric-sql/pglite/nodefs"

const known = new WeakMap<object, boolean>()

/** Whether `db` (a PGlite instance) needs `syncToFs` for its writes to reach its files. */
export const needsSync = (db: object): boolean => {
  let needs = known.get(db)
  if (needs === undefined) {
    const fs = (db as { readonly fs?: unknown }).fs
    needs = !(fs instanceof NodeFS || fs instanceof MemoryFS)
    known.set(db, needs)
  }
  return needs
}
