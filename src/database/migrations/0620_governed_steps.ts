import { Effect } from "effect"
import { SqlClient } from "effect/sql"

/**
 * Governed steps in one statement (`src/agents/StepStatement.ts`).
 * - Foreign keys to `orgs` from rows every pending step writes are dropped:
 *   each check took a share lock on the organization's row, so all pending
 *   steps of an organization met on it. `approvals` keeps its key to
 *   `agent_sessions` (deleted with the session, hence with the
 *   organization); `events` and `approval_stream_events` are written only
 *   by statements that hold the row lock of the session or approval they
 *   concern, with the organization taken from that row, and an
 *   organization's deletion removes them (`orgs_delete_unkeyed`).
 * - The organization's approval stream is numbered without a counter row:
 *   an event's id is its writing transaction's id times 1024 plus its place
 *   in that transaction (`pg_current_xact_id()`). Readers take only ids
 *   below the oldest transaction still running, so every id they may later
 *   see is higher than any they have seen. The ids of events written before
 *   this migration (1, 2, 3, ...) are below every new one.
 * - `agent_steps (session_id, seq)`: a session's steps are read a page at a
 *   time in the order they were governed.
 * - `svc_iso(timestamptz)`: the instant as `Date.prototype.toISOString`
 *   writes it, for JSON a statement assembles.
 */
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`ALTER TABLE approvals DROP CONSTRAINT IF EXISTS approvals_org_id_fkey`
  yield* sql`ALTER TABLE events DROP CONSTRAINT IF EXISTS events_org_id_fkey`
  yield* sql`ALTER TABLE approval_stream_events DROP CONSTRAINT IF EXISTS approval_stream_events_org_id_fkey`
  yield* sql`DROP TABLE IF EXISTS approval_stream_counters`
  yield* sql`
    CREATE FUNCTION orgs_delete_unkeyed() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      DELETE FROM events WHERE org_id = OLD.id;
      DELETE FROM approval_stream_events WHERE org_id = OLD.id;
      RETURN NULL;
    END
    $$
  `
  yield* sql`
    CREATE TRIGGER orgs_delete_unkeyed AFTER DELETE ON orgs
    FOR EACH ROW EXECUTE FUNCTION orgs_delete_unkeyed()
  `
  yield* sql`CREATE INDEX agent_steps_session_seq_idx ON agent_steps (session_id, seq)`
  yield* sql`
    CREATE FUNCTION svc_iso(t timestamptz) RETURNS text LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
    RETURN to_char(t AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')
  `
})
