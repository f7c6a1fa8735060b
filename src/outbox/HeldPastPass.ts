/**
 * Whether a dispatcher's pass left committed events waiting for older
 * transactions to end, answered by the pass's own statement.
 */
import type { PgClient } from "@effect/sql-pg"

/**
 * A column for the last `SELECT` of a statement with `takeEvents`' CTEs:
 * whether committed events wait past where the statement leaves the
 * cursor for older transactions to end (the horizon of
 * `undispatchedEvents`): the first event past the last one `nxt` took
 * (past the cursor when it took none), read in order from
 * `events_writer_seq_idx`, the ones `late` marked left out. Not an
 * `EXISTS`, whose `ORDER BY` and `LIMIT` the planner drops: that was
 * planned as a sequential scan stopping at the first match, which read
 * every event kept when none waits (the common answer): 246 buffers with
 * 3 400 events kept, 5 this way.
 *
 * Speeds up: it was a statement (and a transaction) of its own after
 * every pass that took less than a full batch: 0.69 per step at 200
 * pending steps a second (`pg_stat_statements`, server, alone). One A/B
 * run of 120 s at that rate (`npm run bench -- latency`,
 * `bench/notes/latency.md`, "Three statements fewer per step"): the probe
 * gone, but the next pass, a round trip sooner, gathered fewer events
 * (passes 0.69 → 0.79 per step, the claims and settles after them with
 * them), so transactions per step 5.56 → 5.59; CPU per step, svc and
 * PostgreSQL together, 3 992 → 3 705 µs.
 */
export const heldPastPass = (sql: PgClient.PgClient) =>
  sql`((
      SELECT true FROM events e
      WHERE (e.writer, e.seq) > (
          coalesce((SELECT writer FROM nxt ORDER BY writer DESC, seq DESC LIMIT 1), (SELECT writer FROM event_dispatch)),
          coalesce((SELECT seq FROM nxt ORDER BY writer DESC, seq DESC LIMIT 1), (SELECT seq FROM event_dispatch)))
        AND NOT EXISTS (SELECT 1 FROM late WHERE late.seq = e.seq)
      ORDER BY e.writer, e.seq LIMIT 1
    ) IS NOT NULL)`
