/**
 * Webhook fan-out of a burst: N approval events committed to svc's outbox
 * at once (one transaction, then one governed step through the API to wake
 * the dispatcher, as svc's own writes do), delivered by svc's engine
 * (dispatcher, delivery queue, signed sender, outbound check) to an HTTPS
 * receiver on loopback. Baselines, same receiver, same signed POST, same
 * concurrency (16, svc's per-endpoint limit):
 *
 * - the bare sender (`baselines/bare-sender.ts`): an undici pool, nothing
 *   recorded;
 * - graphile-worker (`baselines/graphile.ts`, server only): N jobs added in
 *   one statement, a runner whose task makes the POST.
 *
 * Each arm first delivers a warm-up burst the same way. Reported: the
 * average rate (N over first commit → last receipt), the steady-state rate
 * (receipts between the 20th and the 80th percentile), the time to the first
 * receipt, and the CPU per delivery of each process.
 */
import * as path from "node:path"
import { type Child, spawnChild } from "../support/child.ts"
import { formatPerOp, measureCpu, meterOf, perOp, type Meter } from "../support/cpu.ts"
import { type BenchClient, type BenchDatabase, freshDatabase } from "../support/db.ts"
import { approvalEvent } from "../support/events.ts"
import type { Receipts } from "../support/receiver.ts"
import { atLeast, atMost, type BenchContext, type ScenarioResult, SEND_CONCURRENCY, sizes } from "../support/scenario.ts"
import { round } from "../support/stats.ts"
import { startSvc, type SvcProcess } from "../support/svc.ts"

const now = () => performance.timeOrigin + performance.now()
const TIMEOUT_MS = 600_000

interface ArmResult {
  readonly arm: string
  readonly deliveries: number
  readonly t0: number
  readonly receipts: Receipts
  readonly cpu: Record<string, number>
}

const rates = (r: ArmResult) => ({
  average: r.receipts.count / ((r.receipts.last - r.t0) / 1000),
  steady: (0.6 * r.receipts.count) / ((r.receipts.p80 - r.receipts.p20) / 1000),
  firstQuarter: (0.25 * r.receipts.count) / ((r.receipts.p25 - r.receipts.first) / 1000),
  lastQuarter: (0.25 * r.receipts.count) / ((r.receipts.last - r.receipts.p75) / 1000),
  firstMs: r.receipts.first - r.t0
})

/** Commits `count` events of `orgId` in one transaction through `client`. */
const insertEvents = async (client: BenchClient, orgId: string, count: number) => {
  await client.query("BEGIN")
  for (let i = 0; i < count; i += 2_000) {
    const events = Array.from({ length: Math.min(2_000, count - i) }, () => approvalEvent(orgId))
    await client.query(
      `INSERT INTO events (id, org_id, type, occurred_at, body)
       SELECT id, $2, 'approval.requested', now(), body FROM unnest($1::uuid[], $3::text[]) AS e (id, body)`,
      [events.map((e) => e.id), orgId, events.map((e) => e.body)]
    )
  }
  await client.query("COMMIT")
}

/** Commits the events through a client of its own (closed afterwards). */
const commitEvents = async (database: BenchDatabase, orgId: string, count: number) => {
  const client = await database.connect()
  try {
    await insertEvents(client, orgId, count)
  } finally {
    await client.end()
  }
}

