import { Effect } from "effect"
import { SqlClient } from "effect/sql"

/**
 * The dispatcher's cursor: which events are fanned out is one row, not a
 * mark on each event (the mark was a new version of every event row, with
 * its index entries: the largest part of PostgreSQL's cost per delivery
 * after the delivery row itself).
 *
 * - `events.writer`: the transaction that wrote the event
 *   (`pg_current_xact_id()`, a default, so writers of every release fill
 *   it). An event whose writer is older than every transaction still
 *   running (`pg_snapshot_xmin`) can no longer appear later below another:
 *   events are fanned out in `(writer, seq)` order, and only below that
 *   horizon, so the cursor never passes an event whose transaction took its
 *   seq and committed after a higher one.
 * - `event_dispatch`: the one row `(writer, seq)`, every event at or below
 *   it fanned out.
 * - `events.dispatched_at` now defaults to the time of writing: the
 *   previous release's dispatcher (which takes `dispatched_at IS NULL`)
 *   leaves the events of this one alone during a rolling upgrade, and the
 *   outbox's retention still counts from it (and waits for the cursor).
 *   Events the previous release wrote and did not dispatch are given to the
 *   cursor here (this transaction as their writer), locked against the
 *   previous release's dispatcher as its own marks are.
 * - `undispatched_events`: the events the cursor has not passed.
 */
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`ALTER TABLE events ADD COLUMN IF NOT EXISTS writer xid8`
  yield* sql`ALTER TABLE events ALTER COLUMN writer SET DEFAULT pg_current_xact_id()`
  yield* sql`ALTER TABLE events ALTER COLUMN dispatched_at SET DEFAULT now()`
  yield* sql`
    UPDATE events SET writer = pg_current_xact_id(), dispatched_at = now()
    WHERE (CASE WHEN dispatched_at IS NULL THEN seq END) > 0
  `
  yield* sql`CREATE INDEX IF NOT EXISTS events_writer_seq_idx ON events (writer, seq)`
  yield* sql`
    CREATE TABLE IF NOT EXISTS event_dispatch (
      one boolean PRIMARY KEY DEFAULT true CHECK (one),
      writer xid8 NOT NULL,
      seq bigint NOT NULL
    )
  `
  yield* sql`INSERT INTO event_dispatch (writer, seq) VALUES ('0', 0) ON CONFLICT DO NOTHING`
  yield* sql`
    CREATE OR REPLACE VIEW undispatched_events AS
    SELECT e.* FROM events e, event_dispatch c
    WHERE (e.writer, e.seq) > (c.writer, c.seq)
  `
})
