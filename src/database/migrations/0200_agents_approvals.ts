import { Effect } from "effect"
import { SqlClient } from "effect/sql"

/**
 * Agent sessions, governed steps, approval policies and approvals.
 * - `agent_sessions.event_seq` numbers the session's stream events; bumping
 *   it locks the session row until commit, so events of one session commit
 *   in id order and a resuming reader never skips one.
 * - `approvals.next_due_at` / `next_due_kind` is the next deadline of a
 *   pending approval (`expiring`, `escalate`, `expire`); the scheduler claims
 *   due rows with `FOR UPDATE SKIP LOCKED`.
 */
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`
    CREATE TABLE approval_policies (
      org_id uuid NOT NULL REFERENCES orgs (id) ON DELETE CASCADE,
      action_class text NOT NULL,
      mode text NOT NULL,
      review_seconds integer NOT NULL,
      expiring_notice_seconds integer NOT NULL,
      escalation_seconds integer,
      timeout_action text NOT NULL,
      updated_at timestamptz NOT NULL DEFAULT now(),
      PRIMARY KEY (org_id, action_class)
    )
  `
  yield* sql`
    CREATE TABLE agent_sessions (
      id uuid PRIMARY KEY,
      seq bigint GENERATED ALWAYS AS IDENTITY UNIQUE,
      org_id uuid NOT NULL REFERENCES orgs (id) ON DELETE CASCADE,
      task_id uuid REFERENCES tasks (id) ON DELETE SET NULL,
      event_seq bigint NOT NULL DEFAULT 0,
      created_at timestamptz NOT NULL DEFAULT now()
    )
  `
  yield* sql`CREATE INDEX agent_sessions_org_idx ON agent_sessions (org_id, seq)`
  yield* sql`
    CREATE TABLE agent_steps (
      session_id uuid NOT NULL REFERENCES agent_sessions (id) ON DELETE CASCADE,
      step_id text NOT NULL,
      seq bigint GENERATED ALWAYS AS IDENTITY,
      org_id uuid NOT NULL,
      tool text NOT NULL,
      action_class text NOT NULL,
      arguments jsonb NOT NULL,
      decision text NOT NULL,
      approval_id uuid,
      resolution text NOT NULL,
      outcome text,
      outcome_body jsonb,
      outcome_at timestamptz,
      created_at timestamptz NOT NULL DEFAULT now(),
      PRIMARY KEY (session_id, step_id)
    )
  `
  yield* sql`
    CREATE TABLE approvals (
      id uuid PRIMARY KEY,
      org_id uuid NOT NULL REFERENCES orgs (id) ON DELETE CASCADE,
      session_id uuid NOT NULL REFERENCES agent_sessions (id) ON DELETE CASCADE,
      step_id text NOT NULL,
      task_id uuid,
      status text NOT NULL,
      deadline_at timestamptz NOT NULL,
      expires_at timestamptz NOT NULL,
      timeout_action text NOT NULL,
      expiring_at timestamptz,
      escalation_seconds integer,
      expiring_sent boolean NOT NULL DEFAULT false,
      escalated boolean NOT NULL DEFAULT false,
      next_due_at timestamptz,
      next_due_kind text,
      decided_at timestamptz,
      decided_by uuid,
      created_at timestamptz NOT NULL DEFAULT now(),
      UNIQUE (session_id, step_id)
    )
  `
  yield* sql`CREATE INDEX approvals_due_idx ON approvals (next_due_at) WHERE next_due_at IS NOT NULL`
  yield* sql`
    CREATE TABLE session_events (
      session_id uuid NOT NULL REFERENCES agent_sessions (id) ON DELETE CASCADE,
      seq bigint NOT NULL,
      org_id uuid NOT NULL,
      name text NOT NULL,
      data text NOT NULL,
      created_at timestamptz NOT NULL DEFAULT now(),
      PRIMARY KEY (session_id, seq)
    )
  `
})
