/**
 * The databases a test of stored data runs on, each fresh: embedded PGlite,
 * or with `TEST_DATABASE_URL` a scratch database on that server.
 */
import { Redacted } from "effect"
import { Database } from "../../src/database/Database.ts"

/**
 * A run on the PostgreSQL server of `TEST_DATABASE_URL`. The integration
 * suite runs twice (`.ci/run`): on the embedded database (`npm test`), then
 * on that server. A test of the embedded database only (processes on a data
 * folder, a database in memory, a start that reaches no database) would do
 * in the second run exactly what it did in the first: it runs in the first.
 */
export const onServerRun = (process.env.TEST_DATABASE_URL ?? "") !== ""

export const databases = onServerRun
  ? [["PostgreSQL server", () => Database.scratch(Redacted.make(process.env.TEST_DATABASE_URL!))] as const]
  : [["embedded PGlite", () => Database.memory] as const]

/**
 * A database in memory for a test that needs no empty one: a copy of the
 * run's migrated snapshot when there is one (test/support/global-setup.ts;
 * it opens in about 0.4 s, initdb takes several), else a fresh one.
 */
export const memoryDatabase = () => {
  const snapshot = process.env.TEST_DATABASE_SNAPSHOT
  return snapshot ? Database.memoryFrom(snapshot) : Database.memory
}

/**
 * The same databases already migrated, for tests of what a migrated
 * database does: a copy of the run's snapshot, or on the server a copy of
 * its migrated template (fresh ones when the run made neither).
 */
export const migratedDatabases = new Map(
  onServerRun
    ? [["PostgreSQL server", () =>
      Database.scratch(Redacted.make(process.env.TEST_DATABASE_URL!), { template: process.env.TEST_DATABASE_TEMPLATE })] as const]
    : [["embedded PGlite", memoryDatabase] as const]
)
