/**
 * The CLI's database when it opens it itself: with `DATABASE_URL`, that
 * server; embedded, the data directory (held while the command runs). When
 * a server holds the data directory, the CLI does not come here: it sends
 * its command to that server's admin channel (`Admin.ts`).
 */
import { Effect, Layer, Option } from "effect"
import { SvcConfig } from "../platform/Config.ts"
import { Database, embeddedSettings, serverSessionSettings } from "../platform/Database.ts"
import { Migrations } from "../platform/Migrations.ts"

export const CliDatabaseLive = Layer.unwrap(Effect.gen(function*() {
  const config = yield* SvcConfig
  const database = Option.isSome(config.databaseUrl)
    ? Database.server(config.databaseUrl.value, 2, serverSessionSettings(config))
    : Database.embedded(config.dataDir, embeddedSettings(config), { waitMs: 0 })
  return Migrations.layer.pipe(Layer.provideMerge(database))
}))
