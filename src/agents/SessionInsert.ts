/**
 * The agent-session INSERT of `AgentSessions.create` (the cheapest
 * authenticated write) as constant text with positional parameters,
 * instead of an `sql` template rebuilt and compiled on every POST.
 *
 * Speeds up: the main thread allocates about 2 KB less per
 * `POST /v1/agent-sessions` (bench/notes/request-path.md, "Fourth round"). The text
 * is the one the template compiled to, parameter for parameter.
 */
import type { SqlClient } from "effect/sql"

const SESSION_INSERT = `
  INSERT INTO agent_sessions (id, org_id, task_id)
  SELECT $1, $2, $3
  WHERE $4::uuid IS NULL OR EXISTS (SELECT 1 FROM tasks WHERE id = $5 AND org_id = $6)
  RETURNING id, task_id, created_at`

/** Inserts session `id` of `orgId`, only when `taskId` is null or a task of the organization; returns the row or none. */
export const sessionInsert = (sql: SqlClient.SqlClient, id: string, orgId: string, taskId: string | null) =>
  sql.unsafe(SESSION_INSERT, [id, orgId, taskId, taskId, taskId, orgId])
