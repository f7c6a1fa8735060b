/**
 * The database's work per delivery of a drain, fresh and after history
 * (server only: the counts are PostgreSQL's statistics views).
 *
 * One database and one svc process, one endpoint at the receiver
 * (answering 204 at once). After a warm-up drain, the same backlog of
 * approval events (committed to the outbox in one transaction with svc's
 * wakeup) is drained twice: `fresh`, then `history`, after
 * `BENCH_DRAIN_HISTORY` events delivered as a trickle (one event per
 * transaction, `BENCH_DRAIN_TRICKLE` per second), the shape steady governed
 * steps leave behind: an outcome row, a new version of the endpoint's
 * queue row and of the dispatch cursor per event. `BENCH_DRAIN_BULK`
 * events (e.g. 1 000 000) are delivered before the trickle, in bursts of
 * 50 000: a long history, as svc itself leaves it. The tables are sampled
 * once a minute from the fresh drain's end to the history drain's start
 * (`support/table-stats.ts`): where the server's autovacuum is off, each
 * sample runs `VACUUM (ANALYZE)` first, so that the history drain meets
 * the statistics a server with autovacuum would have.
 *
 * Reported per delivery, from `pg_stat_database` deltas over the drain
 * (read after the statistics' flush): transactions, rows inserted,
 * updated, deleted and fetched, buffers hit and read; from
 * `pg_stat_user_tables` over the queue's tables: sequential scans and the
 * rows they read, index scans, and dead row versions after; of
 * `delivery_targets` (one row per endpoint, written at every enqueue,
 * lease and settle) its HOT updates of all updates, dead versions, heap
 * and index sizes, over each drain and over the trickle (a row of its
 * own). Counts, not timings: they hold on a loaded machine. Beside them
 * the drain's rate and the CPU of svc and of the database's backends per
 * delivery (the producer's INSERT of the burst included), which the
 * machine's load moves. Aims: every count after history at most 1.2x the
 * fresh drain's; the drain after history at 0.9x the fresh one's rate or
 * more, and at most 1/0.9 of its CPU per delivery.
 *
 * `BENCH_KEEP_DATABASE=1` leaves the database in place after the run (its
 * URL is in the notes), to EXPLAIN its statements.
 */
import * as path from "node:path"
import { measureCpu } from "../support/cpu.ts"
import type { BenchClient } from "../support/db.ts"
import { freshDatabase, withClient } from "../support/db.ts"
import type { Receipts } from "../support/receiver.ts"
import { atLeast, atMost, type BenchContext, type ScenarioResult } from "../support/scenario.ts"
import { round } from "../support/stats.ts"
import { startSvc } from "../support/svc.ts"
import { formatSamples, sampleTables } from "../support/table-stats.ts"
import { insertEvents, withReceiver } from "../support/webhooks.ts"
import { QUEUE_TABLES } from "./held-horizon.ts"

/** The bursts a long history is delivered in. */
const BULK_BURST = 50_000

const knobs = (quick: boolean) => ({
  backlog: Number(process.env.BENCH_DRAIN_BACKLOG ?? (quick ? 2_000 : 10_000)),
  history: Number(process.env.BENCH_DRAIN_HISTORY ?? (quick ? 2_000 : 5_000)),
  trickle: Number(process.env.BENCH_DRAIN_TRICKLE ?? 200),
  bulk: Number(process.env.BENCH_DRAIN_BULK ?? 0),
  warmup: quick ? 300 : 1_000
})

/** The counters read before and after a drain. */
const COUNTERS = [
  "xact_commit",
  "tup_inserted",
  "tup_updated",
  "tup_deleted",
  "tup_fetched",
  "tup_returned",
  "blks_hit",
  "blks_read",
  "seq_scan",
  "seq_tup_read",
  "idx_scan",
  "n_tup_upd",
  "n_tup_hot_upd"
] as const
type Counts = Record<(typeof COUNTERS)[number], number> & {
  readonly dead: number
  readonly byTable: string
  /** `delivery_targets`: updates, HOT updates, dead versions, heap and index bytes. */
  readonly targets: { upd: number; hot: number; dead: number; heap: number; indexes: number }
}

