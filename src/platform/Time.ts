import { Effect, Schema } from "effect"
import type { SqlClient } from "effect/sql"
import { Instant, rowsOf } from "./Rows.ts"

/** Database timestamps come back as `Date`; the API speaks RFC 3339 strings. */
export const iso = (value: Date | string): string => (value instanceof Date ? value : new Date(value)).toISOString()

export const isoOrNull = (value: Date | string | null): string | null => value === null ? null : iso(value)

const NowRows = rowsOf("now()", Schema.Struct({ now: Instant }))

/**
 * The database's clock (epoch ms): `now()`, the start of the current
 * transaction. Every instant the database compares (deadlines, expiries,
 * retention) is written and compared in the database's time, never the
 * process's: processes whose clocks disagree, with the database or with
 * each other, then act on it at the same moment.
 */
export const databaseNow = (sql: SqlClient.SqlClient) =>
  NowRows.decoded(sql`SELECT now() AS now`).pipe(Effect.map(([row]) => row!.now.getTime()))
