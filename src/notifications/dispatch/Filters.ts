/**
 * Endpoint filters by action class: an entry is an action class, matched
 * exactly, or a prefix ending in `.*` (`payments.*` matches
 * `payments.refund` and `payments.card.capture`, not `payments` itself).
 * The rule in SQL, for the dispatcher's fan-out.
 */
import type { PgClient } from "@effect/sql-pg"
import type { Statement } from "effect/sql"

/** True when the class (a text expression) matches an entry of `filter` (a jsonb array expression); false for a NULL class. */
export const actionClassMatches = (sql: PgClient.PgClient, filter: Statement.Fragment, actionClass: Statement.Fragment) =>
  sql`coalesce((SELECT bool_or(CASE WHEN right(f.entry, 2) = '.*' THEN starts_with(c.cls, left(f.entry, -1)) ELSE f.entry = c.cls END)
    FROM (SELECT ${actionClass} AS cls) c, jsonb_array_elements_text(${filter}) AS f(entry)), false)`
