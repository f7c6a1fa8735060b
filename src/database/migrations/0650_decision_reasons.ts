import { Effect } from "effect"
import { SqlClient } from "effect/sql"

/**
 * Why a person decided: the optional reason given with a decision (at most
 * 1 000 characters, checked by the API), carried by the snapshot as
 * `decision_reason`.
 */
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`ALTER TABLE approvals ADD COLUMN decision_reason text`
})
