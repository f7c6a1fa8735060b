/**
 * The database work per item, beside CPU per item: transactions, statements
 * and rows written. From svc's side, its `/metrics` counters
 * (`svc_db_statements_total`, `svc_db_transactions_total`,
 * `svc_db_rows_written_total`: what its database client ran, on either
 * database); from PostgreSQL's side, the `pg_stat_database` row of the run's
 * database (`xact_commit`, `tup_inserted + tup_updated + tup_deleted`: every
 * client of the database, the load's own setup included when it writes).
 *
 * Counts, unlike CPU, do not move with the machine's load.
 */
import type pg from "pg"

export interface Work {
  readonly transactions: number
  /** Undefined where the source does not count statements (PostgreSQL's statistics). */
  readonly statements?: number | undefined
  readonly rowsWritten: number
}

/**
 * A source of counts. `settleMs`: how long to wait before reading, so that
 * work just done is in the counts (PostgreSQL's backends publish their
 * statistics at most once a second).
 */
export interface WorkSource {
  readonly read: () => Promise<Work | undefined>
  readonly settleMs?: number
}

const sample = (text: string, name: string): number | undefined => {
  const match = new RegExp(`^${name}(?:\\{\\})? ([0-9.e+]+)$`, "m").exec(text)
  return match === null ? undefined : Number(match[1])
}

/** svc's counters at its metrics listener (`SVC_METRICS_PORT`); undefined for a checkout that has none. */
export const svcWork = (metricsUrl: string): WorkSource => ({
  read: async () => {
    const text = await fetch(metricsUrl).then((r) => r.ok ? r.text() : "", () => "")
    const statements = sample(text, "svc_db_statements_total")
    const transactions = sample(text, "svc_db_transactions_total")
    const rowsWritten = sample(text, "svc_db_rows_written_total")
    if (statements === undefined || transactions === undefined || rowsWritten === undefined) return undefined
    return { statements, transactions, rowsWritten }
  }
})

/**
 * How long PostgreSQL's statistics take to hold work just done: a busy
 * backend publishes its counts at most once a second, and what it did in
 * its last second once it has been idle for 10 s (PostgreSQL 15's
 * `PGSTAT_IDLE_INTERVAL`). `BENCH_PG_WORK=0` leaves PostgreSQL's side out
 * (and its waits).
 */
const PG_STATS_SETTLE_MS = 10_500

/** PostgreSQL's statistics of database `name`, read through a client `withAdmin` lends (on another database). */
export const postgresWork = (
  name: string,
  withAdmin: <A>(f: (client: pg.Client) => Promise<A>) => Promise<A>
): WorkSource | undefined =>
  process.env.BENCH_PG_WORK === "0" ? undefined : {
    settleMs: PG_STATS_SETTLE_MS,
    read: () =>
      withAdmin(async (admin) => {
        const { rows } = await admin.query<{ xact: string; written: string }>(
          "SELECT xact_commit AS xact, tup_inserted + tup_updated + tup_deleted AS written FROM pg_stat_database WHERE datname = $1",
          [name]
        )
        const row = rows[0]
        return row === undefined ? undefined : { transactions: Number(row.xact), rowsWritten: Number(row.written) }
      })
  }

export const workDelta = (before: Work | undefined, after: Work | undefined): Work | undefined =>
  before === undefined || after === undefined ? undefined : {
    transactions: after.transactions - before.transactions,
    statements: before.statements === undefined || after.statements === undefined
      ? undefined
      : after.statements - before.statements,
    rowsWritten: after.rowsWritten - before.rowsWritten
  }

const perItem = (n: number, items: number) => {
  const value = n / Math.max(1, items)
  return value >= 10 ? String(Math.round(value)) : value.toFixed(2).replace(/\.?0+$/, "")
}

/**
 * Work per item of each source, e.g. `svc 2 tx 6 st 3 rows · postgres 2.1 tx 3 rows`;
 * `-` where a checkout counts nothing.
 */
export const formatWorkPerOp = (work: Readonly<Record<string, Work | undefined>>, items: number) =>
  Object.entries(work).map(([name, w]) =>
    w === undefined
      ? `${name} -`
      : `${name} ${perItem(w.transactions, items)} tx${
        w.statements === undefined ? "" : ` ${perItem(w.statements, items)} st`
      } ${perItem(w.rowsWritten, items)} rows`
  ).join(" · ")

/** The work of several measurements added up, by source (undefined if any measurement lacks it). */
export const sumWork = (
  measured: ReadonlyArray<Readonly<Record<string, Work | undefined>>>
): Record<string, Work | undefined> => {
  const total: Record<string, Work | undefined> = {}
  for (const work of measured) {
    for (const [name, w] of Object.entries(work)) {
      const sum = name in total ? total[name] : { transactions: 0, statements: 0, rowsWritten: 0 }
      total[name] = sum === undefined || w === undefined ? undefined : {
        transactions: sum.transactions + w.transactions,
        statements: sum.statements === undefined || w.statements === undefined
          ? undefined
          : sum.statements + w.statements,
        rowsWritten: sum.rowsWritten + w.rowsWritten
      }
    }
  }
  return total
}

/** The note every scenario that prints work per item carries. */
export const WORK_NOTE =
  "work/item: svc = its database client's counts from its /metrics (tx = transactions committed, a statement outside a transaction being one; st = statements, BEGIN and COMMIT included; rows = rows its INSERT/UPDATE/DELETE tags report), postgres = pg_stat_database of the run's database (xact_commit; tup_inserted+updated+deleted), every client of it; read 10.5 s after the measured work (when PostgreSQL has published it; BENCH_PG_WORK=0 leaves it out), so what ran in those seconds is in it; svc's read right before and after the work; - = not counted (a checkout without the counters, or PGlite's side)."
