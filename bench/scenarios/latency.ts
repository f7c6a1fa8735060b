/**
 * Webhook latency under an open-loop load: governed steps that open
 * approvals (each one `approval.requested` webhook to one endpoint) and,
 * apart, approval events written straight to the outbox (server only),
 * offered at fixed rates by a generator of its own
 * (`support/open-loop.ts`: each request started at its due time whatever
 * the answers) to svc, which delivers to an HTTPS receiver of its own
 * (`support/recording-receiver.ts`, no delay: it answers 204 at once and
 * records every event id's arrivals).
 *
 * Per rate: latency from the step's (event's) due time to the webhook's
 * first receipt, p50/p95/p99/max; the step's own answer time apart; the
 * webhooks missing and received more than once. Then where the time went,
 * from svc's own timestamps in the database: the event's writing (the
 * step's transaction, `events.dispatched_at`), its fan-out into a delivery
 * (the dispatcher's statement, `deliveries.created_at`), the receipt, the
 * send as svc timed it (`delivery_outcomes.durations_ms`) and the settle
 * (`delivery_outcomes.at`).
 *
 * Knobs: `BENCH_LATENCY_RATES` (offered per second, comma-separated,
 * `max` the highest the machine offers: svc's closed-loop rate of pending
 * steps at 16 connections, measured just before), `BENCH_LATENCY_SECONDS`
 * per rate, `BENCH_LATENCY_WARMUP_SECONDS` (at 50/s first),
 * `BENCH_LATENCY_KINDS` (`steps`, `events`).
 */
import * as path from "node:path"
import { type Child, spawnChild } from "../support/child.ts"
import { formatPerOp, measureCpu, type Meter, perOp } from "../support/cpu.ts"
import { freshDatabase } from "../support/db.ts"
import { cell, match, parseRates, perMinute, summarize } from "../support/latency.ts"
import type { LoadResult } from "../support/load.ts"
import type { OpenLoopResult, Sent } from "../support/open-loop.ts"
import type { Progress } from "../support/recording-receiver.ts"
import { type Aim, atMost, type BenchContext, type ScenarioResult } from "../support/scenario.ts"
import { round } from "../support/stats.ts"
import { startSvc, type SvcCheckout } from "../support/svc.ts"
import { formatSamples, sampleTables } from "../support/table-stats.ts"
import { formatWorkPerOp, type Work, WORK_NOTE } from "../support/work.ts"

const SESSIONS = 32
const ACTION_CLASS = "bench.ask"
/** How long the receipts of a rate may take after its last due time. */
const SETTLE_MS = 60_000

type Kind = "steps" | "events"

interface Phase {
  readonly kind: Kind
  readonly rate: number
  readonly label: string
  readonly result: OpenLoopResult
  /** Events in the outbox when the phase started (history). */
  readonly history: number
  /** CPU (µs) by process from the first due time to the last receipt. */
  readonly cpu: Record<string, number>
  /** Database work by source over the same time (`work.ts`). */
  readonly work: Record<string, Work | undefined>
}

interface Stamp {
  readonly eventId: string
  readonly stepId: string | null
  readonly written: number
  readonly fanned: number | null
  readonly settled: number | null
  readonly sendMs: number | null
}

const knobs = (quick: boolean) => ({
  rates: parseRates(process.env.BENCH_LATENCY_RATES ?? "50,200,max"),
  seconds: Number(process.env.BENCH_LATENCY_SECONDS ?? (quick ? 5 : 30)),
  warmupSeconds: Number(process.env.BENCH_LATENCY_WARMUP_SECONDS ?? (quick ? 3 : 10)),
  kinds: (process.env.BENCH_LATENCY_KINDS ?? "steps,events").split(",").map((k) => k.trim()).filter((k): k is Kind =>
    k === "steps" || k === "events"
  )
})

