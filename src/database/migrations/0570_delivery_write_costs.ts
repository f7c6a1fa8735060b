import { Effect } from "effect"
import { SqlClient } from "effect/sql"

/**
 * Less written per delivery. Each delivery writes three versions of its
 * `deliveries` row (enqueue, claim, settle), each with an entry in every
 * index whose predicate it matches, and one `delivery_attempts` row.
 *
 * - The UNIQUE constraint on `deliveries.seq` goes: `seq` is an identity
 *   column (GENERATED ALWAYS), unique by construction, and no statement
 *   looks a delivery up by it (lists order by `deliveries_target_seq_idx`).
 *   Its index cost an entry per row version: three per delivery.
 * - `delivery_attempts` loses its foreign key to `deliveries`: its check
 *   ran once per attempt recorded (a key-share lookup of the delivery row
 *   that the same settle statement had just updated and locked). Attempts
 *   are only inserted by the settle, for the rows it updated; what the
 *   constraint's ON DELETE CASCADE did, a statement-level trigger does: the
 *   attempts of deleted deliveries go in the same statement (retention,
 *   an organization's deletion).
 * - The undelivered count's UPDATE trigger (0401) first asks whether any row
 *   left or entered the undelivered statuses: a claim (queued or retrying to
 *   sending) or a release (back) changes no count, and no longer aggregates
 *   its transition tables per target. A delivery's target never changes.
 */
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`ALTER TABLE deliveries DROP CONSTRAINT deliveries_seq_key`

  yield* sql`ALTER TABLE delivery_attempts DROP CONSTRAINT delivery_attempts_delivery_id_fkey`
  yield* sql`
    CREATE FUNCTION deliveries_delete_attempts() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      DELETE FROM delivery_attempts WHERE delivery_id IN (SELECT id FROM old_rows);
      RETURN NULL;
    END
    $$
  `
  yield* sql`
    CREATE TRIGGER deliveries_delete_attempts AFTER DELETE ON deliveries
    REFERENCING OLD TABLE AS old_rows
    FOR EACH STATEMENT EXECUTE FUNCTION deliveries_delete_attempts()
  `

  yield* sql`
    CREATE OR REPLACE FUNCTION deliveries_count_undelivered() RETURNS trigger LANGUAGE plpgsql AS $$
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
        -- Every row undelivered before and after (claims, releases, lease
        -- changes): no count moves.
        IF NOT EXISTS (SELECT 1 FROM new_rows WHERE status NOT IN ('queued', 'sending', 'retrying'))
           AND NOT EXISTS (SELECT 1 FROM old_rows WHERE status NOT IN ('queued', 'sending', 'retrying')) THEN
          RETURN NULL;
        END IF;
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
})
