import { NodeServices } from "@effect/platform-node"
import { PgMigrator } from "@effect/sql-pg"
import { Effect, Layer } from "effect"
import { migrations } from "./migrations/index.ts"

/**
 * Applies pending migrations. Safe to run from several processes at once:
 * the migrator locks its table, and applied ids are skipped.
 */
export const Migrations = {
  layer: PgMigrator.layer({ loader: migrations, table: "svc_migrations" }).pipe(
    Layer.provide(NodeServices.layer),
    Layer.tapError((error) => Effect.logError("migrations failed", error))
  ),
  run: PgMigrator.run({ loader: migrations, table: "svc_migrations" }).pipe(Effect.provide(NodeServices.layer))
}
