/**
 * What telemetry export costs requests: `GET /v1/tasks` on svc (its own
 * process) from the load generator (another) at some concurrency, with the
 * calling organization's export off and on (a destination pointing at the
 * OTLP sink, a third process), in alternating blocks (off, on, on, off, ...)
 * after the same warm-up on both sides. p99 and p99.9 over all requests of
 * an arm, with their spread over the blocks (the repeated runs).
 */
import * as path from "node:path"
import { spawnChild } from "../support/child.ts"
import { formatPerOp, measureCpu, meterOf, perOp } from "../support/cpu.ts"
import { freshDatabase } from "../support/db.ts"
import type { LoadResult, LoadSpec } from "../support/load.ts"
import { atMost, type BenchContext, type ScenarioResult, sizes } from "../support/scenario.ts"
import { percentile, round, sorted, spread } from "../support/stats.ts"
import { startSvc } from "../support/svc.ts"
import { formatWorkPerOp, sumWork, type Work, WORK_NOTE } from "../support/work.ts"

type Arm = "off" | "on"

export default async (context: BenchContext): Promise<ScenarioResult> => {
  const size = sizes(context.quick).latency
  const sink = await spawnChild("otlp-sink", new URL("../support/otlp-sink.ts", import.meta.url), {
    BENCH_TLS_CERT: context.tls.cert,
    BENCH_TLS_KEY: context.tls.key
  })
  const load = await spawnChild("load", new URL("../support/load.ts", import.meta.url))
  const rows: Array<Record<string, string | number>> = []
  const aims = []
  try {
    const sinkUrl = await sink.call<string>("url")
    for (const checkout of context.checkouts) {
      const database = await freshDatabase(context.database, `telemetry_${checkout.label}`)
      const svc = await startSvc(checkout, database, {
        SVC_ALLOWED_TARGET_CIDRS: "127.0.0.0/8",
        SVC_EXTRA_CA_FILE: context.tls.caFile
      }, path.join(context.logDir, `telemetry-latency-${checkout.label}-${context.database}.log`))
      try {
        await sink.call("reset")
        const { key } = await svc.provision()
        for (let i = 0; i < 3; i++) {
          await svc.api(key, "POST", "/v1/tasks", { name: `task-${i}`, answer_schema: { type: "object" } })
        }
        let destination: string | undefined
        const exportTo = async (on: boolean) => {
          if (on && destination === undefined) {
            destination = (await svc.api<{ id: string }>(key, "POST", "/v1/telemetry-destinations", {
              url: sinkUrl,
              compression: "gzip"
            })).id
          }
          if (!on && destination !== undefined) {
            await svc.api(key, "DELETE", `/v1/telemetry-destinations/${destination}`)
            destination = undefined
          }
        }
        const spec = (count: number): LoadSpec => ({
          url: `${svc.baseUrl}/v1/tasks`,
          method: "GET",
          headers: { authorization: `Bearer ${key}` },
          count,
          concurrency: size.concurrency,
          expectStatus: 200
        })
        for (const on of [false, true]) {
          await exportTo(on)
          await load.call("run", spec(size.warmup))
        }
        const blocks: Record<
          Arm,
          Array<
            {
              latencies: ReadonlyArray<number>
              errors: number
              cpu: Record<string, number>
              work: Record<string, Work | undefined>
            }
          >
        > = {
          off: [],
          on: []
        }
        const order: Array<Arm> = Array.from(
          { length: size.blocks * 2 },
          (_, i) => (["off", "on", "on", "off"] as const)[i % 4]!
        )
        const meters = [
          svc.meter,
          meterOf("load", load.pid),
          meterOf("sink", sink.pid),
          ...(database.meter ? [database.meter] : [])
        ]
        for (const arm of order) {
          await exportTo(arm === "on")
          const { result, cpu, work } = await measureCpu(
            meters,
            () => load.call<LoadResult>("run", spec(size.perBlock))
          )
          blocks[arm].push({ latencies: result.latencies, errors: result.errors, cpu, work })
        }
        await exportTo(false)
        const exported = await sink.call<{ spans: number }>("stats")
        const p = (arm: Arm, q: number) => percentile(sorted(blocks[arm].flatMap((b) => b.latencies)), q)
        for (const arm of ["off", "on"] as const) {
          const cpu: Record<string, number> = {}
          for (const b of blocks[arm]) {
            for (const [name, micros] of Object.entries(b.cpu)) cpu[name] = (cpu[name] ?? 0) + micros
          }
          const requests = blocks[arm].reduce((sum, b) => sum + b.latencies.length, 0)
          rows.push({
            arm: `${checkout.label}, export ${arm}`,
            requests,
            "p50 ms": round(p(arm, 0.5), 2),
            "p99 ms": round(p(arm, 0.99), 2),
            "p99 spread": spread(blocks[arm].map((b) => percentile(sorted(b.latencies), 0.99))),
            "p99.9 ms": round(p(arm, 0.999), 2),
            "p99.9 spread": spread(blocks[arm].map((b) => percentile(sorted(b.latencies), 0.999))),
            "CPU µs/req": formatPerOp(perOp(cpu, requests)),
            "work/req": formatWorkPerOp(sumWork(blocks[arm].map((b) => b.work)), requests),
            errors: blocks[arm].reduce((sum, b) => sum + b.errors, 0)
          })
        }
        aims.push(atMost(`${checkout.label}: p99 export on / off`, p("on", 0.99) / p("off", 0.99), 1.05))
        rows.push({ arm: `${checkout.label}: spans the sink received`, requests: exported.spans })
      } finally {
        await svc.stop()
        await database.drop()
      }
    }
  } finally {
    await load.stop()
    await sink.stop()
  }
  return {
    scenario: "telemetry-latency",
    database: context.database,
    rows,
    aims,
    notes: [
      `${size.blocks} blocks of ${size.perBlock} requests per arm at concurrency ${size.concurrency}, in off/on/on/off order, after ${size.warmup} warm-up requests with export off and as many with it on; spreads are min–max of the per-block figures.`,
      "CPU µs/req includes, with export on, svc's export work and the sink's decoding.",
      WORK_NOTE
    ]
  }
}
