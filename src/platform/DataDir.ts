/**
 * The embedded data directory (`SVC_DATA_DIR`): private to the user that
 * runs `svc`, and held by one process at a time.
 *
 * Privacy: the directory is created `0700`; an existing one that other
 * users can enter is tightened to `0700` when this process may change it
 * (it owns it), and refused otherwise. Everything svc keeps there (the
 * database files, the master key, the database socket) is then out of
 * other users' reach, whatever modes the files inside have.
 *
 * The lock: an exclusive OS file lock (`fcntl`) on `svc.lock.sqlite`, taken
 * through SQLite, the one built-in of Node that takes such a lock. The
 * kernel drops it the moment the holder's files close, which happens
 * whatever ends the process (`kill -9` included), before the process is
 * even reaped; two processes starting at the same instant cannot both get
 * it. A pid in a file cannot do this: `kill(pid, 0)` succeeds for a killed
 * process until it is reaped, and a check followed by a write is a race.
 * The lock file itself stays: removing it could let two processes lock two
 * different files of the same name.
 */
import * as Clock from "effect/Clock"
import * as Data from "effect/Data"
import * as Effect from "effect/Effect"
import type * as Scope from "effect/Scope"
import * as fs from "node:fs"
import * as path from "node:path"
import { DatabaseSync } from "node:sqlite"

export class DataDirError extends Data.TaggedError("DataDirError")<{
  readonly message: string
}> {}

/** Another live process holds the data directory. */
export class DataDirHeld extends Data.TaggedError("DataDirHeld")<{
  readonly message: string
  readonly dir: string
  /** The holder's pid, as it recorded it (absent while it is still writing it). */
  readonly pid: number | undefined
}> {}

const lockFile = (dir: string) => path.join(dir, "svc.lock.sqlite")

/** Who holds the lock, for messages only: the lock itself decides. */
const holderFile = (dir: string) => path.join(dir, "svc.pid")

const octal = (mode: number) => (mode & 0o777).toString(8).padStart(4, "0")

/**
 * Creates `dir` (and missing parents) `0700`, or makes an existing one
 * private, saying so in the log.
 */
export const ensurePrivateDir = (dir: string): Effect.Effect<void, DataDirError> =>
  Effect.try({
    try: () => {
      fs.mkdirSync(dir, { recursive: true, mode: 0o700 })
      const stat = fs.statSync(dir)
      if (!stat.isDirectory()) throw new Error("not a directory")
      if ((stat.mode & 0o077) === 0) return undefined
      try {
        fs.chmodSync(dir, 0o700)
      } catch (cause) {
        throw new Error(
          `other users can enter it (mode ${octal(stat.mode)}) and it cannot be made private (${
            (cause as NodeJS.ErrnoException).code ?? String(cause)
          }); ` +
            `run chmod 700 on it as its owner, or choose another SVC_DATA_DIR`,
          { cause: cause }
        )
      }
      return octal(stat.mode)
    },
    catch: (cause) =>
      new DataDirError({ message: `data directory ${dir}: ${cause instanceof Error ? cause.message : String(cause)}` })
  }).pipe(
    Effect.flatMap((was) =>
      was === undefined
        ? Effect.void
        : Effect.logWarning(`made ${dir} private: its mode was ${was}, it is now 0700`)
    )
  )

const readHolderPid = (dir: string): number | undefined => {
  try {
    const pid = (JSON.parse(fs.readFileSync(holderFile(dir), "utf8")) as { pid?: unknown }).pid
    return typeof pid === "number" ? pid : undefined
  } catch {
    return undefined
  }
}

const SQLITE_BUSY = 5

/** One attempt: the open lock connection, or `undefined` when another connection holds it. */
const tryLock = (dir: string): DatabaseSync | undefined => {
  // `timeout: 0`: fail at once when held, never block the event loop waiting.
  const db = new DatabaseSync(lockFile(dir), { timeout: 0 })
  try {
    // Takes SQLite's exclusive lock (an fcntl write lock) and keeps it: the
    // transaction stays open until the connection closes.
    db.exec("BEGIN EXCLUSIVE")
    return db
  } catch (error) {
    db.close()
    if ((error as { errcode?: number }).errcode === SQLITE_BUSY) return undefined
    throw error
  }
}

/**
 * Holds `dir` for the current scope: fails with `DataDirHeld` when another
 * process holds it for longer than `waitMs` (a holder just killed is gone
 * within that). Released when the scope closes, after everything acquired
 * later in the same scope (the database) has been released.
 */
export const holdDataDir = (
  dir: string,
  options: { readonly waitMs?: number } = {}
): Effect.Effect<void, DataDirHeld | DataDirError, Scope.Scope> =>
  Effect.acquireRelease(
    Effect.gen(function*() {
      const deadline = (yield* Clock.currentTimeMillis) + (options.waitMs ?? 0)
      let lastLook = false
      for (;;) {
        const db = yield* Effect.try({
          try: () => tryLock(dir),
          catch: (cause) => new DataDirError({ message: `cannot lock ${lockFile(dir)}: ${String(cause)}` })
        })
        if (db !== undefined) {
          yield* Effect.sync(() => {
            // Written after the lock is ours, replaced atomically: a reader
            // sees the previous holder's pid or ours, never half a file.
            const temp = `${holderFile(dir)}.${process.pid}`
            fs.writeFileSync(temp, JSON.stringify({ pid: process.pid, started_at: new Date().toISOString() }), {
              mode: 0o600
            })
            fs.renameSync(temp, holderFile(dir))
            // What an earlier version kept there (a pid it trusted).
            fs.rmSync(path.join(dir, "svc.lock"), { force: true })
          })
          return db
        }
        if ((yield* Clock.currentTimeMillis) >= deadline) {
          const pid = readHolderPid(dir)
          // Held but nobody named: the holder is taking or giving up the hold
          // this moment (its pid file comes after the lock and goes before
          // it). One more look names it, or finds the folder free.
          if (pid === undefined && !lastLook) {
            lastLook = true
            yield* Effect.sleep("100 millis")
            continue
          }
          return yield* new DataDirHeld({
            dir,
            pid,
            message: `the embedded database in ${dir} is held by ${
              pid === undefined ? "another process" : `process ${pid}`
            }; stop it or set DATABASE_URL`
          })
        }
        yield* Effect.sleep("100 millis")
      }
    }),
    (db) =>
      Effect.sync(() => {
        fs.rmSync(holderFile(dir), { force: true })
        // Closing the connection ends its transaction and drops the lock.
        db.close()
      })
  ).pipe(Effect.asVoid)

/** Whether a process holds `dir` right now (without waiting). */
export const isHeld = (dir: string): boolean => {
  if (!fs.existsSync(lockFile(dir))) return false
  const db = tryLock(dir)
  if (db === undefined) return true
  db.close()
  return false
}
