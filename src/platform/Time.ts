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

const RFC_3339 =
  /^([0-9]{4})-([0-9]{2})-([0-9]{2})T([0-9]{2}):([0-9]{2}):([0-9]{2})(\.[0-9]+)?(?:Z|([+-])([0-9]{2}):([0-9]{2}))$/u

const twoDigits = (n: number) => String(n).padStart(2, "0")

/**
 * An RFC 3339 instant (the API's `Instant`) as PostgreSQL reads every one
 * of them: in UTC, a year before 1 as `BC`. PostgreSQL itself refuses
 * offsets past 15:59 and the year 0000, which RFC 3339 allows; the
 * fraction is kept whole (PostgreSQL rounds it to the microsecond).
 */
export const inUtc = (instant: string): string => {
  const parts = RFC_3339.exec(instant)
  if (parts === null) return instant
  const [, year, month, day, hour, minute, second, fraction, sign, offsetHours, offsetMinutes] = parts
  const offset = sign === undefined ? 0 : (sign === "-" ? -1 : 1) * (Number(offsetHours) * 60 + Number(offsetMinutes))
  const at = new Date(0)
  at.setUTCFullYear(Number(year), Number(month) - 1, Number(day))
  at.setUTCHours(Number(hour), Number(minute) - offset, Number(second), 0)
  const utcYear = at.getUTCFullYear()
  const shownYear = String(utcYear > 0 ? utcYear : 1 - utcYear).padStart(4, "0")
  return `${shownYear}-${twoDigits(at.getUTCMonth() + 1)}-${twoDigits(at.getUTCDate())} ${
    twoDigits(at.getUTCHours())
  }:${twoDigits(at.getUTCMinutes())}:${twoDigits(at.getUTCSeconds())}${fraction ?? ""}+00${utcYear > 0 ? "" : " BC"}`
}
