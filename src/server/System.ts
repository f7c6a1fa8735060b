import { Effect } from "effect"
import { HttpApiBuilder } from "effect/http-api"
import { SqlClient } from "effect/sql"
import { Api } from "../api/Api.ts"
import { ServiceUnavailable } from "../api/Errors.ts"

export const SystemHandlers = HttpApiBuilder.group(
  Api,
  "system",
  Effect.fn(function*(handlers) {
    const sql = yield* SqlClient.SqlClient
    return handlers.handleAll({
      health: () => Effect.succeed({ status: "ok" as const }),
      ready: () =>
        sql`SELECT 1`.pipe(
          Effect.timeout("2 seconds"),
          Effect.as({ status: "ok" as const }),
          Effect.catch(() => Effect.fail(new ServiceUnavailable({ detail: "The database does not answer." })))
        )
    })
  })
)
