import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer, Redacted } from "effect"
import { SqlClient } from "effect/sql"
import { Database } from "../../../src/platform/Database.ts"
import { Migrations } from "../../../src/platform/Migrations.ts"

const databases = [
  ["embedded PGlite", () => Database.memory] as const,
  ...(process.env.TEST_DATABASE_URL
    ? [["PostgreSQL server", () => Database.scratch(Redacted.make(process.env.TEST_DATABASE_URL!))] as const]
    : [])
]

describe("migrations", () => {
  for (const [name, database] of databases) {
    it.live(`apply on an empty database, then are a no-op on a migrated one (${name})`, () =>
      Effect.gen(function*() {
        const first = yield* Migrations.run
        assert.isAbove(first.length, 0)
        assert.deepStrictEqual(first.map(([id]) => id), [...first.map(([id]) => id)].sort((a, b) => a - b))
        const second = yield* Migrations.run
        assert.deepStrictEqual(second, [])
        const sql = yield* SqlClient.SqlClient
        const tables = yield* sql<{ table_name: string }>`
          SELECT table_name FROM information_schema.tables WHERE table_schema = 'public' ORDER BY table_name
        `
        for (const table of ["api_keys", "datasets", "events", "org_secrets", "orgs", "runs", "tasks"]) {
          assert.include(tables.map((t) => t.table_name), table)
        }
      }).pipe(Effect.provide(Layer.fresh(database()))), 60_000)
  }
})
