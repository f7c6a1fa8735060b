/**
 * The databases a test of stored data runs on, each fresh: embedded PGlite,
 * and with `TEST_DATABASE_URL` a scratch database on that server.
 */
import { Redacted } from "effect"
import { Database } from "../../src/database/Database.ts"

export const databases = [
  ["embedded PGlite", () => Database.memory] as const,
  ...(process.env.TEST_DATABASE_URL
    ? [["PostgreSQL server", () => Database.scratch(Redacted.make(process.env.TEST_DATABASE_URL!))] as const]
    : [])
]

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
 * database does: a copy of the run's snapshot, and on the server a copy of
 * its migrated template (fresh ones when the run made neither).
 */
export const migratedDatabases = new Map([
  ["embedded PGlite", memoryDatabase] as const,
  ...(process.env.TEST_DATABASE_URL
    ? [["PostgreSQL server", () =>
      Database.scratch(Redacted.make(process.env.TEST_DATABASE_URL!), { template: process.env.TEST_DATABASE_TEMPLATE })] as const]
    : [])
])
