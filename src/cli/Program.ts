/**
 * Every `svc` command but `start` and `--version` (`main.ts` loads this
 * module for them): organizations, API keys, console sign-in and the
 * database (`Commands.ts` lists them).
 *
 * With `DATABASE_URL` the CLI opens that server. Embedded: when a server
 * holds the data directory, the CLI sends the command to that server's
 * admin channel and prints its answer; when none does, it opens the data
 * directory itself while the command runs.
 */
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import * as NodeServices from "@effect/platform-node/NodeServices"
import * as Command from "effect/cli/Command"
import * as Clock from "effect/Clock"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Logger from "effect/Logger"
import { VERSION } from "../api/Version.ts"
import { SvcConfig } from "../platform/Config.ts"
import { isHeld } from "../platform/DataDir.ts"
import { startFailure } from "../platform/StartFailure.ts"
import { adminSocketPath, answers, sendCommand } from "./Admin.ts"
import { argv, local } from "./Argv.ts"
import { commands } from "./Commands.ts"

/** The running server's admin socket, if a server holds the data directory; `undefined`: run here. */
const runningServer = Effect.gen(function*() {
  const config = yield* SvcConfig
  if (config.databaseUrl._tag === "Some" || local) return undefined
  const socket = adminSocketPath(config.dataDir)
  // Held but not answering: another CLI, or a server still starting (`SVC_CLI_HOLD_WAIT`).
  const deadline = (yield* Clock.currentTimeMillis) + Duration.toMillis(config.cliHoldWait)
  for (;;) {
    if (yield* Effect.promise(() => answers(socket))) return socket
    // Held by another CLI, or by a server still starting: wait for either.
    if (!isHeld(config.dataDir) || (yield* Clock.currentTimeMillis) >= deadline) return undefined
    yield* Effect.sleep("100 millis")
  }
})

// Commands open the database only when they run, and load its modules
// then: `--help` loads the CLI alone.
const ServicesLive = Layer.unwrap(
  Effect.map(Effect.promise(() => import("./Database.ts")), (module) => module.CliServicesLive)
)

/**
 * A failure's line for the CLI, after `svc: ` as every CLI error is. A
 * database of a later svc is refused in the server's words ("svc 0.2.0
 * cannot start: …"); the CLI says what it could not do.
 */
const cliMessage = (failure: { readonly reason: string; readonly message: string }) =>
  failure.reason === "schema_too_new"
    ? failure.message.replace(/^svc (\S+) cannot start: /, "this svc ($1) cannot open the database: ")
    : failure.message

const program = Effect.gen(function*() {
  const socket = yield* runningServer.pipe(Effect.provide(SvcConfig.layer))
  if (socket !== undefined) {
    const answer = yield* Effect.promise(() => sendCommand(socket, argv))
    process.stdout.write(answer.stdout)
    process.stderr.write(answer.stderr)
    process.exitCode = answer.code
    return
  }
  yield* Command.runWith(commands.pipe(Command.provide(ServicesLive)), { version: VERSION })(argv)
}).pipe(
  // A setting it cannot use, the database it could not open (another
  // process holds the data directory past the wait, or the server is
  // unreachable), or one of a later svc: one line on stderr, so stdout
  // holds only answers, and the exit code of that reason (the server's).
  Effect.catchCause((cause) => {
    const failure = startFailure(cause)
    if (failure.reason === "unexpected") return Effect.failCause(cause)
    return Effect.sync(() => {
      process.stderr.write(`svc: ${cliMessage(failure)}\n`)
      process.exitCode = failure.exitCode
    })
  })
)

program.pipe(
  Effect.provide(NodeServices.layer),
  // Diagnostics go to stderr so stdout holds only the answer.
  Effect.provide(Logger.layer([Logger.withConsoleError(Logger.formatLogFmt)])),
  NodeRuntime.runMain
)
