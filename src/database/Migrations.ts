import * as NodeServices from "@effect/platform-node/NodeServices"
import { PgMigrator } from "@effect/sql-pg"
import { Data, Effect, Layer, Option, Runtime, Schema } from "effect"
import { SqlClient } from "effect/sql"
import { VERSION } from "../api/Version.ts"
import { rowsOf } from "../platform/Rows.ts"
import { cannotConnect, MigrationFailed } from "../platform/StartFailure.ts"
import { migrations, releaseOf } from "./migrations/index.ts"

/**
 * Orders two release versions (`major.minor.patch`) by their numbers:
 * negative when `a` is older, 0 when equal, positive when newer.
 */
export const compareVersions = (a: string, b: string): number => {
  const x = a.split(".").map(Number)
  const y = b.split(".").map(Number)
  for (let i = 0; i < Math.max(x.length, y.length); i++) {
    const difference = (x[i] ?? 0) - (y[i] ?? 0)
    if (difference !== 0) return difference
  }
  return 0
}

/** An applied migration as the database has it: its release, when recorded. */
const AppliedMigration = Schema.Struct({
  migration_id: Schema.Number,
  name: Schema.String,
  svc_version: Schema.NullOr(Schema.String)
})
export type AppliedMigration = typeof AppliedMigration.Type
const AppliedMigrations = rowsOf("svc_migrations", AppliedMigration)

const keyOf = (migration: AppliedMigration) => `${String(migration.migration_id).padStart(4, "0")}_${migration.name}`

/** The database belongs to a later svc than this build: it does not start on it. */
export class SchemaTooNew extends Data.TaggedError("SchemaTooNew")<{ readonly message: string }> {
  // The entry points report it as one line of their own.
  override readonly [Runtime.errorReported] = false
}

/**
 * Why build `version` must not start on a database with these applied
 * migrations, if it must not: one recorded for a later svc (the latest
 * such is named), else one this build does not know.
 */
export const refusal = (version: string, applied: ReadonlyArray<AppliedMigration>): Option.Option<string> => {
  let newest: AppliedMigration | undefined
  for (const migration of applied) {
    if (migration.svc_version === null || compareVersions(migration.svc_version, version) <= 0) continue
    if (newest === undefined || compareVersions(migration.svc_version, newest.svc_version!) >= 0) newest = migration
  }
  const advice = "upgrade svc or use a database of this version"
  if (newest !== undefined) {
    return Option.some(
      `svc ${version} cannot start: the database schema belongs to svc ${newest.svc_version} (migration ${
        keyOf(newest)
      }); ${advice}`
    )
  }
  const unknown = applied.findLast((migration) => !releaseOf.has(keyOf(migration)))
  if (unknown === undefined) return Option.none()
  const recorded = unknown.svc_version === null ? "" : ` (svc ${unknown.svc_version})`
  return Option.some(
    `svc ${version} cannot start: the database has migration ${
      keyOf(unknown)
    }${recorded}, which this build does not know; ${advice}`
  )
}

/** The advisory lock migration runs take turns on (the webhook dispatcher's is 7_300_001). */
const MIGRATIONS_LOCK = 7_300_000

/**
 * Applies pending migrations as svc `version`, then refuses a database that
 * belongs to a later svc, and records the release of every migration
 * applied without one (after migration 0680, on the first start of 0.2.0,
 * that is every earlier one).
 *
 * Processes starting at once on one PostgreSQL take turns: the whole run
 * holds a transaction-scoped advisory lock. The migrator's own lock
 * (`LOCK TABLE svc_migrations`) comes after it creates that table, so two
 * first starts on an empty database both tried to create it and one failed.
 *
 * The check is one statement, in the same transaction, after the migrator:
 * the record table exists only then (on an empty database or one of
 * 0.1.0), and it still decides before anything starts: a refusal rolls the
 * whole transaction back, and on a newer database the migrator has nothing
 * to apply anyway (ids only go up). Processes already running are not
 * checked again (see "Upgrades" in docs/operations.md).
 *
 * Migrations run without the sessions' `statement_timeout`
 * (`SVC_DB_STATEMENT_TIMEOUT`): building an index on a large table, or
 * waiting for another process's migrations, may take longer, and a start
 * must not fail for it. `SET LOCAL` ends with the enclosing transaction;
 * the migrator's own transaction nests inside it.
 */
const runAs = (version: string) =>
  SqlClient.SqlClient.pipe(
    Effect.flatMap((sql) =>
      sql.withTransaction(Effect.gen(function*() {
        yield* sql`SET LOCAL statement_timeout = 0`
        yield* sql`SELECT pg_advisory_xact_lock(${MIGRATIONS_LOCK})`
        const applied = yield* PgMigrator.run({ loader: migrations, table: "svc_migrations" })
        const migrated = yield* AppliedMigrations.decoded(sql`
          SELECT m.migration_id, m.name, s.svc_version
          FROM svc_migrations m LEFT JOIN svc_schema_versions s USING (migration_id)
          ORDER BY m.migration_id
        `)
        const refused = refusal(version, migrated)
        if (Option.isSome(refused)) return yield* new SchemaTooNew({ message: refused.value })
        const unrecorded = new Map<string, Array<number>>()
        for (const migration of migrated) {
          const release = migration.svc_version === null ? releaseOf.get(keyOf(migration)) : undefined
          if (release !== undefined) unrecorded.set(release, [...unrecorded.get(release) ?? [], migration.migration_id])
        }
        for (const [release, ids] of unrecorded) {
          yield* sql`
            INSERT INTO svc_schema_versions (migration_id, name, svc_version, applied_at)
            SELECT migration_id, name, ${release}::text, created_at FROM svc_migrations WHERE migration_id IN ${
            sql.in(ids)
          }
          `
        }
        return applied
      }))
    ),
    Effect.provide(NodeServices.layer)
  )

export const Migrations = {
  // The entry points report a failure as their one line (`StartFailure.ts`):
  // a database that cannot be reached as such, a refused migration as one.
  layer: Layer.effectDiscard(
    runAs(VERSION).pipe(
      Effect.catchTag(
        "SqlError",
        (error) => Effect.fail(cannotConnect(error) ? error : new MigrationFailed({ message: error.message }))
      )
    )
  ),
  run: runAs(VERSION),
  /** As a build of another version would (tests simulate an older one). */
  runAs
}
