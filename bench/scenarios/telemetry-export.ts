/**
 * Span export throughput and memory, svc against the OpenTelemetry JS SDK:
 * each run is a fresh child process (`baselines/span-export.ts`) creating
 * the same spans, exported to the OTLP sink (its own process). Spans/s =
 * spans / (first span created → last span received by the sink); peak
 * memory = the child's peak RSS and heap above their level before the first
 * span, after the same warm-up (a tenth as many spans, exported). Runs
 * alternate SDK and svc; the best run of each is reported (the
 * one least disturbed by the rest of the machine).
 */
import { spawnChild } from "../support/child.ts"
import { atLeast, atMost, type BenchContext, type ScenarioResult, sizes } from "../support/scenario.ts"
import { round } from "../support/stats.ts"
import { formatWorkPerOp, type Work, WORK_NOTE, workDelta } from "../support/work.ts"

interface Run {
  readonly arm: string
  readonly spansPerSecond: number
  readonly received: number
  readonly creatingMs: number
  readonly cpuMicrosPerSpan: number
  readonly work: Work | undefined
  readonly memory: { peakRssDeltaMb: number; peakHeapDeltaMb: number; peakRssMb: number }
}

export default async (context: BenchContext): Promise<ScenarioResult> => {
  const size = sizes(context.quick).spans
  const sink = await spawnChild("otlp-sink", new URL("../support/otlp-sink.ts", import.meta.url), {
    BENCH_TLS_CERT: context.tls.cert,
    BENCH_TLS_KEY: context.tls.key
  })
  const runs: Array<Run> = []
  try {
    const sinkUrl = await sink.call<string>("url")
    const arms = [
      { arm: "OpenTelemetry JS SDK", role: "sdk", dir: "" },
      ...context.checkouts.map((c) => ({ arm: c.label, role: "svc", dir: c.dir }))
    ]
    for (let r = 0; r < size.runs; r++) {
      for (const { arm, role, dir } of arms) {
        await sink.call("reset")
        const child = await spawnChild(`span-export ${arm}`, new URL("../baselines/span-export.ts", import.meta.url), {
          BENCH_SPAN_ROLE: role,
          BENCH_SVC_SRC: dir,
          BENCH_SPANS: String(size.spans),
          BENCH_SINK_URL: sinkUrl,
          BENCH_CA_FILE: context.tls.caFile,
          BENCH_CA_PEM: context.tls.caCert,
          BENCH_DATABASE_URL: context.database === "postgres" ? process.env.BENCH_DATABASE_URL! : ""
        })
        try {
          // The same warm-up for both: a tenth of the spans, received, before the measured ones.
          const warmup = Math.round(size.spans / 10 / 2) * 2
          await child.call("go", { spans: warmup, measure: false })
          await sink.call("wait", { count: warmup, timeoutMs: 60_000 })
          await sink.call("reset")
          const work0 = await child.call<Work | undefined>("work")
          const cpu0 = child.cpu()
          const { started, generated } = await child.call<{ started: number; generated: number }>("go", {
            spans: size.spans,
            measure: true
          })
          const { spans, lastAt } = await sink.call<{ spans: number; lastAt: number }>("wait", {
            count: size.spans,
            timeoutMs: 120_000
          })
          const cpu = child.cpu() - cpu0
          const work = workDelta(work0, await child.call<Work | undefined>("work"))
          const memory = await child.call<Run["memory"]>("memory")
          runs.push({
            arm,
            spansPerSecond: spans / ((lastAt - started) / 1000),
            received: spans,
            creatingMs: generated - started,
            cpuMicrosPerSpan: cpu / Math.max(1, spans),
            work,
            memory
          })
          await child.call("close")
        } finally {
          await child.stop()
        }
      }
    }
  } finally {
    await sink.stop()
  }
  const best = (arm: string) =>
    runs.filter((r) => r.arm === arm).reduce((a, b) => (b.spansPerSecond > a.spansPerSecond ? b : a))
  const arms = ["OpenTelemetry JS SDK", ...context.checkouts.map((c) => c.label)]
  const sdk = best("OpenTelemetry JS SDK")
  const rows = arms.map((arm) => {
    const r = best(arm)
    return {
      arm,
      "spans/s": round(r.spansPerSecond),
      "spans/s per run": runs.filter((x) => x.arm === arm).map((x) => round(x.spansPerSecond)).join(", "),
      received: `${r.received}/${size.spans}`,
      "creating ms": round(r.creatingMs),
      "CPU µs/span": round(r.cpuMicrosPerSpan, 1),
      "work/span": r.arm === sdk.arm ? "" : formatWorkPerOp({ [r.arm]: r.work }, r.received),
      "peak RSS Δ MB": round(r.memory.peakRssDeltaMb, 1),
      "peak heap Δ MB": round(r.memory.peakHeapDeltaMb, 1),
      "peak RSS MB": round(r.memory.peakRssMb)
    }
  })
  const aims = context.checkouts.flatMap((c) => [
    atLeast(`${c.label}: spans/s / SDK`, best(c.label).spansPerSecond / sdk.spansPerSecond, 1),
    atMost(
      `${c.label}: peak RSS Δ / SDK`,
      best(c.label).memory.peakRssDeltaMb / Math.max(0.1, sdk.memory.peakRssDeltaMb),
      1
    )
  ])
  return {
    scenario: "telemetry-export",
    database: context.database,
    rows,
    aims,
    notes: [
      `${size.spans} spans per run (traces of a server span and one child), batches of 512, gzip, one HTTPS sink on loopback; ${size.runs} run(s) per arm, best reported.`,
      "svc's figures include its durable path (batches sealed into the delivery queue before they are sent) and its process's database work; CPU µs/span is the exporting process's.",
      `${WORK_NOTE} Here svc's counts are read in the exporting process, without waiting.`,
      ...(context.database === "postgres"
        ? ["svc runs on a scratch database of the server; the server's CPU is not counted here."]
        : [])
    ]
  }
}
