/**
 * The CLI's database: the same one the server uses. With `DATABASE_URL`,
 * that server. Embedded: the running server's database through its socket
 * in the data directory; when no server runs, the CLI opens the data
 * directory itself (and holds it while it runs).
 */
import { Effect, Layer, Option } from "effect"
import { SvcConfig } from "../platform/Config.ts"
import { Database, serverSessionSettings } from "../platform/Database.ts"
import { Migrations } from "../platform/Migrations.ts"

export const CliDatabaseLive = Layer.unwrap(Effect.gen(function*() {
  const config = yield* SvcConfig
  if (Option.isSome(config.databaseUrl)) {
    return Migrations.layer.pipe(Layer.provideMerge(Database.server(config.databaseUrl.value, 2, serverSessionSettings(config))))
  }
  const database = yield* Database.shareOrOpen(config.dataDir)
  // The server applied its migrations when it started.
  return database.attached ? database.layer : Migrations.layer.pipe(Layer.provideMerge(database.layer))
}))
