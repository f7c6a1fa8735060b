/**
 * A take whose answer was lost. The log's take (`Log.ts`) moves a target's
 * mark past the rows it hands out and may start a lease, in the statement
 * that answers them. When that answer never comes (the connection dropped
 * after the database committed, or while the statement still ran there)
 * the database may hold marks past rows this process never got, and leases
 * it does not know it holds. Left so, the next take would start at the
 * database's mark, and the rows handed out by the lost answer would never
 * be sent: the cursor passes them once the rows after them settle.
 *
 * So a failed take puts the owner id it ran under in doubt and the process
 * takes a new one (`HeldLeases.ts`): whatever the lost statement did, now or
 * when it commits later, belongs to an owner nobody uses, and such a lease
 * runs out and is taken over from the cursor like a stopped process's.
 * Before the next take one statement spares the common case that wait, for
 * every target leased under an owner id in doubt:
 *
 * - a lease known here goes to the new owner id, its mark wound back to
 *   the known one and its in-flight count lowered by the rows past that
 *   mark that were handed out (logged and held by no outcome row: nobody
 *   got them, so nobody settled them); the next take hands them out;
 * - a lease not known here is ended (nothing went out under it), and the
 *   next lease starts at the target's cursor.
 *
 * What is in flight under a known lease keeps its lease id and settles as
 * before. Until the statement succeeds nothing is taken (the claim fails
 * and is tried again); a retry after a lost answer of its own finds the
 * known leases moved already and changes nothing more.
 */
import type { PgClient } from "@effect/sql-pg"
import { Effect } from "effect"
import type { LogLeases } from "./HeldLeases.ts"
import { heldByOutcome } from "./OutcomeHeld.ts"

/** When owner ids are in doubt, tells the database what is known here; nothing otherwise. */
export const reconcile = (sql: PgClient.PgClient, leases: LogLeases) =>
  Effect.suspend(() => {
    const doubtful = [...leases.doubtful()]
    if (doubtful.length === 0) return Effect.void
    return sql`
      WITH known AS (
        SELECT * FROM jsonb_to_recordset(${
      JSON.stringify(leases.known())
    }::jsonb) AS k(id uuid, lease_id uuid, mark bigint)
      ),
      locked AS (
        SELECT t.id, t.lease_id, t.leased_to FROM delivery_targets t
        WHERE t.lease_owner IN ${sql.in([...doubtful])}
        ORDER BY t.id
        FOR UPDATE
      ),
      doubted AS (
        SELECT l.id, k.mark,
          CASE WHEN k.id IS NULL OR l.leased_to <= k.mark THEN 0 ELSE (
            SELECT count(*)::int FROM deliveries d
            WHERE (d.target_id, d.seq) > (l.id, k.mark) AND (d.target_id, d.seq) <= (l.id, l.leased_to)
              AND d.status = 'logged'
              AND NOT ${heldByOutcome(sql, "d")}
          ) END AS lost
        FROM locked l LEFT JOIN known k ON k.id = l.id AND k.lease_id = l.lease_id
      )
      UPDATE delivery_targets t
      SET lease_owner = CASE WHEN g.mark IS NULL THEN NULL ELSE ${leases.owner()}::uuid END,
          lease_id = CASE WHEN g.mark IS NULL THEN NULL ELSE t.lease_id END,
          log_in_flight = CASE WHEN g.mark IS NULL THEN 0 ELSE greatest(0, t.log_in_flight - g.lost) END,
          leased_to = CASE WHEN g.mark IS NULL THEN t.leased_to ELSE least(t.leased_to, g.mark) END
      FROM doubted g
      WHERE t.id = g.id
      RETURNING t.id, g.mark IS NULL AS ended
    `.pipe(
      Effect.andThen(Effect.sync(() => leases.resolved(doubtful))),
      Effect.orDie
    )
  })