export default async (context: BenchContext): Promise<ScenarioResult> => {
  const k = knobs(context.quick)
  const kinds = k.kinds.filter((kind) => kind === "steps" || context.database === "postgres")
  const rows: Array<Record<string, string | number>> = []
  const notes: Array<string> = [WORK_NOTE]
  const aims: Array<Aim> = []
  const receiver = await spawnChild("receiver", new URL("../support/recording-receiver.ts", import.meta.url), {
    BENCH_TLS_CERT: context.tls.cert,
    BENCH_TLS_KEY: context.tls.key,
    BENCH_DELAY_MIN_MS: "0",
    BENCH_DELAY_MAX_MS: "0"
  })
  const generator = await spawnChild("open-loop", new URL("../support/open-loop.ts", import.meta.url))
  try {
    const receiverUrl = await receiver.call<string>("url")
    for (const checkout of context.checkouts) {
      for (const kind of kinds) {
        const result = await runKind(context, checkout, kind, k, receiver, receiverUrl, generator)
        rows.push(...result.rows)
        notes.push(...result.notes)
        aims.push(...result.aims)
      }
    }
  } finally {
    await generator.stop()
    await receiver.stop()
  }
  return {
    scenario: "latency",
    database: context.database,
    rows,
    aims,
    notes: [
      `Open loop: requests started at their due time (start + i / rate) whatever the answers, ${k.seconds} s per rate after ${k.warmupSeconds} s at 50/s, one svc process on one database through all rates (history grows from rate to rate: the \`history\` column); ${SESSIONS} agent sessions in turn; one endpoint, at an HTTPS receiver of its own that answers 204 at once.`,
      "webhook ms: due time → first receipt at the receiver; answer ms: due time → the step's (event's) answer; p50 / p95 / p99 / max. late ms: how late the generator started a request past its due time at worst (above a few ms the machine did not offer the rate). missing: offered and answered 2xx, never received within 60 s of the last due time; dup: receipts beyond the first. CPU µs each: svc's process (on PGlite its database thread included) and, on the server, the run database's backends (the events' writer included), from the first due time to the last receipt, per offered step or event.",
      "where the time goes (p50 / p95 ms, from svc's own timestamps in the database): write = due → the event's writing transaction's start (the request path before the step's statement); fan-out = → the dispatcher's statement that made its delivery (the step's commit, the dispatcher's wakeup or back-off, its statement); to receipt = fan-out → receipt (the worker's wakeup and claim, the send up to the receiver); send = svc's own timing of the POST (request to answer); settle = receipt → the outcome row's statement.",
      ...(context.database === "pglite"
        ? [
          "events (written straight to the outbox) run on the server only: the embedded data folder has one owner, svc."
        ]
        : []),
      ...notes
    ]
  }
}

