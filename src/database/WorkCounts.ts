/**
 * The database work this process asked for, counted where statements leave
 * it (`ServerClient.ts` on a PostgreSQL server, `EmbeddedSession.ts` on
 * PGlite): statements executed, transactions committed, rows written.
 * Rendered at `/metrics` (`svc_db_statements_total`,
 * `svc_db_transactions_total`, `svc_db_rows_written_total`) and read by the
 * benchmark beside CPU per item.
 *
 * - Statements: every statement the database answered, transaction control
 *   (`BEGIN`, `COMMIT`, savepoints) included, as PostgreSQL counts calls.
 * - Transactions: each `COMMIT` that committed, plus each statement run
 *   outside a transaction (PostgreSQL commits it on its own), as
 *   `pg_stat_database.xact_commit` counts them.
 * - Rows written: the row count of each `INSERT`, `UPDATE`, `DELETE` and
 *   `MERGE` as the driver reports it in the command tag. Writes inside a
 *   `WITH` of a `SELECT` are not in that tag: PostgreSQL's
 *   `tup_inserted + tup_updated + tup_deleted` sees them (the benchmark
 *   prints both).
 *
 * One set per process (a process has one database; tests that open many
 * read differences). The cost is a few additions and comparisons of the
 * command tag per statement: 7-11 ns in a loop of 10 million (a loaded
 * 2-core machine), beside a statement's 30-300 µs.
 */

/** The counts so far; plain numbers, read and reset by nobody but readers taking differences. */
export interface WorkCounts {
  statements: number
  transactions: number
  rowsWritten: number
}

export const workCounts: WorkCounts = { statements: 0, transactions: 0, rowsWritten: 0 }

/** A copy of the counts now. */
export const readWorkCounts = (): WorkCounts => ({ ...workCounts })

/**
 * Whether a connection is inside `BEGIN` … `COMMIT`/`ROLLBACK`: one per
 * lease of a connection (a transaction keeps its lease to the end).
 */
export interface TransactionState {
  inTransaction: boolean
}

/**
 * Counts one statement the database answered with `command` (the command
 * tag's first word; `undefined` when the driver gives none) and `rowCount`.
 */
export const countStatement = (
  state: TransactionState,
  command: string | undefined,
  rowCount: number | undefined
): void => {
  workCounts.statements++
  if (command === undefined) {
    if (!state.inTransaction) workCounts.transactions++
    return
  }
  switch (command.charCodeAt(0)) {
    case 66: // B
      if (command === "BEGIN") {
        state.inTransaction = true
        return
      }
      break
    case 67: // C
      if (command === "COMMIT") {
        state.inTransaction = false
        workCounts.transactions++
        return
      }
      break
    case 82: // R
      if (command === "ROLLBACK") {
        // Also the answer to the COMMIT of an aborted transaction: nothing committed.
        state.inTransaction = false
        return
      }
      if (command === "RELEASE") return
      break
    case 83: // S
      if (command === "SAVEPOINT") return
      break
    case 73: // I
    case 85: // U
    case 68: // D
    case 77: // M
      if (command === "INSERT" || command === "UPDATE" || command === "DELETE" || command === "MERGE") {
        workCounts.rowsWritten += rowCount ?? 0
      }
      break
  }
  if (!state.inTransaction) workCounts.transactions++
}
