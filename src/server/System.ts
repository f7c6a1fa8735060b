import { Cause, Effect, Exit, Option } from "effect"
import { HttpApiBuilder } from "effect/http-api"
import { SqlClient } from "effect/sql"
import { Api } from "../api/Api.ts"
import { ServiceUnavailable } from "../api/Errors.ts"
import { VERSION } from "../api/Version.ts"
import { databaseUnavailable } from "../platform/DatabaseUnavailable.ts"

/** How long `/ready` waits for the database's answer. */
const READY_TIMEOUT = "2 seconds"

export const SystemHandlers = HttpApiBuilder.group(
  Api,
  "system",
  Effect.fn(function*(handlers) {
    const sql = yield* SqlClient.SqlClient
    return handlers.handleAll({
      health: () => Effect.succeed({ status: "ok" as const, version: VERSION }),
      // Not ready says why, and the log line has the whole cause.
      ready: () =>
        sql`SELECT 1`.pipe(
          Effect.timeoutOption(READY_TIMEOUT),
          Effect.exit,
          Effect.flatMap((exit) => {
            const because = Exit.isSuccess(exit)
              ? Option.isSome(exit.value) ? undefined : `the database did not answer within ${READY_TIMEOUT}`
              : Option.getOrElse(databaseUnavailable(exit.cause), () => "the database answered with an error")
            if (because === undefined) return Effect.succeed({ status: "ok" as const })
            return Effect.logWarning(`not ready: ${because}`, Exit.isFailure(exit) ? exit.cause : Cause.empty).pipe(
              Effect.andThen(Effect.fail(new ServiceUnavailable({ detail: `Not ready: ${because}.` })))
            )
          })
        )
    })
  })
)