const runKind = async (
  context: BenchContext,
  checkout: SvcCheckout,
  kind: Kind,
  k: ReturnType<typeof knobs>,
  receiver: Child,
  receiverUrl: string,
  generator: Child
) => {
  const database = await freshDatabase(context.database, `latency_${kind}_${checkout.label}`)
  const logFile = path.join(context.logDir, `latency-${kind}-${checkout.label}-${context.database}.log`)
  const svc = await startSvc(checkout, database, {
    SVC_ALLOWED_TARGET_CIDRS: "127.0.0.0/8",
    SVC_EXTRA_CA_FILE: context.tls.caFile
  }, logFile)
  const route = `/latency-${kind}-${checkout.label}-${context.database}`
  const phases: Array<Phase> = []
  const notes: Array<string> = []
  try {
    const { orgId, key } = await svc.provision()
    await svc.api(key, "POST", "/v1/notification-endpoints", {
      url: `${receiverUrl}${route}`,
      events: ["approval.requested"]
    })
    const sessions = await Promise.all(
      Array.from(
        { length: SESSIONS },
        () => svc.api<{ id: string }>(key, "POST", "/v1/agent-sessions", {}).then((s) => s.id)
      )
    )
    let expected = 0
    let history = 0
    const settle = async () => {
      const deadline = Date.now() + SETTLE_MS
      while (Date.now() < deadline) {
        const progress = await receiver.call<Progress>("progress")
        if ((progress[route]?.distinct ?? 0) >= expected) return
        await new Promise((r) => setTimeout(r, 100))
      }
    }
    const meters: Array<Meter> = [svc.meter, ...(database.meter === undefined ? [] : [database.meter])]
    const offer = async (rate: number, seconds: number, label: string) => {
      const { result, cpu, work } = await measureCpu(meters, async () => {
        const result = kind === "steps"
          ? await generator.call<OpenLoopResult>("steps", {
            baseUrl: svc.baseUrl,
            key,
            sessions,
            rate,
            seconds,
            prefix: `${label}-${rate}`,
            actionClass: ACTION_CLASS
          })
          : await generator.call<OpenLoopResult>("events", { connectionString: database.url, orgId, rate, seconds })
        expected += result.items.filter((s) => s.status >= 200 && s.status < 300).length
        await settle()
        return result
      })
      return { result, cpu, work }
    }
    await offer(50, k.warmupSeconds, "warmup")
    history = expected
    for (const wanted of k.rates) {
      let rate: number
      if (wanted === "max") {
        const probe = kind === "steps"
          ? await closedLoopRate(svc.baseUrl, key, sessions, context.quick)
          : await eventsRate(generator, database.url!, orgId)
        rate = probe.rate
        expected += probe.sent
        await settle()
        notes.push(
          `${checkout.label} ${kind}: the highest rate the machine offers measured at ${rate}/s (${
            kind === "steps"
              ? "pending steps answered per second, closed loop of 16 connections"
              : "events written per second by the generator's 16 connections"
          }).`
        )
      } else rate = wanted
      const before = history
      // A run of two minutes or more on the server: its tables once a minute beside it.
      const tables = k.seconds >= 120 && !database.offline ? await sampleTables(database) : undefined
      const { result, cpu, work } = await offer(rate, k.seconds, `r${phases.length}`)
      if (tables !== undefined) {
        notes.push(...formatSamples(`${checkout.label} ${kind} at ${rate}/s, tables`, await tables.stop()))
      }
      phases.push({ kind, rate, label: String(wanted), result, history: before, cpu, work })
      history = expected
    }
    await generator.call("close")
    const arrivals = new Map(await receiver.call<Array<[string, Array<number>]>>("arrivals", { path: route }))
    // The database's own timestamps; the embedded data folder has one owner, so svc stops first.
    await svc.stop()
    const client = await database.connect()
    let stamps: Array<Stamp>
    try {
      stamps = (await client.query<Stamp>(`
        SELECT e.id::text AS "eventId", e.body::jsonb #>> '{approval,step_id}' AS "stepId",
               extract(epoch FROM e.dispatched_at)::float8 * 1000 AS written,
               extract(epoch FROM d.created_at)::float8 * 1000 AS fanned,
               extract(epoch FROM o.at)::float8 * 1000 AS settled,
               o.durations_ms[array_position(o.seqs, d.seq)]::float8 AS "sendMs"
        FROM events e
        LEFT JOIN deliveries d ON d.event_id = e.id AND d.kind = 'webhook'
        LEFT JOIN LATERAL (
          SELECT x.at, x.seqs, x.durations_ms FROM delivery_outcomes x
          WHERE x.target_id = d.target_id AND x.to_seq >= d.seq AND x.from_seq <= d.seq AND d.seq = ANY (x.seqs) LIMIT 1
        ) o ON true
        WHERE e.type = 'approval.requested'`)).rows.map((s) => ({
        ...s,
        written: Number(s.written),
        fanned: s.fanned === null ? null : Number(s.fanned),
        settled: s.settled === null ? null : Number(s.settled),
        sendMs: s.sendMs === null ? null : Number(s.sendMs)
      }))
    } finally {
      await client.end()
    }
    const byKey = new Map(stamps.map((s) => [kind === "steps" ? s.stepId! : s.eventId, s]))
    const rows = phases.map((phase) => row(checkout.label, phase, byKey, arrivals))
    for (const phase of phases) notes.push(breakdown(checkout.label, phase, byKey, arrivals))
    // A run of two minutes or more: the webhook's p95 minute by minute, which should not grow with the run.
    const minutes = new Map(
      phases.filter(() => k.seconds >= 120).map((phase) => {
        const split = perMinute(offeredOf(phase, byKey, phase.kind), arrivals)
        notes.push(
          `${checkout.label} ${phase.kind} at ${phase.rate}/s, webhook p50 / p95 ms minute by minute: ${
            split.map((m) => `${m.p50} / ${m.p95}`).join(" · ")
          }`
        )
        split.forEach((_, minute) => notes.push(breakdown(checkout.label, phase, byKey, arrivals, minute)))
        return [phase, split] as const
      })
    )
    const aims: Array<Aim> = kind !== "steps" ? [] : phases.flatMap((phase) => {
      const r = rows[phases.indexOf(phase)]!
      const m = Number(r.missing) + Number(r.dup)
      const base = [atMost(`${checkout.label}: webhooks missing or duplicated at ${phase.rate}/s`, m, 0, "")]
      const split = minutes.get(phase) ?? []
      if (split.length >= 3) {
        base.push(
          atMost(
            `${checkout.label}: webhook p95 of the last minute at ${phase.rate}/s / the second's`,
            split.at(-1)!.p95 / split[1]!.p95,
            1.2
          )
        )
      }
      const s = summarize(latenciesOf(phase, byKey, arrivals).latencies)
      if (phase.rate === 500 && context.database === "postgres") {
        return [...base, atMost(`${checkout.label}: webhook p95 at 500 pending steps/s`, s.p95, 50, " ms")]
      }
      if (phase.rate !== 200) return base
      return context.database === "postgres"
        ? [
          ...base,
          atMost(`${checkout.label}: webhook p95 at 200 pending steps/s`, s.p95, 50, " ms"),
          atMost(`${checkout.label}: webhook p99 at 200 pending steps/s`, s.p99, 100, " ms")
        ]
        : [
          ...base,
          atMost(`${checkout.label}: webhook p95 at 200 pending steps/s`, s.p95, 50, " ms")
        ]
    })
    return { rows, notes, aims }
  } finally {
    await generator.call("close").catch(() => {})
    await svc.stop()
    await database.drop()
  }
}

