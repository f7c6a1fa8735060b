import { Effect } from "effect"
import { SqlClient } from "effect/sql"

/**
 * The JSON Lines export of a dataset version (`GET /v1/datasets/:id/export`)
 * is a pure function of the version, which never changes: its SHA-256 and
 * its length in bytes are computed once, by the first export (a paged pass
 * over the version before the body starts), and kept here so every later
 * export sends them before the first byte. NULL until then.
 */
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`ALTER TABLE datasets ADD COLUMN export_sha256 text, ADD COLUMN export_bytes bigint`
})
