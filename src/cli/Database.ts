/**
 * The CLI's database when it opens it itself: with `DATABASE_URL`, that
 * server; embedded, the data directory (held while the command runs). When
 * a server holds the data directory, the CLI does not come here: it sends
 * its command to that server's admin channel (`Admin.ts`). `Program.ts`
 * loads this module only for a command that runs.
 */
import { Effect, Layer, Option } from "effect"
import { ConsoleSessions } from "../console/ConsoleSessions.ts"
import { Database, embeddedSettings, serverSessionSettings } from "../database/Database.ts"
import { Migrations } from "../database/Migrations.ts"
import { Identity } from "../identity/Identity.ts"
import { SvcConfig } from "../platform/Config.ts"

export const CliDatabaseLive = Layer.unwrap(Effect.gen(function*() {
  const config = yield* SvcConfig
  const database = Option.isSome(config.databaseUrl)
    ? Database.server(config.databaseUrl.value, 2, serverSessionSettings(config))
    : Database.embedded(config.dataDir, embeddedSettings(config), { waitMs: 0, smallBufferPool: true })
  return Migrations.layer.pipe(Layer.provideMerge(database))
}))

/** The services the commands use, on the CLI's database. */
export const CliServicesLive = Layer.mergeAll(Identity.layer, ConsoleSessions.layer).pipe(
  Layer.provideMerge(CliDatabaseLive),
  Layer.provideMerge(SvcConfig.layer)
)
