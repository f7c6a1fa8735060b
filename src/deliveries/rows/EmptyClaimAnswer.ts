/**
 * The per-row claim's answer when it takes nothing: one row of nulls
 * beside `next_due`, when the next delivery of its kind becomes claimable
 * (what `DeliveryQueue.nextDue` answers), asked in the claim's own
 * statement only when it claimed nothing. The worker's wait after an
 * empty claim reads it instead of asking on its own.
 *
 * Speeds up: after each settle the worker claims again, and under a
 * trickle that claim finds nothing; it then asked for the next due
 * instant in a statement (and a transaction) of its own, and the idle
 * worker did at every poll. Server, 200 pending steps a second for 120 s,
 * alone, one A/B run (`npm run bench -- latency`, `pg_stat_statements`,
 * `bench/notes/latency.md`, "Three statements fewer per step"): that
 * statement 0.71 → 0.11 per step, transactions per step 5.59 → 5.00; CPU
 * per step, svc and PostgreSQL together, 3 705 → 3 594 µs.
 */
import { Effect, Option } from "effect"
import type { SqlClient, Statement } from "effect/sql"
import * as Rows from "../Rows.ts"

/** The claim statement's last `SELECT`, over its CTE `claimed`; `nextDue` is the instant's expression. */
export const claimedOrNextDue = (sql: SqlClient.SqlClient, nextDue: Statement.Fragment) =>
  sql`SELECT c.*, n.next_due FROM (
            SELECT CASE WHEN EXISTS (SELECT 1 FROM claimed) THEN NULL ELSE ${nextDue} END AS next_due
          ) n LEFT JOIN claimed c ON true`

/**
 * The claim statement's rows, split: the deliveries it claimed (rows still
 * to decode), and when it claimed none, the next due instant.
 */
export const readAnswer = (answer: ReadonlyArray<Record<string, unknown>>) => {
  const none = answer.length === 1 && answer[0]!.id === null
  if (!none) return Effect.succeed({ rows: answer, nextDue: undefined })
  return Effect.map(
    Rows.nextDue(Effect.succeed([{ at: answer[0]!.next_due }])),
    ([row]) => ({ rows: [], nextDue: Option.fromNullishOr(row?.at ?? null) })
  )
}
