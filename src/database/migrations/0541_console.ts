import { Effect } from "effect"
import { SqlClient } from "effect/sql"

/**
 * The web console.
 * - `console_links`: one-time sign-in links. Only the token's SHA-256 is
 *   stored; a link is used by one atomic `UPDATE ... WHERE used_at IS NULL
 *   AND expires_at > now()`.
 * - `console_sessions`: server-side sessions of the console cookie, stored
 *   hashed like API keys and looked up on every request (a revocation takes
 *   effect at once in every process). `last_seen_at` drives the idle
 *   timeout, `absolute_expires_at` the longest life.
 * - `approval_stream_counters` / `approval_stream_events`: the organization's
 *   approval changes, numbered 1, 2, 3, ... per organization for the SSE
 *   stream. Bumping the counter locks the organization's counter row until
 *   commit, so events of one organization commit in id order and a reader
 *   that resumes after id N misses nothing and sees nothing twice. Each
 *   approval transaction bumps it last, after every other row it locks.
 * - `approvals.seq`: keyset order of the approvals list.
 */
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`
    CREATE TABLE console_links (
      id uuid PRIMARY KEY,
      org_id uuid NOT NULL REFERENCES orgs (id) ON DELETE CASCADE,
      token_hash text NOT NULL UNIQUE,
      preset text NOT NULL,
      person text NOT NULL,
      created_at timestamptz NOT NULL DEFAULT now(),
      expires_at timestamptz NOT NULL,
      used_at timestamptz
    )
  `
  yield* sql`
    CREATE TABLE console_sessions (
      id uuid PRIMARY KEY,
      seq bigint GENERATED ALWAYS AS IDENTITY UNIQUE,
      org_id uuid NOT NULL REFERENCES orgs (id) ON DELETE CASCADE,
      token_hash text NOT NULL UNIQUE,
      preset text NOT NULL,
      person text NOT NULL,
      created_at timestamptz NOT NULL DEFAULT now(),
      last_seen_at timestamptz NOT NULL DEFAULT now(),
      absolute_expires_at timestamptz NOT NULL,
      revoked_at timestamptz
    )
  `
  yield* sql`CREATE INDEX console_sessions_org_idx ON console_sessions (org_id, seq) WHERE revoked_at IS NULL`
  yield* sql`
    CREATE TABLE approval_stream_counters (
      org_id uuid PRIMARY KEY REFERENCES orgs (id) ON DELETE CASCADE,
      seq bigint NOT NULL
    )
  `
  yield* sql`
    CREATE TABLE approval_stream_events (
      org_id uuid NOT NULL REFERENCES orgs (id) ON DELETE CASCADE,
      seq bigint NOT NULL,
      name text NOT NULL,
      data text NOT NULL,
      created_at timestamptz NOT NULL DEFAULT now(),
      PRIMARY KEY (org_id, seq)
    )
  `
  yield* sql`ALTER TABLE approvals ADD COLUMN seq bigint GENERATED ALWAYS AS IDENTITY`
  yield* sql`CREATE INDEX approvals_org_list_idx ON approvals (org_id, seq)`
  yield* sql`CREATE INDEX approvals_org_status_list_idx ON approvals (org_id, status, seq)`
  // A console session's person decides too: `console:<name>`, not a key id.
  yield* sql`ALTER TABLE approvals ALTER COLUMN decided_by TYPE text`
})
