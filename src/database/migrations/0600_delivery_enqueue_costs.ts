import { Effect } from "effect"
import { SqlClient } from "effect/sql"

/**
 * A cheaper enqueue: what each new delivery costs the database beyond its
 * own row.
 *
 * - `deliveries.org_id` loses its foreign key to `orgs`: its check ran once
 *   per delivery inserted (a key-share lock of the organization's row). The
 *   organization is protected otherwise. Every statement that inserts
 *   deliveries also upserts their targets' rows in `delivery_targets`
 *   (which keeps its foreign key to `orgs`): a target's first delivery
 *   checks the organization once, and an organization's deletion, which
 *   deletes its targets' rows, waits for (or is waited for by) any enqueue
 *   into them. What the constraint's ON DELETE CASCADE did, a statement
 *   trigger on `orgs` does: the deleted organizations' deliveries go in
 *   the same statement (and their attempts with them, migration 0570).
 * - The undelivered count's INSERT trigger (0401) goes: the enqueue
 *   statements add to `delivery_targets.undelivered` themselves, in a
 *   common table expression of the same statement (no trigger round, no
 *   transition table). Updates and deletes keep their triggers.
 */
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`ALTER TABLE deliveries DROP CONSTRAINT IF EXISTS deliveries_org_id_fkey`
  yield* sql`
    CREATE FUNCTION orgs_delete_deliveries() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      DELETE FROM deliveries WHERE org_id IN (SELECT id FROM old_rows);
      RETURN NULL;
    END
    $$
  `
  yield* sql`
    CREATE TRIGGER orgs_delete_deliveries AFTER DELETE ON orgs
    REFERENCING OLD TABLE AS old_rows
    FOR EACH STATEMENT EXECUTE FUNCTION orgs_delete_deliveries()
  `
  yield* sql`DROP TRIGGER deliveries_count_insert ON deliveries`
})
