import { NodeServices } from "@effect/platform-node"
import { PgMigrator } from "@effect/sql-pg"
import { Effect, Layer } from "effect"
import { SqlClient } from "effect/sql"
import { migrations } from "./migrations/index.ts"

/**
 * Applies pending migrations. Safe to run from several processes at once:
 * the migrator locks its table, and applied ids are skipped.
 *
 * Migrations run without the sessions' `statement_timeout`
 * (`SVC_DB_STATEMENT_TIMEOUT`): building an index on a large table, or
 * waiting for another process's migrations, may take longer, and a start
 * must not fail for it. `SET LOCAL` ends with the enclosing transaction;
 * the migrator's own transaction nests inside it.
 */
const run = SqlClient.SqlClient.pipe(
  Effect.flatMap((sql) =>
    sql.withTransaction(
      sql`SET LOCAL statement_timeout = 0`.pipe(
        Effect.andThen(PgMigrator.run({ loader: migrations, table: "svc_migrations" }))
      )
    )
  ),
  Effect.provide(NodeServices.layer)
)

export const Migrations = {
  layer: Layer.effectDiscard(run).pipe(
    Layer.tapError((error) => Effect.logError("migrations failed", error))
  ),
  run
}
