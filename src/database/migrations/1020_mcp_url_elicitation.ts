import { Effect } from "effect"
import { SqlClient } from "effect/sql"

/**
 * `mcp_sessions.url_elicitation`: whether the client declared URL-mode
 * elicitation (`capabilities.elicitation.url`) in `initialize`. svc builds
 * a server per request, so what the client declared is kept with its
 * session: a call that goes pending sends the approver to the approval's
 * console page only to a client that said it can open one (docs/mcp.md).
 * A constant default: no table rewrite.
 */
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`ALTER TABLE mcp_sessions ADD COLUMN IF NOT EXISTS url_elicitation boolean NOT NULL DEFAULT false`
})
