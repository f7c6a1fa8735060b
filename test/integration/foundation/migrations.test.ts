import * as NodeServices from "@effect/platform-node/NodeServices"
import { PgMigrator } from "@effect/sql-pg"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer, Redacted } from "effect"
import { Migrator, SqlClient } from "effect/sql"
import { execFileSync } from "node:child_process"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { VERSION } from "../../../src/api/Version.ts"
import { Database } from "../../../src/database/Database.ts"
import { Migrations } from "../../../src/database/Migrations.ts"
import { migrationRecord, migrationsByRelease, releaseOf } from "../../../src/database/migrations/index.ts"
import { SvcTest } from "../../../src/testing.ts"
import { databases, migratedDatabases, onServerRun } from "../../support/databases.ts"

const recorded = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  return yield* sql<{ key: string; svc_version: string; same_time: boolean }>`
    SELECT lpad(s.migration_id::text, 4, '0') || '_' || s.name AS key, s.svc_version, s.applied_at = m.created_at AS same_time
    FROM svc_schema_versions s JOIN svc_migrations m USING (migration_id) ORDER BY s.migration_id
  `
})

// Migrating an empty embedded database takes seconds: one test per
// database checks both what a first run applies and what it records.
describe("migrations", () => {
  for (const [name, database] of databases) {
    it.live(
      `apply on an empty database, recording every migration under its release at the time it was applied, then are a no-op on a migrated one (${name})`,
      () =>
        Effect.gen(function*() {
          const first = yield* Migrations.run
          assert.isAbove(first.length, 0)
          assert.deepStrictEqual(first.map(([id]) => id), [...first.map(([id]) => id)].sort((a, b) => a - b))
          const rows = yield* recorded
          assert.deepStrictEqual(rows.map((row) => [row.key, row.svc_version]), [...releaseOf])
          assert.isTrue(rows.every((row) => row.same_time))
          const second = yield* Migrations.run
          assert.deepStrictEqual(second, [])
          const sql = yield* SqlClient.SqlClient
          const tables = yield* sql<{ table_name: string }>`
          SELECT table_name FROM information_schema.tables WHERE table_schema = 'public' ORDER BY table_name
        `
          for (const table of ["api_keys", "datasets", "events", "org_secrets", "orgs", "runs", "tasks"]) {
            assert.include(tables.map((t) => t.table_name), table)
          }
        }).pipe(Effect.provide(Layer.fresh(database()))),
      60_000
    )
  }
})

