/**
 * Caps on per-organization collections (notification endpoints, approval
 * policies, tasks, active API keys), counted safely under concurrent creates, on PGlite and
 * on a PostgreSQL server shared by several processes.
 *
 * Inside the creating transaction, the organization's row is locked first
 * (`FOR NO KEY UPDATE`), then the collection is counted: two creates of one
 * organization take turns, and the second counts what the first inserted
 * (under READ COMMITTED each statement sees what committed before it). The
 * lock does not conflict with the `KEY SHARE` locks that foreign keys take,
 * so inserts elsewhere that merely reference the organization never wait.
 */
import { Effect, Schema } from "effect"
import type { SqlClient, SqlError } from "effect/sql"
import { LimitReached } from "../api/Errors.ts"
import { BigIntText, rowsOf } from "./Rows.ts"

const CountRow = Schema.Struct({ count: BigIntText })

export type CappedTable = "notification_endpoints" | "approval_policies" | "tasks" | "api_keys"

/** Rows of a table that count against its cap: a revoked API key no longer does. */
const COUNTED: Record<CappedTable, string> = {
  notification_endpoints: "",
  approval_policies: "",
  tasks: "",
  api_keys: " AND revoked_at IS NULL"
}

/**
 * Locks the organization's row and counts its rows of `table`, up to `cap`
 * (the count stops there: its cost is bounded by the cap). Run it inside
 * the transaction that inserts.
 */
export const countForCap = (
  sql: SqlClient.SqlClient,
  orgId: string,
  table: CappedTable,
  cap: number
): Effect.Effect<number, SqlError.SqlError> =>
  Effect.gen(function*() {
    yield* sql`SELECT 1 FROM orgs WHERE id = ${orgId} FOR NO KEY UPDATE`
    const [row] = yield* rowsOf(table, CountRow).decoded(sql`
      SELECT count(*) AS count FROM (SELECT 1 FROM ${sql.literal(table)} WHERE org_id = ${orgId}${sql.literal(COUNTED[table])} LIMIT ${cap}) AS capped
    `)
    return Number(row?.count ?? 0)
  })

/**
 * Fails with the cap's problem when the organization already holds `cap`
 * counted rows of `table` (`limit` names the setting; `what` the rows).
 */
export const refuseAtCap = (
  sql: SqlClient.SqlClient,
  orgId: string,
  table: CappedTable,
  cap: { readonly value: number; readonly limit: string; readonly detail: string }
): Effect.Effect<void, LimitReached | SqlError.SqlError> =>
  Effect.flatMap(countForCap(sql, orgId, table, cap.value), (count) =>
    count >= cap.value
      ? Effect.fail(new LimitReached({ limit: cap.limit, limit_value: cap.value, detail: cap.detail }))
      : Effect.void)
