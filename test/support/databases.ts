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
