/** Handlers of the console sign-in, console sessions and API keys groups. */
import { Effect } from "effect"
import { HttpApiBuilder } from "effect/http-api"
import { Api } from "../api/Api.ts"

const todo = Effect.die("not implemented yet")

export const ConsoleSignInHandlers = HttpApiBuilder.group(
  Api,
  "consoleSignIn",
  Effect.fn(function*(handlers) {
    return handlers.handleAll({
      session: () => todo,
      signIn: () => todo,
      signOut: () => todo
    })
  })
)

export const ConsoleHandlers = HttpApiBuilder.group(
  Api,
  "console",
  Effect.fn(function*(handlers) {
    return handlers.handleAll({
      listSessions: () => todo,
      revokeSession: () => todo
    })
  })
)

export const ApiKeysHandlers = HttpApiBuilder.group(
  Api,
  "apiKeys",
  Effect.fn(function*(handlers) {
    return handlers.handleAll({
      list: () => todo,
      create: () => todo,
      revoke: () => todo
    })
  })
)
