/**
 * The wakeups of a dispatcher's pass, made by its own statement: for each
 * kind of delivery the pass queued (`webhook`, `email`), a `pg_notify` to
 * the other processes' workers of that kind, which commits with the
 * deliveries (and is dropped with them if the pass rolls back); this
 * process's workers are woken after the statement (`wake`). On the
 * embedded database, where no other process listens, only `wake`.
 *
 * Speeds up: the wakeup was a statement and a transaction of its own after
 * each pass that queued webhooks. Server, 200 pending steps/s for four
 * minutes, alone, one A/B run (`npm run bench -- latency`,
 * bench/notes/latency.md, "Again alone"): transactions per step with its
 * webhook 4.54 → 4.24 (svc's count; PostgreSQL's 4.57 → 4.27); CPU per
 * step unchanged within the run's noise (svc 2 643 → 2 691 µs, PostgreSQL
 * 3 308 → 3 418), webhook p95 30.5 and 30.7 ms.
 */
import type { PgClient } from "@effect/sql-pg"
import { Effect } from "effect"
import { Topics, type Wakeups } from "../../database/Wakeups.ts"

const KINDS = ["webhook", "email"] as const

/** What a pass queued, by kind. */
export type Queued = Readonly<Record<(typeof KINDS)[number], number>>

export const passWakeups = (sql: PgClient.PgClient, wakeups: Wakeups["Service"]) => {
  const wakes = KINDS.map((kind) => ({ kind, ...wakeups.inStatement(Topics.deliveries(kind)) }))
  const notifying = wakes.flatMap(({ kind, notify }) =>
    notify === undefined ? [] : [
      sql`(SELECT count(pg_notify(${notify.channel}, ${notify.payload}))
           FROM (SELECT 1 FROM inserted WHERE kind = ${kind} LIMIT 1) queued)::int AS ${sql(`woke_${kind}`)}`
    ]
  )
  return {
    /** Columns for the pass's last `SELECT`, where `inserted` (its deliveries) is in scope: a leading comma, or nothing. */
    columns: notifying.length === 0 ? sql`` : sql`, ${sql.join(", ", false)(notifying)}`,
    /** Wakes this process's workers of the kinds queued; run after the statement. */
    wake: (queued: Queued) =>
      Effect.forEach(wakes, (w) => queued[w.kind] > 0 ? w.local : Effect.void, { discard: true })
  }
}
