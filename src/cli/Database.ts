/**
 * The CLI's database: the same one the server uses. With `DATABASE_URL`,
 * that server. Embedded: if a server holds the data dir, its socket (found
 * from the lock file in the data dir); otherwise the CLI opens the data dir
 * itself (and holds it while it runs).
 */
import { Effect, Layer, Option } from "effect"
import * as path from "node:path"
import { SvcConfig } from "../platform/Config.ts"
import { Database, readLiveLock } from "../platform/Database.ts"
import { Migrations } from "../platform/Migrations.ts"

export const CliDatabaseLive = Layer.unwrap(Effect.map(SvcConfig, (config) => {
  if (Option.isSome(config.databaseUrl)) {
    return Migrations.layer.pipe(Layer.provideMerge(Database.server(config.databaseUrl.value, 2)))
  }
  const running = readLiveLock(path.resolve(config.dataDir))
  return Option.match(running, {
    // The server applied its migrations when it started.
    onSome: (lock) => Database.attached(lock),
    onNone: () => Migrations.layer.pipe(Layer.provideMerge(Database.embedded(config.dataDir)))
  })
}))