/** The offered items that answered 2xx, keyed as the receipts are (event ids: steps through their event). */
const offeredOf = (phase: Phase, byKey: ReadonlyMap<string, Stamp>, kind: Kind) =>
  phase.result.items.filter((s) => s.status >= 200 && s.status < 300).map((s: Sent) => ({
    key: kind === "steps" ? (byKey.get(s.key)?.eventId ?? `no event for ${s.key}`) : s.key,
    due: s.due,
    item: s
  }))

const latenciesOf = (
  phase: Phase,
  byKey: ReadonlyMap<string, Stamp>,
  arrivals: ReadonlyMap<string, ReadonlyArray<number>>
) => match(offeredOf(phase, byKey, phase.kind), arrivals)

const row = (
  arm: string,
  phase: Phase,
  byKey: ReadonlyMap<string, Stamp>,
  arrivals: ReadonlyMap<string, ReadonlyArray<number>>
) => {
  const items = phase.result.items
  const matched = latenciesOf(phase, byKey, arrivals)
  return {
    arm,
    kind: phase.kind,
    "offered /s": phase.rate,
    offered: items.length,
    history: phase.history,
    "late ms": round(phase.result.worstLateMs, 1),
    "answer ms p50/p95/p99/max": cell(summarize(items.map((s) => s.answered - s.due))),
    "webhook ms p50/p95/p99/max": cell(summarize(matched.latencies)),
    errors: phase.result.errors,
    missing: matched.missing,
    dup: matched.duplicates,
    "CPU µs each": formatPerOp(perOp(phase.cpu, items.length)),
    "work each": formatWorkPerOp(phase.work, items.length)
  }
}

