/**
 * Whether an outcome row holds a logged row: the test the claim, the
 * reconciliation of doubtful leases and the failing of a target's rows
 * make per row.
 *
 * The outcome rows are walked on the primary key `(target_id, to_seq)`
 * between the row values (target, the row's seq) and (target, `MAX_SEQ`),
 * not by `target_id = x AND to_seq >= y`, and the walk is asked for its
 * first match in the key's order: the form of the record views since
 * migration 0676, whose SQL cannot import this.
 *
 * Speeds up: the claim's check of each row it hands out. With
 * statistics (autovacuum's, or the embedded database's own `ANALYZE`),
 * the planner reads `target_id = x` of an endpoint holding most outcome
 * rows as most of the table and `to_seq >= y` as a third of it, expects
 * dozens of matches, and checks each row by a sequential scan of
 * `delivery_outcomes` that it thinks stops early; a row that no outcome
 * holds (every row a claim hands out) reads them all. At 200 pending
 * steps a second the webhook's p50 then grew from 9.4 to 48 ms over
 * eight minutes, the claim active in 44 % of samples of the server's
 * sessions. Walking the key between row values: 100 rows checked against
 * 15 786 outcome rows, 90 ms by the sequential scans, 7.8 ms by the
 * index. Four minutes at 200/s with statistics
 * (bench/notes/latency.md): webhook p95 by minute 17.2, 16.1, 18.2, 15.8
 * ms against 18, 23.4, 31.2, 46.8; PostgreSQL's CPU per step 2 672 µs
 * against 3 539.
 *
 * The walk is asked for its first match in the key's order (`ORDER BY`,
 * `LIMIT 1`), not as an `EXISTS`: with a longer history (16 944 outcome
 * rows of one endpoint, analysed) the planner estimated 30 matches for
 * the `EXISTS`, and again chose a sequential scan it expected to stop
 * early. A drain after 260 000 events of history then ran at 186
 * deliveries a second, each claim of 64 rows 166 ms; the same 64 rows
 * checked this way, 0.3 ms. Before and after in one run, a drain of 10 000
 * after 155 000 events of history: 223 deliveries/s and 4 305 µs of
 * PostgreSQL's CPU each, against 2 989/s and 134 µs (bench/notes/latency.md,
 * "Again alone").
 */
import type { PgClient } from "@effect/sql-pg"

/** Above every seq: the upper end of a walk over one target's rows (`deliveries_target_seq_idx`, the outcome rows' key). */
export const MAX_SEQ = "9223372036854775807"

/**
 * Whether an outcome row holds the logged row `alias` (a table alias with
 * `target_id` and `seq`): a boolean in parentheses. Not an `EXISTS`, whose
 * `ORDER BY` and `LIMIT` the planner drops: the first match of a walk in
 * the key's order, which only the key's index gives without a sort.
 */
export const heldByOutcome = (sql: PgClient.PgClient, alias: string) => {
  const row = sql.literal(alias)
  return sql`((
    SELECT true FROM delivery_outcomes x
    WHERE (x.target_id, x.to_seq) >= (${row}.target_id, ${row}.seq)
      AND (x.target_id, x.to_seq) <= (${row}.target_id, ${sql.literal(MAX_SEQ)}::bigint)
      AND x.from_seq <= ${row}.seq AND ${row}.seq = ANY (x.seqs)
    ORDER BY x.target_id, x.to_seq LIMIT 1) IS NOT NULL)`
}