describe("the database records the release of svc each migration belongs to; a build older than its database does not start", () => {
  for (const [name, database] of databases) {
    it.live(
      `a database of 0.1.0 upgrades: the migrations applied before are recorded as 0.1.0, the new ones as ${VERSION} (${name})`,
      () =>
        Effect.gen(function*() {
          yield* PgMigrator.run({ loader: Migrator.fromRecord(migrationsByRelease["0.1.0"]), table: "svc_migrations" })
            .pipe(
              Effect.provide(NodeServices.layer)
            )
          const applied = yield* Migrations.run
          assert.deepStrictEqual(
            applied.map(([id]) => id),
            Object.keys(migrationRecord).filter((key) => releaseOf.get(key) !== "0.1.0").map((key) =>
              Number(key.slice(0, 4))
            )
          )
          const rows = yield* recorded
          assert.deepStrictEqual(rows.map((row) => [row.key, row.svc_version]), [...releaseOf])
          assert.isTrue(rows.every((row) => row.same_time), "the earlier migrations keep the time they were applied")
        }).pipe(Effect.provide(Layer.fresh(database()))),
      60_000
    )

    it.live(
      `a database migrated by ${VERSION} refuses a build claiming 0.1.0, naming both versions and changing nothing; the same version starts (${name})`,
      () =>
        Effect.gen(function*() {
          yield* Migrations.run
          const before = yield* recorded
          const error = yield* Migrations.runAs("0.1.0").pipe(Effect.flip)
          assert.strictEqual(error._tag, "SchemaTooNew")
          assert.strictEqual(
            error.message,
            `svc 0.1.0 cannot start: the database schema belongs to svc ${VERSION} (migration ${
              Object.keys(migrationRecord).at(-1)
            }); upgrade svc or use a database of this version`
          )
          assert.deepStrictEqual(yield* recorded, before)
          assert.deepStrictEqual(yield* Migrations.runAs(VERSION), [])
        }).pipe(Effect.provide(Layer.fresh(migratedDatabases.get(name)!()))),
      60_000
    )

    it.live(
      `an applied migration this build does not know is refused, whatever release it names (${name})`,
      () =>
        Effect.gen(function*() {
          yield* Migrations.run
          const sql = yield* SqlClient.SqlClient
          yield* sql`INSERT INTO svc_migrations (migration_id, name) VALUES (9990, 'from_elsewhere')`
          yield* sql`INSERT INTO svc_schema_versions (migration_id, name, svc_version) VALUES (9990, 'from_elsewhere', ${VERSION})`
          const error = yield* Migrations.run.pipe(Effect.flip)
          assert.strictEqual(error._tag, "SchemaTooNew")
          assert.include(
            error.message,
            `svc ${VERSION} cannot start: the database has migration 9990_from_elsewhere (svc ${VERSION}), which this build does not know`
          )
          // Recorded for a later svc: that is what the line names.
          yield* sql`UPDATE svc_schema_versions SET svc_version = '0.10.0' WHERE migration_id = 9990`
          const later = yield* Migrations.run.pipe(Effect.flip)
          assert.include(
            later.message,
            `svc ${VERSION} cannot start: the database schema belongs to svc 0.10.0 (migration 9990_from_elsewhere)`
          )
        }).pipe(Effect.provide(Layer.fresh(migratedDatabases.get(name)!()))),
      60_000
    )
  }

  it.live.skipIf(!process.env.TEST_DATABASE_URL)(
    "processes starting at once on one empty PostgreSQL database take turns: one migrates, every one starts",
    () =>
      Effect.gen(function*() {
        const results = yield* Effect.all(Array.from({ length: 4 }, () => Migrations.run), { concurrency: "unbounded" })
        assert.strictEqual(results.filter((applied) => applied.length > 0).length, 1)
        assert.deepStrictEqual((yield* recorded).map((row) => [row.key, row.svc_version]), [...releaseOf])
      }).pipe(Effect.provide(Layer.fresh(Database.scratch(Redacted.make(process.env.TEST_DATABASE_URL!))))),
    60_000
  )
})

describe.skipIf(onServerRun)("the test kit's snapshot (SvcTest.writeSnapshot)", () => {
  it.live(
    "holds the migrated database without the template databases, and of the WAL only the checkpoint's few pages; a copy opens with every migration and writes",
    () =>
      Effect.gen(function*() {
        const dir = fs.mkdtempSync(path.join(os.tmpdir(), "svc-snapshot-"))
        yield* Effect.addFinalizer(() => Effect.sync(() => fs.rmSync(dir, { recursive: true, force: true })))
        const file = path.join(dir, "migrated.tar")
        yield* SvcTest.writeSnapshot(file)
        // `tar -tv`: mode, owner, size, date, time, name.
        const entries = execFileSync("tar", ["-tvf", file], { encoding: "utf8", stdio: ["ignore", "pipe", "ignore"] })
          .trim().split("\n")
          .map((line) => line.trim().split(/\s+/)).map((fields) => ({
            size: Number(fields[2]),
            name: fields.slice(5).join(" ").replace(/^\/?/, "")
          }))
        const databases = new Set(entries.flatMap((entry) => /^base\/(\d+)\//.exec(entry.name)?.[1] ?? []))
        assert.strictEqual(databases.size, 1, `one database's files, not ${[...databases].join(", ")}`)
        const segments = entries.filter((entry) => /^pg_wal\/[0-9A-F]{24}$/.test(entry.name))
        // The migrations wrote about 10 MB of WAL, which a copy never replays.
        assert.strictEqual(segments.length, 1)
        assert.isAtMost(segments[0]!.size, 64 * 1024)
        const applied = yield* Effect.gen(function*() {
          const sql = yield* SqlClient.SqlClient
          yield* sql`CREATE TABLE copy_writes AS SELECT generate_series(1, 20000) AS n`
          yield* sql`CHECKPOINT`
          return yield* sql<{ n: number }>`SELECT count(*)::int AS n FROM svc_migrations`
        }).pipe(Effect.provide(Layer.fresh(Database.memoryFrom(file))))
        assert.strictEqual(applied[0]!.n, Object.keys(migrationRecord).length)
      }).pipe(Effect.scoped),
    120_000
  )
})