const breakdown = (
  arm: string,
  phase: Phase,
  byKey: ReadonlyMap<string, Stamp>,
  arrivals: ReadonlyMap<string, ReadonlyArray<number>>,
  /** Only the items due in this minute of the phase (counted from its first due time). */
  minute?: number
) => {
  const parts = {
    write: [] as Array<number>,
    "fan-out": [] as Array<number>,
    "to receipt": [] as Array<number>,
    send: [] as Array<number>,
    settle: [] as Array<number>
  }
  const offered = offeredOf(phase, byKey, phase.kind)
  const start = Math.min(...offered.map((o) => o.due))
  for (const o of offered) {
    if (minute !== undefined && Math.floor((o.due - start) / 60_000) !== minute) continue
    const stamp = phase.kind === "steps" ? byKey.get(o.item.key) : byKey.get(o.key)
    const received = arrivals.get(o.key)
    if (stamp === undefined || received === undefined || stamp.fanned === null) continue
    const receipt = Math.min(...received)
    parts.write.push(stamp.written - o.due)
    parts["fan-out"].push(stamp.fanned - stamp.written)
    parts["to receipt"].push(receipt - stamp.fanned)
    if (stamp.sendMs !== null) parts.send.push(stamp.sendMs)
    if (stamp.settled !== null) parts.settle.push(stamp.settled - receipt)
  }
  const text = Object.entries(parts).map(([name, values]) => {
    const s = summarize(values)
    return `${name} ${s.p50} / ${s.p95}`
  }).join(" · ")
  return `${arm} ${phase.kind} at ${phase.rate}/s${
    minute === undefined ? "" : `, minute ${minute + 1}`
  }, where the time goes (p50 / p95 ms): ${text}`
}

/** svc's closed-loop rate of pending steps at 16 connections: the highest rate this machine offers it. */
const closedLoopRate = async (baseUrl: string, key: string, sessions: ReadonlyArray<string>, quick: boolean) => {
  const load = await spawnChild("load", new URL("../support/load.ts", import.meta.url))
  try {
    const result = await load.call<LoadResult>("run", {
      url: `${baseUrl}/v1/agent-sessions/${sessions[0]}/steps`,
      urls: sessions.map((s) => `${baseUrl}/v1/agent-sessions/${s}/steps`),
      method: "POST",
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
      bodies: [
        JSON.stringify({
          step_id: "@",
          tool: "shell",
          action_class: ACTION_CLASS,
          arguments: { command: "ls -la /srv/app", cwd: "/srv" }
        })
      ],
      unique: "@",
      count: quick ? 600 : 2_000,
      concurrency: 16,
      expectStatus: 200
    })
    return {
      rate: Math.max(10, Math.floor(result.latencies.length / result.seconds / 10) * 10),
      sent: result.latencies.length - result.errors
    }
  } finally {
    await load.stop()
  }
}

/** Events the generator writes per second at most (offered 5 000/s for 2 s; svc delivers them before the next rate). */
const eventsRate = async (generator: Child, url: string, orgId: string) => {
  const result = await generator.call<OpenLoopResult>("events", {
    connectionString: url,
    orgId,
    rate: 5_000,
    seconds: 2
  })
  const first = Math.min(...result.items.map((s) => s.due))
  const last = Math.max(...result.items.map((s) => s.answered))
  return {
    rate: Math.max(10, Math.floor(result.items.length / ((last - first) / 1000) / 10) * 10),
    sent: result.items.length - result.errors
  }
}