const counts = async (client: BenchClient): Promise<Counts> => {
  // The backends flush their statistics at most once a second.
  await new Promise((r) => setTimeout(r, 2_000))
  await client.query("SELECT pg_stat_clear_snapshot()")
  const { rows: [db] } = await client.query(
    `SELECT xact_commit, tup_inserted, tup_updated, tup_deleted, tup_fetched, tup_returned, blks_hit, blks_read
     FROM pg_stat_database WHERE datname = current_database()`
  )
  const { rows: [tables] } = await client.query(
    `SELECT coalesce(sum(seq_scan), 0) AS seq_scan, coalesce(sum(seq_tup_read), 0) AS seq_tup_read,
            coalesce(sum(idx_scan), 0) AS idx_scan, coalesce(sum(n_tup_upd), 0) AS n_tup_upd,
            coalesce(sum(n_tup_hot_upd), 0) AS n_tup_hot_upd, coalesce(sum(n_dead_tup), 0) AS dead,
            string_agg(relname || ' ' || seq_scan || '/' || n_dead_tup, ', ' ORDER BY relname) AS by_table
     FROM pg_stat_user_tables WHERE relname = ANY ($1::text[])`,
    [[...QUEUE_TABLES]]
  )
  const { rows: [targets] } = await client.query<Record<string, string>>(
    `SELECT n_tup_upd AS upd, n_tup_hot_upd AS hot, n_dead_tup AS dead,
            pg_relation_size(relid) AS heap, pg_indexes_size(relid) AS indexes
     FROM pg_stat_user_tables WHERE relname = 'delivery_targets'`
  )
  const out: Record<string, unknown> = {
    dead: Number(tables.dead),
    byTable: String(tables.by_table),
    targets: Object.fromEntries(Object.entries(targets!).map(([k, v]) => [k, Number(v)]))
  }
  for (const name of COUNTERS) {
    out[name] = Number((db as Record<string, unknown>)[name] ?? (tables as Record<string, unknown>)[name])
  }
  return out as Counts
}

/** `delivery_targets` over a phase: its HOT share of updates, and its size and dead versions after. */
const targetsOver = (before: Counts, after: Counts) => {
  const upd = after.targets.upd - before.targets.upd
  const hot = after.targets.hot - before.targets.hot
  return {
    "targets HOT / updates": `${hot} / ${upd} (${upd === 0 ? "-" : Math.round((100 * hot) / upd)}%)`,
    "targets dead · heap · indexes after": `${after.targets.dead} · ${Math.round(after.targets.heap / 1024)} KB · ${
      Math.round(after.targets.indexes / 1024)
    } KB`
  }
}

/**
 * `BENCH_DRAIN_EXPLAIN=1`: the server's `auto_explain` logs every statement
 * of the run's database with its plan and buffers (to the server's log; the
 * drains' instants are in the notes). The figures then include its cost.
 */
const explainEverything = async (database: { readonly url?: string }) => {
  const name = new URL(database.url!).pathname.slice(1)
  await withClient(database.url, async (admin) => {
    for (
      const [setting, value] of [
        ["session_preload_libraries", "auto_explain"],
        ["auto_explain.log_min_duration", "0"],
        ["auto_explain.log_analyze", "on"],
        ["auto_explain.log_buffers", "on"],
        ["auto_explain.log_timing", "off"],
        ["auto_explain.log_format", "json"]
      ]
    ) await admin.query(`ALTER DATABASE ${name} SET ${setting} = '${value}'`)
  })
}

