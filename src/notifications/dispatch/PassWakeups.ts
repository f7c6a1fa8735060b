/**
 * The wakeups of a dispatcher's pass, made by its own statement: for each
 * kind of delivery the pass queued (`webhook`, `email`), a `pg_notify` to
 * the other processes' workers of that kind, which commits with the
 * deliveries (and is dropped with them if the pass rolls back); this
 * process's workers are woken after the statement (`wake`). On the
 * embedded database, where no other process listens, only `wake`. A pass
 * whose rows of a kind are all the log's wakes its workers for the log
 * alone (`Topics.deliveryLog`): their claim does not run the per-row
 * statement for it (`deliveries/worker/ClaimSides.ts`).
 *
 * Speeds up: the wakeup was a statement and a transaction of its own after
 * each pass that queued webhooks. Server, 200 pending steps/s for four
 * minutes, alone, one A/B run (`npm run bench -- latency`,
 * bench/notes/latency.md, "Again alone"): transactions per step with its
 * webhook 4.54 → 4.24 (svc's count; PostgreSQL's 4.57 → 4.27); CPU per
 * step unchanged within the run's noise (svc 2 643 → 2 691 µs, PostgreSQL
 * 3 308 → 3 418), webhook p95 30.5 and 30.7 ms. The log's own topic: at
 * 50 pending steps/s, four alternating arms of 90 s (bench/notes/latency.md,
 * "The log's rows alone wake the workers for the log alone"), with the
 * per-row answer standing (`deliveries/worker/ClaimSides.ts`): the per-row
 * statement 0.98 → 0.016 per step, transactions per step 5.09 → 4.10, CPU
 * per step svc 9 848 → 9 583 µs and PostgreSQL 8 321 → 7 427.
 */
import type { PgClient } from "@effect/sql-pg"
import { Effect } from "effect"
import { Topics, type Wakeups } from "../../database/Wakeups.ts"

const KINDS = ["webhook", "email"] as const

/** What a pass queued, by kind: rows in all, and rows on their own (not the log's). */
export type Queued = Readonly<Record<(typeof KINDS)[number], { readonly all: number; readonly alone: number }>>

export const passWakeups = (sql: PgClient.PgClient, wakeups: Wakeups["Service"]) => {
  // A kind's workers ask the log alone when every row queued is the log's
  // (`Topics.deliveryLog`), both statements otherwise.
  const wakes = KINDS.map((kind) => ({
    kind,
    all: wakeups.inStatement(Topics.deliveries(kind)),
    log: wakeups.inStatement(Topics.deliveryLog(kind))
  }))
  const notifying = wakes.flatMap(({ all, kind, log }) =>
    all.notify === undefined || log.notify === undefined ? [] : [
      sql`(SELECT count(pg_notify(${all.notify.channel}, CASE WHEN q.alone THEN ${all.notify.payload} ELSE ${log.notify.payload} END))
           FROM (SELECT bool_or(status <> 'logged') AS alone FROM inserted WHERE kind = ${kind} HAVING count(*) > 0) q)::int
           AS ${sql(`woke_${kind}`)}`
    ]
  )
  return {
    /** Columns for the pass's last `SELECT`, where `inserted` (its deliveries) is in scope: a leading comma, or nothing. */
    columns: notifying.length === 0 ? sql`` : sql`, ${sql.join(", ", false)(notifying)}`,
    /** Wakes this process's workers of the kinds queued; run after the statement. */
    wake: (queued: Queued) =>
      Effect.forEach(wakes, (w) => {
        const { all, alone } = queued[w.kind]
        return all === 0 ? Effect.void : alone > 0 ? w.all.local : w.log.local
      }, { discard: true })
  }
}
