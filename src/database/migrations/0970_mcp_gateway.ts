import { Effect } from "effect"
import { SqlClient } from "effect/sql"

/**
 * The MCP gateway (docs/mcp.md). `mcp_servers`: an organization's upstream
 * MCP servers; their URL and header values are secrets in `org_secrets`
 * (owner kinds `mcp_server_url` and `mcp_server_header`), the row keeps the
 * masked `url_hint` and the header names only. `mcp_sessions`: an MCP
 * session is an agent session (same id) opened by `initialize`, so any svc
 * process answers its later requests. `mcp_calls`: one governed
 * `tools/call` per session and `step_id`, its task (`id` is the task id),
 * where it stands and, once finished, its result; a call being run holds
 * a lease (`lease_until`, the database's clock) so that one process runs it.
 */
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`
    CREATE TABLE IF NOT EXISTS mcp_servers (
      id uuid PRIMARY KEY,
      org_id uuid NOT NULL REFERENCES orgs (id) ON DELETE CASCADE,
      name text NOT NULL,
      url_hint text NOT NULL,
      header_names jsonb NOT NULL DEFAULT '[]',
      default_action_class text NOT NULL,
      tool_action_classes jsonb NOT NULL DEFAULT '{}',
      created_by text NOT NULL,
      created_at timestamptz NOT NULL DEFAULT now(),
      UNIQUE (org_id, name)
    )
  `
  yield* sql`
    CREATE TABLE IF NOT EXISTS mcp_sessions (
      id uuid PRIMARY KEY REFERENCES agent_sessions (id) ON DELETE CASCADE,
      org_id uuid NOT NULL REFERENCES orgs (id) ON DELETE CASCADE,
      key_id text NOT NULL,
      protocol_version text NOT NULL,
      client_name text,
      created_at timestamptz NOT NULL DEFAULT now(),
      closed_at timestamptz
    )
  `
  yield* sql`
    CREATE TABLE IF NOT EXISTS mcp_calls (
      id uuid PRIMARY KEY,
      org_id uuid NOT NULL REFERENCES orgs (id) ON DELETE CASCADE,
      session_id uuid NOT NULL REFERENCES agent_sessions (id) ON DELETE CASCADE,
      step_id text NOT NULL,
      server_id uuid NOT NULL,
      tool text NOT NULL,
      arguments jsonb NOT NULL,
      approval_id uuid,
      state text NOT NULL CHECK (state IN ('pending', 'running', 'completed', 'failed', 'cancelled')),
      status_message text,
      result jsonb,
      lease_until timestamptz,
      created_at timestamptz NOT NULL DEFAULT now(),
      updated_at timestamptz NOT NULL DEFAULT now(),
      UNIQUE (session_id, step_id)
    )
  `
})