export default async (context: BenchContext): Promise<ScenarioResult> => {
  if (context.database !== "postgres") {
    return {
      scenario: "drain-history",
      database: context.database,
      rows: [],
      aims: [],
      notes: ["Server only: set BENCH_DATABASE_URL."]
    }
  }
  const k = knobs(context.quick)
  return withReceiver(context, async (receiver, receiverUrl) => {
    const rows: Array<Record<string, string | number>> = []
    const aims = []
    const notes: Array<string> = []
    for (const checkout of context.checkouts) {
      const database = await freshDatabase("postgres", `drain_history_${checkout.label}`)
      if (process.env.BENCH_DRAIN_EXPLAIN === "1") await explainEverything(database)
      const svc = await startSvc(checkout, database, {
        SVC_ALLOWED_TARGET_CIDRS: "127.0.0.0/8",
        SVC_EXTRA_CA_FILE: context.tls.caFile,
        SVC_WEBHOOK_QUEUE_CAPACITY: "1000000"
      }, path.join(context.logDir, `drain-history-${checkout.label}.log`))
      const client = await database.connect()
      const route = `/drain-history-${checkout.label}`
      let stopSampling: (() => Promise<unknown>) | undefined
      try {
        const { orgId, key } = await svc.provision()
        await svc.api(key, "POST", "/v1/notification-endpoints", {
          url: `${receiverUrl}${route}`,
          events: ["approval.requested"]
        })
        const event = () => ({ orgId, type: "approval.requested" })
        const burst = async (count: number) => {
          await receiver.call("reset", { path: route })
          await client.query("BEGIN")
          await insertEvents(client, count, event)
          await client.query("SELECT pg_notify('svc_wakeup', 'events')")
          await client.query("COMMIT")
          await receiver.call<Receipts>("wait", { path: route, count, timeoutMs: 1_200_000 })
        }
        const trickle = async (count: number) => {
          await receiver.call("reset", { path: route })
          const started = performance.now()
          for (let i = 0; i < count; i++) {
            const due = started + (i * 1000) / k.trickle
            const wait = due - performance.now()
            if (wait > 0) await new Promise((r) => setTimeout(r, wait))
            await client.query("BEGIN")
            await insertEvents(client, 1, event)
            await client.query("SELECT pg_notify('svc_wakeup', 'events')")
            await client.query("COMMIT")
          }
          await receiver.call<Receipts>("wait", { path: route, count, timeoutMs: 1_200_000 })
        }
        // CPU of svc's process and of the database's backends (the producer's INSERT of the burst included).
        const meters = [{ name: "svc", pids: () => [svc.pid] }, { name: "postgres", pids: database.meter!.pids }]
        const measured = async (arm: string) => {
          const before = await counts(client)
          const from = new Date().toISOString()
          const t0 = performance.now()
          const { cpu } = await measureCpu(meters, () => burst(k.backlog))
          const seconds = (performance.now() - t0) / 1000
          notes.push(`${checkout.label} ${arm}: drained from ${from} to ${new Date().toISOString()}.`)
          const after = await counts(client)
          const per = (name: (typeof COUNTERS)[number]) => (after[name] - before[name]) / k.backlog
          notes.push(
            `${checkout.label} ${arm}: the queue's tables, sequential scans / dead rows after: ${after.byTable}.`
          )
          return { per, dead: after.dead, cpu, seconds, targets: targetsOver(before, after) }
        }
        await burst(k.warmup)
        const fresh = await measured("fresh")
        const sampler = await sampleTables(database)
        stopSampling = sampler.stop
        if (k.bulk > 0) {
          const t0 = performance.now()
          for (let done = 0; done < k.bulk; done += BULK_BURST) await burst(Math.min(BULK_BURST, k.bulk - done))
          notes.push(
            `${checkout.label}: ${k.bulk} events of history delivered in bursts of ${BULK_BURST}, ${
              Math.round((performance.now() - t0) / 1000)
            } s.`
          )
        }
        const beforeTrickle = await counts(client)
        await trickle(k.history)
        const afterTrickle = await counts(client)
        stopSampling = undefined
        notes.push(...formatSamples(`${checkout.label}: tables over the history`, await sampler.stop()))
        const history = await measured("history")
        rows.push({
          arm: `${checkout.label} trickle`,
          "history events": k.warmup + k.backlog + k.bulk,
          "xact / delivery": round((afterTrickle.xact_commit - beforeTrickle.xact_commit) / k.history, 3),
          ...targetsOver(beforeTrickle, afterTrickle)
        })
        for (const [arm, r] of [["fresh", fresh], ["history", history]] as const) {
          rows.push({
            arm: `${checkout.label} ${arm}`,
            "history events": k.warmup + (arm === "history" ? k.backlog + k.bulk + k.history : 0),
            "xact / delivery": round(r.per("xact_commit"), 3),
            "ins · upd · del": `${round(r.per("tup_inserted"), 2)} · ${round(r.per("tup_updated"), 2)} · ${
              round(r.per("tup_deleted"), 2)
            }`,
            "rows fetched": round(r.per("tup_fetched"), 1),
            "rows returned": round(r.per("tup_returned"), 1),
            "buffers hit": round(r.per("blks_hit"), 1),
            "queue seq scans · rows read": `${round(r.per("seq_scan"), 3)} · ${round(r.per("seq_tup_read"), 1)}`,
            "queue HOT / updates": `${round(r.per("n_tup_hot_upd"), 2)} / ${round(r.per("n_tup_upd"), 2)}`,
            "queue dead rows after": r.dead,
            ...r.targets,
            "deliveries/s": Math.round(k.backlog / r.seconds),
            "CPU µs/delivery: svc · postgres": `${Math.round(r.cpu.svc! / k.backlog)} · ${
              Math.round(r.cpu.postgres! / k.backlog)
            }`
          })
        }
        for (const name of ["blks_hit", "tup_fetched", "tup_returned"] as const) {
          aims.push(
            atMost(
              `${checkout.label}: ${name} per delivery after ${k.history} trickled events / fresh`,
              history.per(name) / fresh.per(name),
              1.2
            )
          )
        }
        const history_ = `${k.bulk > 0 ? `${k.bulk} + ` : ""}${k.history}`
        aims.push(
          atLeast(
            `${checkout.label}: deliveries/s after ${history_} events of history / fresh`,
            fresh.seconds / history.seconds,
            0.9
          ),
          atMost(
            `${checkout.label}: CPU per delivery (svc + postgres) after ${history_} events of history / fresh`,
            (history.cpu.svc! + history.cpu.postgres!) / (fresh.cpu.svc! + fresh.cpu.postgres!),
            1 / 0.9
          )
        )
        if (process.env.BENCH_KEEP_DATABASE === "1") notes.push(`${checkout.label}: database kept: ${database.url}`)
      } finally {
        await stopSampling?.()
        await client.end()
        await svc.stop()
        if (process.env.BENCH_KEEP_DATABASE !== "1") await database.drop()
      }
    }
    return {
      scenario: "drain-history",
      database: context.database,
      rows,
      aims,
      notes: [
        `A backlog of ${k.backlog} approval events committed in one transaction, each delivered once to one endpoint, after a warm-up drain of ${k.warmup}: fresh, then again after ${
          k.bulk > 0 ? `${k.bulk} events delivered in bursts and ` : ""
        }${k.history} events trickled at ${k.trickle}/s (one per transaction), on the same database and svc process.`,
        "The trickle row: delivery_targets over the trickled events, its transactions per event.",
        "Per delivery: pg_stat_database deltas over the drain (the whole database: svc's background work included), and over the queue's tables (events, event_dispatch, deliveries, delivery_targets, delivery_outcomes, delivery_attempts) their sequential scans, the rows those read, and HOT updates of all updates.",
        ...notes
      ]
    }
  })
}
