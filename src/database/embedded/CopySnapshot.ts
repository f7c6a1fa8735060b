/**
 * A snapshot made for copies (`SvcTest.writeSnapshot`: every in-memory test
 * service on PGlite, and the data folders test servers start on, begin as
 * one): the data folder without what a copy never reads. The template
 * databases go (a copy never creates a database). The checkpoint taken here
 * starts a WAL segment of its own (`pg_switch_wal` first): that segment,
 * ending one page after its last written one, is all the WAL a copy reads
 * (PostgreSQL starts from the checkpoint and writes over the zeros that
 * followed); the older segments and those recycled for later use go. Their
 * files are deleted from the database itself: only for one thrown away
 * after its snapshot.
 *
 * Speeds up: opening a copy, 42.6 MB of tar before, 20.1 MB with the
 * templates gone: PGlite's open 600-780 ms and 800-1 460 CPU-ms before,
 * 310-380 ms and 430-510 CPU-ms after (three opens each, one process, two
 * cores). The migrations' 9.8 MB of WAL left out: 20.7 MB to 10.9 MB, and
 * 1 070-1 360 CPU-ms to 780-940 for opens 3-10 of one process, while other
 * work ran (load average 7-8).
 */
import type { PGlite } from "@electric-sql/pglite"

const PAGE = 8192

interface Files {
  readonly readdir: (path: string) => Array<string>
  readonly stat: (path: string) => { readonly mode: number }
  readonly isDir: (mode: number) => boolean
  readonly unlink: (path: string) => void
  readonly rmdir: (path: string) => void
  readonly readFile: (path: string) => Uint8Array
  readonly truncate: (path: string, length: number) => void
}

const removeTree = (fs: Files, path: string): void => {
  for (const name of fs.readdir(path)) {
    if (name === "." || name === "..") continue
    const child = `${path}/${name}`
    if (fs.isDir(fs.stat(child).mode)) removeTree(fs, child)
    else fs.unlink(child)
  }
  fs.rmdir(path)
}

/** Leaves in `db`'s data folder only what a copy of it reads (see above); then dump it. */
export const trimForCopies = async (db: PGlite): Promise<void> => {
  // A new segment first, so that the checkpoint and all a copy replays are in one short segment.
  await db.exec("SELECT pg_switch_wal(); CHECKPOINT")
  const fs = db.Module.FS as unknown as Files
  const [{ data_directory: dataDir }] = (await db.query<{ data_directory: string }>("SHOW data_directory")).rows as [
    { data_directory: string }
  ]
  const [{ redo, head }] = (await db.query<{ redo: string; head: string }>(
    "SELECT redo_wal_file AS redo, pg_walfile_name(pg_current_wal_insert_lsn()) AS head FROM pg_control_checkpoint()"
  )).rows as [{ redo: string; head: string }]
  const others = await db.query<{ oid: number }>("SELECT oid FROM pg_database WHERE datname <> current_database()")
  for (const { oid } of others.rows) removeTree(fs, `${dataDir}/base/${oid}`)
  for (const name of fs.readdir(`${dataDir}/pg_wal`)) {
    if (!/^[0-9A-F]{24}$/.test(name)) continue
    const path = `${dataDir}/pg_wal/${name}`
    // Every other segment is older than the checkpoint's redo point, or one recycled for later use.
    if (redo === head && name !== redo) {
      fs.unlink(path)
      continue
    }
    const bytes = fs.readFile(path)
    let end = bytes.length
    while (end > 0 && bytes[end - 1] === 0) end--
    fs.truncate(path, Math.min(bytes.length, (Math.ceil(end / PAGE) + 1) * PAGE))
  }
}
