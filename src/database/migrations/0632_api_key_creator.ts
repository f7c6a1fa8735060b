import { Effect } from "effect"
import { SqlClient } from "effect/sql"

/**
 * Who made an API key: the actor of the request that created it through
 * `POST /v1/api-keys` (`console:<name>` for a person signed in to the
 * console, else the creating key's id). NULL for keys made with the CLI,
 * and for keys made before this column existed.
 */
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`ALTER TABLE api_keys ADD COLUMN created_by text`
})
