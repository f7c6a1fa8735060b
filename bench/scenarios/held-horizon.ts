/**
 * The queue's drain while PostgreSQL's horizon is held, and after history
 * (server only: the embedded database has one connection, svc's, so no
 * other transaction can hold its horizon).
 *
 * Three drains of the same backlog of approval events, each on a fresh
 * database and svc after the same warm-up drain, delivered to one endpoint
 * at the receiver (answering 204 at once), at full speed as the `webhooks`
 * burst is (the backlog committed to the outbox in one transaction with
 * svc's wakeup `NOTIFY`; the clock starts at the commit):
 *
 * - `fresh`: nothing else open;
 * - `held`: another connection holds `BEGIN ISOLATION LEVEL REPEATABLE
 *   READ; SELECT 1` from before the backlog's commit until the last
 *   receipt (every event of the backlog is newer than its snapshot);
 * - `history`: after `BENCH_HORIZON_HISTORY` events delivered first (in
 *   transactions of 500), nothing else open.
 *
 * Reported: the rates (steady: receipts between the 20th and 80th
 * percentile; average: all of them from the commit), the ratios held /
 * fresh and history / fresh, and the dead row versions
 * (`pg_stat_user_tables.n_dead_tup`) of the queue's tables and of all
 * tables before the backlog's commit and after its last receipt (read
 * after the statistics' 1 s flush; autovacuum runs as it does on a
 * deployment, and cannot remove what the held snapshot still sees).
 */
import * as path from "node:path"
import pg from "pg"
import type { Child } from "../support/child.ts"
import { freshDatabase } from "../support/db.ts"
import type { Receipts } from "../support/receiver.ts"
import { atLeast, type BenchContext, type ScenarioResult } from "../support/scenario.ts"
import { round } from "../support/stats.ts"
import { startSvc, type SvcCheckout } from "../support/svc.ts"
import { insertEvents, now, rates, withReceiver } from "../support/webhooks.ts"

/** The tables the queue writes: the outbox, the dispatch cursor, deliveries, their targets (leases, cursors, counts) and outcomes. */
export const QUEUE_TABLES = [
  "events",
  "event_dispatch",
  "deliveries",
  "delivery_targets",
  "delivery_outcomes",
  "delivery_attempts"
] as const

type Arm = "fresh" | "held" | "history"

const knobs = (quick: boolean) => ({
  backlog: Number(process.env.BENCH_HORIZON_BACKLOG ?? (quick ? 2_000 : 20_000)),
  history: Number(process.env.BENCH_HORIZON_HISTORY ?? (quick ? 4_000 : 20_000)),
  warmup: quick ? 300 : 1_000
})

interface Dead {
  readonly queue: number
  readonly all: number
  /** The queue's tables with dead rows, e.g. `delivery_targets 40`. */
  readonly byTable: string
}

const deadTuples = async (url: string): Promise<Dead> => {
  // The backends flush their statistics at most once a second.
  await new Promise((r) => setTimeout(r, 1_500))
  const client = new pg.Client({ connectionString: url })
  await client.connect()
  try {
    const { rows } = await client.query<{ queue: string; all: string; by_table: string | null }>(
      `SELECT coalesce(sum(n_dead_tup) FILTER (WHERE relname = ANY ($1::text[])), 0)::text AS queue, coalesce(sum(n_dead_tup), 0)::text AS all,
              string_agg(relname || ' ' || n_dead_tup, ', ' ORDER BY n_dead_tup DESC) FILTER (WHERE relname = ANY ($1::text[]) AND n_dead_tup > 0) AS by_table
       FROM pg_stat_user_tables`,
      [[...QUEUE_TABLES]]
    )
    return { queue: Number(rows[0]!.queue), all: Number(rows[0]!.all), byTable: rows[0]!.by_table ?? "none" }
  } finally {
    await client.end()
  }
}

