/**
 * What the CLI's commands share: the flags every command takes (`--json`,
 * `--org`), how they answer (`print`) and refuse (`fail`), and the services
 * they use, loaded only when a command runs.
 */
import * as CliError from "effect/cli/CliError"
import * as Flag from "effect/cli/Flag"
import * as Console from "effect/Console"
import * as Effect from "effect/Effect"
import * as Schema from "effect/Schema"

// The services' modules (and the database's) load when a command runs:
// `svc --help` and a mistyped flag load the CLI alone.
export const consoleModule = Effect.promise(() => import("../console/ConsoleSessions.ts"))
export const loadIdentity = Effect.gen(function*() {
  return yield* (yield* Effect.promise(() => import("../identity/Identity.ts"))).Identity
})
export const loadSessions = Effect.gen(function*() {
  return yield* (yield* consoleModule).ConsoleSessions
})
export const loadDatabaseInfo = Effect.gen(function*() {
  return yield* (yield* Effect.promise(() => import("../database/Database.ts"))).DatabaseInfo
})
export const loadSql = Effect.gen(function*() {
  return yield* (yield* Effect.promise(() => import("effect/sql"))).SqlClient.SqlClient
})

export const json = Flag.Boolean("json").pipe(Flag.withDescription("Print one JSON object"), Flag.withDefault(false))

export const Uuid = Schema.String.check(Schema.isUUID(undefined, { message: "Expected an id (UUID)" }))

export const fail = (message: string) =>
  Effect.fail(new CliError.UserError({ cause: new Error(message), userMessage: message }))

export const print = (asJson: boolean, value: unknown, text: string) =>
  Console.log(asJson ? JSON.stringify(value) : text)

export const orgFlag = Flag.String("org").pipe(Flag.withDescription("Organization id"), Flag.withSchema(Uuid))