const svcArm = async (context: BenchContext, checkout: BenchContext["checkouts"][number], receiver: Child, receiverUrl: string) => {
  const size = sizes(context.quick).burst
  const database = await freshDatabase(context.database, `hooks_${checkout.label}`)
  const start = () =>
    startSvc(checkout, database, {
      SVC_ALLOWED_TARGET_CIDRS: "127.0.0.0/8",
      SVC_EXTRA_CA_FILE: context.tls.caFile,
      SVC_WEBHOOK_QUEUE_CAPACITY: "1000000"
    }, path.join(context.logDir, `webhooks-${checkout.label}-${context.database}.log`))
  let svc: SvcProcess | undefined
  try {
    svc = await start()
    const { orgId, key } = await svc.provision()
    const route = `/svc-${checkout.label}-${context.database}`
    await svc.api(key, "POST", "/v1/notification-endpoints", { url: `${receiverUrl}${route}`, events: ["approval.requested"] })
    const session = await svc.api<{ id: string }>(key, "POST", "/v1/agent-sessions", {})
    let step = 0
    // A governed step without a policy opens an approval: one more event, and svc's own wakeup of its dispatcher.
    const trigger = () =>
      svc!.api(key, "POST", `/v1/agent-sessions/${session.id}/steps`, { step_id: `burst-${step++}`, tool: "bench", action_class: "bench.burst", arguments: {} })
    const burst = async (count: number, metered: boolean) => {
      await receiver.call("reset", { path: route })
      if (database.offline) {
        // Embedded: the data folder has one owner, so the burst is committed
        // while svc is stopped; svc's dispatcher finds it when it starts
        // again. The clock and the CPU window start once svc answers
        // /ready (its start-up is not the deliveries' cost); the deliveries
        // already received by then are left out of the per-delivery figure.
        await svc!.stop()
        await commitEvents(database, orgId, count)
        svc = await start()
      } else {
        await commitEvents(database, orgId, count)
      }
      const meters = metered ? [svc!.meter, meterOf("receiver", receiver.pid), ...(database.meter ? [database.meter] : [])] : []
      const before = database.offline ? (await receiver.call<Receipts>("wait", { path: route, count: 0, timeoutMs: 0 })).count : 0
      const measured = await measureCpu(meters, async () => {
        const t0 = now()
        await trigger()
        return { t0, receipts: await receiver.call<Receipts>("wait", { path: route, count: count + 1, timeoutMs: TIMEOUT_MS }) }
      })
      return { ...measured, before }
    }
    await burst(size.warmup, false)
    const { result, cpu, before } = await burst(size.events, true)
    return { arm: checkout.label, deliveries: size.events + 1 - before, t0: result.t0, receipts: result.receipts, cpu } satisfies ArmResult
  } finally {
    await svc?.stop()
    await database.drop()
  }
}

const bareArm = async (context: BenchContext, receiver: Child, receiverUrl: string): Promise<ArmResult> => {
  const size = sizes(context.quick).burst
  const sender = await spawnChild("bare-sender", new URL("../baselines/bare-sender.ts", import.meta.url))
  try {
    await sender.call("start", { origin: receiverUrl, ca: context.tls.caCert, connections: SEND_CONCURRENCY })
    const route = `/bare-${context.database}`
    const orgId = "01900000-0000-7000-8000-000000000001"
    const burst = async (count: number, meters: ReadonlyArray<Meter>) => {
      await receiver.call("reset", { path: route })
      await sender.call("prepare", { orgId, count })
      return measureCpu(meters, async () => {
        const { started } = await sender.call<{ started: number }>("burst", { path: route, secret: "whsec_bench" })
        return { t0: started, receipts: await receiver.call<Receipts>("wait", { path: route, count, timeoutMs: TIMEOUT_MS }) }
      })
    }
    await burst(size.warmup, [])
    const { result, cpu } = await burst(size.events, [meterOf("bare sender", sender.pid), meterOf("receiver", receiver.pid)])
    await sender.call("close")
    return { arm: "bare undici sender", deliveries: size.events, ...result, cpu }
  } finally {
    await sender.stop()
  }
}

const graphileArm = async (context: BenchContext, receiver: Child, receiverUrl: string): Promise<ArmResult> => {
  const size = sizes(context.quick).burst
  const database = await freshDatabase("postgres", "graphile")
  const route = "/graphile"
  const worker = await spawnChild("graphile", new URL("../baselines/graphile.ts", import.meta.url))
  const client = await database.connect()
  try {
    await worker.call("start", { connectionString: database.url, origin: receiverUrl, ca: context.tls.caCert, concurrency: SEND_CONCURRENCY, path: route, secret: "whsec_bench" })
    const orgId = "01900000-0000-7000-8000-000000000001"
    const burst = async (count: number, meters: ReadonlyArray<Meter>) => {
      await receiver.call("reset", { path: route })
      const specs = Array.from({ length: count }, () => ({ identifier: "send", payload: approvalEvent(orgId) }))
      // Committed before the clock starts, like svc's events: the producer's write is not the delivery's cost.
      await client.query(
        "SELECT count(*) FROM graphile_worker.add_jobs(array(SELECT json_populate_recordset(null::graphile_worker.job_spec, $1::json)), false)",
        [JSON.stringify(specs)]
      )
      return measureCpu(meters, async () => {
        const t0 = now()
        return { t0, receipts: await receiver.call<Receipts>("wait", { path: route, count, timeoutMs: TIMEOUT_MS }) }
      })
    }
    await burst(size.warmup, [])
    const { result, cpu } = await burst(size.events, [meterOf("graphile-worker", worker.pid), meterOf("receiver", receiver.pid), database.meter!])
    await worker.call("close")
    return { arm: "graphile-worker", deliveries: size.events, ...result, cpu }
  } finally {
    await client.end()
    await worker.stop()
    await database.drop()
  }
}

