/**
 * Which failures mean the database is not there for the moment (a
 * connection refused or dropped, a server shutting down or starting up, a
 * statement that did not answer in time), as opposed to an answer that
 * says something is wrong with the statement or the data. Requests answer
 * the first with `503` and `Retry-After` (`src/server/Availability.ts`);
 * the delivery worker gives a send that met one back unsent, not counted
 * against its endpoint (`src/deliveries/worker/Start.ts`).
 *
 * Database failures are defects in the services (STYLE: infrastructure
 * failures are not domain errors), so this reads a whole `Cause`.
 */
import * as Arr from "effect/Array"
import * as Cause from "effect/Cause"
import * as Option from "effect/Option"
import * as SqlError from "effect/sql/SqlError"

// PostgreSQL SQLSTATE classes and codes that mean the server is not there
// for the moment (https://www.postgresql.org/docs/current/errcodes-appendix.html):
// 08 connection exception, 53 insufficient resources (too many connections),
// 57P01-57P05 shutdown, crash, starting up, idle session timeout.
const UNAVAILABLE_STATE = /^(08|53|57P0[1-5])/

/** The SQLSTATE of the driver's error behind `error`, if it has one. */
export const sqlState = (error: SqlError.SqlError): string | undefined => {
  const code = (error.reason.cause as { code?: unknown } | null | undefined)?.code
  return typeof code === "string" ? code : undefined
}

/** Why a `SqlError` means the database is unavailable for now, or `undefined` when it means something else. */
const unavailableBecause = (error: SqlError.SqlError): string | undefined => {
  const code = sqlState(error)
  switch (error.reason._tag) {
    case "ConnectionError":
      return `the database cannot be reached${code === undefined ? "" : ` (${code})`}`
    case "StatementTimeoutError":
      return "the database did not answer in time"
    case "UnknownError":
      return code !== undefined && UNAVAILABLE_STATE.test(code) ? `the database is not available (${code})` : undefined
    default:
      return undefined
  }
}

/** Why `cause` means the database is unavailable for now, if it does. */
export const databaseUnavailable = (cause: Cause.Cause<unknown>): Option.Option<string> =>
  Arr.findFirst(cause.reasons, (reason) => {
    const value = Cause.isDieReason(reason) ? reason.defect : Cause.isFailReason(reason) ? reason.error : undefined
    return Option.fromUndefinedOr(SqlError.isSqlError(value) ? unavailableBecause(value) : undefined)
  })
