import { Effect } from "effect"
import { SqlClient } from "effect/sql"

/**
 * Queue capacity without counting the queue.
 *
 * `delivery_targets.undelivered` is the number of the target's deliveries
 * that are queued, sending or retrying. Statement-level triggers keep it
 * (one aggregated update per statement and target, whoever writes
 * `deliveries`), so enqueueing reads one row where it used to count up to
 * `capacity` rows per batch: a burst into a long queue made every enqueue
 * slower than the last. Every target with deliveries now has a row here.
 *
 * `deliveries_due_idx` goes: claims and `nextDue` walk
 * `deliveries_waiting_idx` (0301), and every index is paid on each insert
 * and status change.
 */
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`ALTER TABLE delivery_targets ADD COLUMN undelivered integer NOT NULL DEFAULT 0`
  yield* sql`
    INSERT INTO delivery_targets (id, org_id, kind, undelivered)
    SELECT target_id, (array_agg(org_id))[1], (array_agg(kind))[1], count(*)
    FROM deliveries WHERE status IN ('queued', 'sending', 'retrying')
    GROUP BY target_id
    ON CONFLICT (id) DO UPDATE SET undelivered = EXCLUDED.undelivered
  `
  // Targets are updated in id order, so two statements touching the same
  // targets lock them in the same order (no deadlock between processes).
  // A target row is created by the first delivery that waits for it; a
  // decrease only adjusts a row that still exists (an organization's
  // deletion takes its targets with it). Each branch reads only the
  // transition tables its event has.
  yield* sql`
    CREATE FUNCTION deliveries_count_undelivered() RETURNS trigger LANGUAGE plpgsql AS $$
    DECLARE
      change record;
    BEGIN
      IF TG_OP = 'INSERT' THEN
        FOR change IN
          SELECT target_id, (array_agg(org_id))[1] AS org_id, (array_agg(kind))[1] AS kind, count(*)::int AS delta
          FROM new_rows WHERE status IN ('queued', 'sending', 'retrying')
          GROUP BY target_id ORDER BY target_id
        LOOP
          PERFORM deliveries_adjust_undelivered(change.target_id, change.org_id, change.kind, change.delta);
        END LOOP;
      ELSIF TG_OP = 'UPDATE' THEN
        FOR change IN
          SELECT target_id, (array_agg(org_id))[1] AS org_id, (array_agg(kind))[1] AS kind, sum(delta)::int AS delta
          FROM (
            SELECT target_id, org_id, kind, 1 AS delta FROM new_rows WHERE status IN ('queued', 'sending', 'retrying')
            UNION ALL
            SELECT target_id, org_id, kind, -1 AS delta FROM old_rows WHERE status IN ('queued', 'sending', 'retrying')
          ) changes
          GROUP BY target_id HAVING sum(delta) <> 0 ORDER BY target_id
        LOOP
          PERFORM deliveries_adjust_undelivered(change.target_id, change.org_id, change.kind, change.delta);
        END LOOP;
      ELSE
        FOR change IN
          SELECT target_id, (array_agg(org_id))[1] AS org_id, (array_agg(kind))[1] AS kind, -count(*)::int AS delta
          FROM old_rows WHERE status IN ('queued', 'sending', 'retrying')
          GROUP BY target_id ORDER BY target_id
        LOOP
          PERFORM deliveries_adjust_undelivered(change.target_id, change.org_id, change.kind, change.delta);
        END LOOP;
      END IF;
      RETURN NULL;
    END
    $$
  `
  yield* sql`
    CREATE FUNCTION deliveries_adjust_undelivered(target uuid, org uuid, target_kind text, delta integer)
    RETURNS void LANGUAGE plpgsql AS $$
    BEGIN
      IF delta > 0 THEN
        INSERT INTO delivery_targets (id, org_id, kind, undelivered) VALUES (target, org, target_kind, delta)
        ON CONFLICT (id) DO UPDATE SET undelivered = delivery_targets.undelivered + EXCLUDED.undelivered;
      ELSE
        UPDATE delivery_targets SET undelivered = greatest(0, undelivered + delta) WHERE id = target;
      END IF;
    END
    $$
  `
  yield* sql`
    CREATE TRIGGER deliveries_count_insert AFTER INSERT ON deliveries
    REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION deliveries_count_undelivered()
  `
  yield* sql`
    CREATE TRIGGER deliveries_count_update AFTER UPDATE ON deliveries
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION deliveries_count_undelivered()
  `
  yield* sql`
    CREATE TRIGGER deliveries_count_delete AFTER DELETE ON deliveries
    REFERENCING OLD TABLE AS old_rows
    FOR EACH STATEMENT EXECUTE FUNCTION deliveries_count_undelivered()
  `
  yield* sql`DROP INDEX deliveries_due_idx`
})
