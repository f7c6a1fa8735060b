import { Effect } from "effect"
import { SqlClient } from "effect/sql"

/**
 * The links of reviewer mails: each mail about a pending approval carries a
 * link that opens that approval, and only it. Only the token's SHA-256 is
 * stored (the token is 256 random bits, as for console links). The address
 * the mail went to is kept with it: a decision through the link names it
 * (`email:<address>`). A link goes with its approval.
 */
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`
    CREATE TABLE approval_mail_links (
      token_hash text PRIMARY KEY,
      approval_id uuid NOT NULL REFERENCES approvals (id) ON DELETE CASCADE,
      org_id uuid NOT NULL,
      reviewer_email text NOT NULL,
      created_at timestamptz NOT NULL DEFAULT now()
    )
  `
  yield* sql`CREATE INDEX approval_mail_links_approval_idx ON approval_mail_links (approval_id)`
})