export default async (context: BenchContext): Promise<ScenarioResult> => {
  if (context.database !== "postgres") {
    return {
      scenario: "held-horizon",
      database: context.database,
      rows: [],
      aims: [],
      notes: [
        "Server only: the embedded database has one connection (svc's), so no other transaction can hold its horizon; set BENCH_DATABASE_URL."
      ]
    }
  }
  const k = knobs(context.quick)
  return withReceiver(context, async (receiver, receiverUrl) => {
    const rows: Array<Record<string, string | number>> = []
    const notes: Array<string> = []
    const aims = []
    for (const checkout of context.checkouts) {
      const results = new Map<Arm, Awaited<ReturnType<typeof drain>>>()
      for (const arm of ["fresh", "held", "history"] as const) {
        results.set(arm, await drain(context, checkout, arm, k, receiver, receiverUrl))
      }
      const fresh = rates(results.get("fresh")!.arm).steady
      for (const [arm, r] of results) {
        const rate = rates(r.arm)
        rows.push({
          arm: `${checkout.label} ${arm}`,
          delivered: `${r.arm.receipts.count}/${k.backlog}`,
          "history events": arm === "history" ? k.history + k.warmup : k.warmup,
          "steady /s": round(rate.steady),
          "average /s": round(rate.average),
          "first receipt ms": round(rate.firstMs, 1),
          "/ fresh": round(rate.steady / fresh, 2),
          "dead queue rows before → after": `${r.before.queue} → ${r.after.queue}`,
          "dead rows, all tables": `${r.before.all} → ${r.after.all}`
        })
      }
      for (const [arm, r] of results) {
        notes.push(`${checkout.label} ${arm}: dead rows of the queue's tables after the drain: ${r.after.byTable}.`)
      }
      aims.push(
        atLeast(
          `${checkout.label}: steady rate with a REPEATABLE READ transaction held / without`,
          rates(results.get("held")!.arm).steady / fresh,
          0.8
        ),
        atLeast(
          `${checkout.label}: steady rate after ${k.history} events of history / fresh`,
          rates(results.get("history")!.arm).steady / fresh,
          0.8
        )
      )
    }
    return {
      scenario: "held-horizon",
      database: context.database,
      rows,
      aims,
      notes: [
        `A backlog of ${k.backlog} approval events committed in one transaction (with svc's wakeup), each delivered once to one endpoint, after a warm-up drain of ${k.warmup}; each arm on a fresh database and svc process. held: a REPEATABLE READ transaction (\`SELECT 1\`) opened on another connection before the backlog's commit and ended after its last receipt. history: ${k.history} events delivered first, in transactions of 500.`,
        "steady = receipts between the 20th and 80th percentile over their span; average = all receipts over commit → last receipt. Dead rows: pg_stat_user_tables.n_dead_tup summed over the queue's tables (events, event_dispatch, deliveries, delivery_targets, delivery_outcomes, delivery_attempts) and over all tables, before the commit and after the last receipt (held: while the transaction is still open).",
        ...notes
      ]
    }
  })
}

const drain = async (
  context: BenchContext,
  checkout: SvcCheckout,
  arm: Arm,
  k: ReturnType<typeof knobs>,
  receiver: Child,
  receiverUrl: string
) => {
  const database = await freshDatabase("postgres", `horizon_${arm}_${checkout.label}`)
  const url = database.url!
  const svc = await startSvc(checkout, database, {
    SVC_ALLOWED_TARGET_CIDRS: "127.0.0.0/8",
    SVC_EXTRA_CA_FILE: context.tls.caFile,
    SVC_WEBHOOK_QUEUE_CAPACITY: "1000000"
  }, path.join(context.logDir, `held-horizon-${arm}-${checkout.label}.log`))
  const route = `/horizon-${arm}-${checkout.label}`
  const client = await database.connect()
  const holder = new pg.Client({ connectionString: url })
  try {
    const { orgId, key } = await svc.provision()
    await svc.api(key, "POST", "/v1/notification-endpoints", {
      url: `${receiverUrl}${route}`,
      events: ["approval.requested"]
    })
    const event = () => ({ orgId, type: "approval.requested" })
    const commitEvents = async (count: number) => {
      await client.query("BEGIN")
      await insertEvents(client, count, event)
      await client.query("SELECT pg_notify('svc_wakeup', 'events')")
      await client.query("COMMIT")
    }
    const deliver = async (count: number, chunk: number) => {
      await receiver.call("reset", { path: route })
      for (let done = 0; done < count; done += chunk) await commitEvents(Math.min(chunk, count - done))
      await receiver.call<Receipts>("wait", { path: route, count, timeoutMs: 600_000 })
    }
    await deliver(k.warmup, k.warmup)
    if (arm === "history") await deliver(k.history, 500)
    const before = await deadTuples(url)
    if (arm === "held") {
      await holder.connect()
      await holder.query("BEGIN ISOLATION LEVEL REPEATABLE READ")
      await holder.query("SELECT 1")
    }
    await receiver.call("reset", { path: route })
    await client.query("BEGIN")
    await insertEvents(client, k.backlog, event)
    await client.query("SELECT pg_notify('svc_wakeup', 'events')")
    await client.query("COMMIT")
    const t0 = now()
    const receipts = await receiver.call<Receipts>("wait", { path: route, count: k.backlog, timeoutMs: 1_200_000 })
    const after = await deadTuples(url)
    if (arm === "held") await holder.query("ROLLBACK")
    return { arm: { arm, deliveries: k.backlog, t0, receipts, cpu: {} }, before, after }
  } finally {
    await holder.end().catch(() => {})
    await client.end()
    await svc.stop()
    await database.drop()
  }
}