export default async (context: BenchContext): Promise<ScenarioResult> => {
  const size = sizes(context.quick).burst
  const receiver = await spawnChild("receiver", new URL("../support/receiver.ts", import.meta.url), {
    BENCH_TLS_CERT: context.tls.cert,
    BENCH_TLS_KEY: context.tls.key
  })
  try {
    const receiverUrl = await receiver.call<string>("url")
    const arms: Array<ArmResult> = []
    for (const checkout of context.checkouts) arms.push(await svcArm(context, checkout, receiver, receiverUrl))
    const bare = await bareArm(context, receiver, receiverUrl)
    arms.push(bare)
    const graphile = context.database === "postgres" ? await graphileArm(context, receiver, receiverUrl) : undefined
    if (graphile) arms.push(graphile)

    const rows = arms.map((r) => {
      const { average, steady, firstMs, firstQuarter, lastQuarter } = rates(r)
      return {
        arm: r.arm,
        delivered: `${r.receipts.count}/${r.deliveries}`,
        "steady /s": round(steady),
        "average /s": round(average),
        "first ¼ /s": round(firstQuarter),
        "last ¼ /s": round(lastQuarter),
        "first receipt ms": round(firstMs, 1),
        "CPU µs/delivery": formatPerOp(perOp(r.cpu, r.deliveries))
      }
    })
    const aims = context.checkouts.flatMap((c) => {
      const svc = arms.find((a) => a.arm === c.label)!
      const s = rates(svc)
      const b = rates(bare)
      const svcCpu = (svc.cpu[c.label] ?? 0) / svc.deliveries
      const bareCpu = (bare.cpu["bare sender"] ?? 0) / bare.deliveries
      return [
        atLeast(`${c.label}: steady state / bare sender`, s.steady / b.steady, 0.7),
        ...(graphile ? [atLeast(`${c.label}: steady state / graphile-worker`, s.steady / rates(graphile).steady, 1.5)] : []),
        atMost(`${c.label}: first receipt of the burst`, s.firstMs, 100, " ms"),
        atMost(`${c.label}: CPU per delivery / bare sender's`, svcCpu / bareCpu, 2)
      ]
    })
    return {
      scenario: "webhooks",
      database: context.database,
      rows,
      aims,
      notes: [
        `Burst of ${size.events} events (svc: +1, the governed step that wakes the dispatcher) after a warm-up burst of ${size.warmup}; ${SEND_CONCURRENCY} concurrent sends; the receiver (its own process) answers 204 at once.`,
        "Clocks and CPU windows start when the events (svc) or jobs (graphile-worker, one add_jobs statement) are committed, so the producer's write is not counted; svc's wake-up step follows at once; the bare sender's clock starts when it starts sending.",
        "steady = receipts between the 20th and 80th percentile over their time span; average = all receipts over first commit → last receipt; first/last ¼ = the first and last quarter of the receipts over their span (a rate that grows as the backlog shrinks shows a per-delivery cost that depends on the backlog).",
        ...(context.database === "pglite"
          ? [
            "Embedded: each burst is committed while svc is stopped (the data folder has one owner), then svc starts; the clock and CPU window start at /ready, and deliveries received before that are left out of the per-delivery CPU.",
            "graphile-worker needs a PostgreSQL server: set BENCH_DATABASE_URL for that baseline."
          ]
          : [])
      ]
    }
  } finally {
    await receiver.stop()
  }
}
