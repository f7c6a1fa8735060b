import { Effect } from "effect"
import { SqlClient } from "effect/sql"

/**
 * Webhook deliveries as a log read past a per-endpoint cursor
 * (`src/deliveries/log/Log.ts`, `docs/architecture.md` "Delivery engine").
 *
 * A webhook delivery to a concurrent endpoint is stored `logged` and, while
 * all goes well, never written again: a process leases the endpoint (one
 * row), hands out the rows past the lease's mark, and records each batch of
 * successes as one `delivery_outcomes` row while the endpoint's `cursor`
 * moves past them. Only retries, failures and releases write a delivery
 * row (then it is claimed per row, as before).
 *
 * - `delivery_targets` gains the lease (`lease_owner`: the process,
 *   `lease_id`: this lease, `lease_until`), its mark `leased_to` (the
 *   highest seq handed out under it), the `cursor` (every logged row at or
 *   below it is settled), `log_pending` (logged rows not yet settled) and
 *   `log_in_flight` (rows handed out under the lease and not yet settled).
 *   Existing targets start with the cursor past all their rows.
 * - `delivery_outcomes`: one row per target and settle batch, the seqs it
 *   delivered with their status codes and durations (a delivery's record).
 * - `delivery_records`: every delivery as the API reads it, a `logged`
 *   row's status, attempts and finish read through its target and outcome.
 * - `delivery_attempt_records`: the attempts, a logged row's one attempt
 *   read from its outcome row.
 * - The count trigger also counts `logged` rows: one leaving `logged`
 *   (written retrying, failed, queued) takes one from `log_pending`; a
 *   deleted one counts as undelivered unless it is at or below its
 *   target's cursor or an outcome row holds it.
 * - An organization's deletion takes its outcome rows.
 */
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`
    ALTER TABLE delivery_targets
      ADD COLUMN lease_owner uuid,
      ADD COLUMN lease_id uuid,
      ADD COLUMN lease_until timestamptz,
      ADD COLUMN leased_to bigint NOT NULL DEFAULT 0,
      ADD COLUMN cursor bigint NOT NULL DEFAULT 0,
      ADD COLUMN log_pending integer NOT NULL DEFAULT 0,
      ADD COLUMN log_in_flight integer NOT NULL DEFAULT 0
  `
  yield* sql`
    UPDATE delivery_targets t SET cursor = m.seq, leased_to = m.seq
    FROM (SELECT target_id, max(seq) AS seq FROM deliveries GROUP BY target_id) m
    WHERE m.target_id = t.id
  `
  yield* sql`CREATE INDEX delivery_targets_log_idx ON delivery_targets (kind) WHERE log_pending > 0`
  yield* sql`
    CREATE TABLE delivery_outcomes (
      target_id uuid NOT NULL,
      to_seq bigint NOT NULL,
      from_seq bigint NOT NULL,
      org_id uuid NOT NULL,
      at timestamptz NOT NULL DEFAULT now(),
      seqs bigint[] NOT NULL,
      status_codes integer[] NOT NULL,
      durations_ms integer[] NOT NULL,
      PRIMARY KEY (target_id, to_seq)
    )
  `
  yield* sql`CREATE INDEX delivery_outcomes_at_idx ON delivery_outcomes (at)`

  // The outcome row holding a logged row: the first whose range covers it
  // and whose seqs name it (ranges of batches settled out of order overlap).
  yield* sql`
    CREATE VIEW delivery_records AS
    SELECT d.id, d.seq, d.org_id, d.kind, d.target_id,
      CASE WHEN d.status <> 'logged' THEN d.status
           WHEN o.at IS NOT NULL THEN 'delivered'
           WHEN t.lease_id IS NOT NULL AND t.lease_until > now() AND d.seq > t.cursor AND d.seq <= t.leased_to THEN 'sending'
           ELSE 'queued' END AS status,
      d.label, d.event_id, d.payload, d.meta,
      CASE WHEN d.status <> 'logged' THEN d.attempts
           WHEN o.at IS NOT NULL OR (t.lease_id IS NOT NULL AND t.lease_until > now() AND d.seq > t.cursor AND d.seq <= t.leased_to) THEN 1
           ELSE 0 END AS attempts,
      d.replays, d.last_error, d.next_attempt_at, d.created_at,
      CASE WHEN d.status <> 'logged' THEN d.finished_at ELSE o.at END AS finished_at
    FROM deliveries d
    LEFT JOIN delivery_targets t ON d.status = 'logged' AND t.id = d.target_id
    LEFT JOIN LATERAL (
      SELECT x.at FROM delivery_outcomes x
      WHERE d.status = 'logged' AND x.target_id = d.target_id AND x.to_seq >= d.seq AND x.from_seq <= d.seq
        AND d.seq = ANY (x.seqs)
      LIMIT 1
    ) o ON true
  `
  yield* sql`
    CREATE VIEW delivery_attempt_records AS
    SELECT delivery_id, attempt, at, status_code, error, response_snippet, duration_ms FROM delivery_attempts
    UNION ALL
    SELECT d.id, 1, x.at, x.status_codes[p.i], NULL, NULL, x.durations_ms[p.i]
    FROM deliveries d
    JOIN delivery_outcomes x ON x.target_id = d.target_id AND x.to_seq >= d.seq AND x.from_seq <= d.seq
    CROSS JOIN LATERAL (SELECT array_position(x.seqs, d.seq) AS i) p
    WHERE d.status = 'logged' AND p.i IS NOT NULL
  `

  // A target's undelivered count moves by delta, its logged rows still to
  // settle by logged.
  yield* sql`
    CREATE FUNCTION deliveries_adjust_counts(target uuid, org uuid, target_kind text, delta int, logged int)
    RETURNS void LANGUAGE plpgsql AS $$
    BEGIN
      IF delta <> 0 THEN
        PERFORM deliveries_adjust_undelivered(target, org, target_kind, delta);
      END IF;
      IF logged <> 0 THEN
        UPDATE delivery_targets SET log_pending = greatest(0, log_pending + logged) WHERE id = target;
      END IF;
    END
    $$
  `
  yield* sql`
    CREATE OR REPLACE FUNCTION deliveries_count_undelivered() RETURNS trigger LANGUAGE plpgsql AS $$
    DECLARE
      change record;
    BEGIN
      IF TG_OP = 'UPDATE' THEN
        -- Every row undelivered before and after, none leaving the log
        -- (claims, releases, lease changes): no count moves.
        IF NOT EXISTS (SELECT 1 FROM new_rows WHERE status NOT IN ('queued', 'sending', 'retrying', 'logged'))
           AND NOT EXISTS (SELECT 1 FROM old_rows WHERE status NOT IN ('queued', 'sending', 'retrying', 'logged'))
           AND NOT EXISTS (SELECT 1 FROM old_rows WHERE status = 'logged') THEN
          RETURN NULL;
        END IF;
        FOR change IN
          SELECT target_id, (array_agg(org_id))[1] AS org_id, (array_agg(kind))[1] AS kind,
                 sum(delta)::int AS delta, sum(logged)::int AS logged
          FROM (
            SELECT target_id, org_id, kind, 1 AS delta, 0 AS logged FROM new_rows
            WHERE status IN ('queued', 'sending', 'retrying', 'logged')
            UNION ALL
            SELECT o.target_id, o.org_id, o.kind,
                   CASE WHEN o.status IN ('queued', 'sending', 'retrying', 'logged') THEN -1 ELSE 0 END,
                   CASE WHEN o.status = 'logged' AND n.status <> 'logged' THEN -1 ELSE 0 END
            FROM old_rows o JOIN new_rows n ON n.id = o.id
          ) changes
          GROUP BY target_id HAVING sum(delta) <> 0 OR sum(logged) <> 0 ORDER BY target_id
        LOOP
          PERFORM deliveries_adjust_counts(change.target_id, change.org_id, change.kind, change.delta, change.logged);
        END LOOP;
      ELSE
        FOR change IN
          SELECT target_id, (array_agg(org_id))[1] AS org_id, (array_agg(kind))[1] AS kind,
                 -count(*)::int AS delta, -(count(*) FILTER (WHERE status = 'logged'))::int AS logged
          FROM old_rows r
          WHERE status IN ('queued', 'sending', 'retrying')
             -- A logged row at or below its target's cursor was delivered
             -- (every other end writes the row); above it, an outcome row
             -- says so (few are above the cursor).
             OR (status = 'logged'
                 AND r.seq > coalesce((SELECT t.cursor FROM delivery_targets t WHERE t.id = r.target_id), 0)
                 AND NOT EXISTS (
                   SELECT 1 FROM delivery_outcomes x
                   WHERE x.target_id = r.target_id AND x.to_seq >= r.seq AND x.from_seq <= r.seq AND r.seq = ANY (x.seqs)))
          GROUP BY target_id ORDER BY target_id
        LOOP
          PERFORM deliveries_adjust_counts(change.target_id, change.org_id, change.kind, change.delta, change.logged);
        END LOOP;
      END IF;
      RETURN NULL;
    END
    $$
  `
  yield* sql`
    CREATE OR REPLACE FUNCTION orgs_delete_deliveries() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      DELETE FROM deliveries WHERE org_id IN (SELECT id FROM old_rows);
      DELETE FROM delivery_outcomes WHERE org_id IN (SELECT id FROM old_rows);
      RETURN NULL;
    END
    $$
  `
})
