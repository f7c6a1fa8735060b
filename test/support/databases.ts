/**
 * The databases a test of stored data runs on, each fresh: embedded PGlite,
 * or with `TEST_DATABASE_URL` a scratch database on that server.
 */
import { PGlite } from "@electric-sql/pglite"
import { Effect, Layer, Redacted } from "effect"
import * as fs from "node:fs"
import { Database, DatabaseInfo, type EmbeddedSettings } from "../../src/database/Database.ts"

/**
 * A run on the PostgreSQL server of `TEST_DATABASE_URL`. The integration
 * suite runs twice (`.ci/run`): on the embedded database (`npm test`), then
 * on that server. A test of the embedded database only (processes on a data
 * folder, a database in memory, a start that reaches no database) would do
 * in the second run exactly what it did in the first: it runs in the first.
 */
export const onServerRun = (process.env.TEST_DATABASE_URL ?? "") !== ""

/**
 * Writes an empty database (what initdb makes, nothing migrated) to `file`,
 * as `SvcTest.writeSnapshot` writes a migrated one: with
 * `TEST_DATABASE_EMPTY_SNAPSHOT` naming it, `emptyDatabase` and
 * `emptyPGlite` open copies of it (about 0.3 CPU-s each, against 1.5 for
 * initdb on two cores). Written once per run (test/support/global-setup.ts).
 */
export const writeEmptySnapshot = (file: string) =>
  Effect.gen(function*() {
    const info = yield* DatabaseInfo
    yield* info.embedded!.request({ op: "snapshot", path: file, forCopies: true })
  }).pipe(Effect.provide(Layer.fresh(Database.memory)), Effect.scoped)

/** A database in memory opened as a copy of `snapshot` (with `settings`: its timeouts), or initdb's without one. */
const memoryCopy = (snapshot: string | undefined, settings?: EmbeddedSettings) =>
  snapshot
    ? Database.memoryFrom(snapshot, settings)
    : settings === undefined
    ? Database.memory
    : Database.memoryWith(settings)

/** An empty embedded database in memory: a copy of the run's empty snapshot. */
export const emptyDatabase = (settings?: EmbeddedSettings) =>
  memoryCopy(process.env.TEST_DATABASE_EMPTY_SNAPSHOT, settings)

/** A bare PGlite on an empty database, as `emptyDatabase` opens one. */
export const emptyPGlite = () => {
  const snapshot = process.env.TEST_DATABASE_EMPTY_SNAPSHOT
  return PGlite.create(snapshot ? { loadDataDir: new Blob([fs.readFileSync(snapshot)]) } : {})
}

export const databases = onServerRun
  ? [["PostgreSQL server", () => Database.scratch(Redacted.make(process.env.TEST_DATABASE_URL!))] as const]
  : [["embedded PGlite", () => emptyDatabase()] as const]

/**
 * A database in memory for a test that needs no empty one: a copy of the
 * run's migrated snapshot when there is one (test/support/global-setup.ts;
 * it opens in about 0.4 s, initdb takes several), else a fresh one.
 */
export const memoryDatabase = () => memoryCopy(process.env.TEST_DATABASE_SNAPSHOT)

/**
 * The same databases already migrated, for tests of what a migrated
 * database does: a copy of the run's snapshot, or on the server a copy of
 * its migrated template (fresh ones when the run made neither).
 */
export const migratedDatabases = new Map(
  onServerRun
    ? [
      ["PostgreSQL server", () =>
        Database.scratch(Redacted.make(process.env.TEST_DATABASE_URL!), {
          template: process.env.TEST_DATABASE_TEMPLATE
        })] as const
    ]
    : [["embedded PGlite", memoryDatabase] as const]
)
