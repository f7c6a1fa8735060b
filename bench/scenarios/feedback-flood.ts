/**
 * One busy client: 50 keep-alive connections of one organization sending
 * `POST /v1/feedback` with a correction in a closed loop (each connection
 * sends its next request as soon as it has an answer, a 429 included), on
 * a service nobody else uses. What matters is the accepted rate and svc's
 * CPU per accepted request: a service whose refusals cost nearly what the
 * work does spends its CPU refusing, and the accepted rate collapses.
 * Reported beside the same load's accepted rate of the bare baseline
 * (node:http, the key checked in memory, the same INSERT, no validation).
 */
import * as path from "node:path"
import { spawnChild } from "../support/child.ts"
import { formatPerOp, measureCpu, meterOf, perOp, type Meter } from "../support/cpu.ts"
import { type BenchDatabase, freshDatabase } from "../support/db.ts"
import type { LoadResult, LoadSpec } from "../support/load.ts"
import type { BenchContext, ScenarioResult } from "../support/scenario.ts"
import { round } from "../support/stats.ts"
import { startSvc } from "../support/svc.ts"
import { answerSchema, correction } from "./writes.ts"

const CONNECTIONS = 50

interface Flooded {
  readonly requests: number
  readonly refused: number
  readonly firstRefusal?: string | undefined
  readonly seconds: number
  readonly cpu: Record<string, number>
}

const flood = async (server: Meter, database: BenchDatabase, baseUrl: string, key: string, traceId: string, warmup: number, requests: number): Promise<Flooded> => {
  const load = await spawnChild("load", new URL("../support/load.ts", import.meta.url))
  try {
    const spec = (count: number): LoadSpec => ({
      url: `${baseUrl}/v1/feedback`,
      method: "POST",
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
      bodies: Array.from({ length: 64 }, (_, i) => JSON.stringify({ inference_log_id: traceId, score: -1, correction: correction(i) })),
      count,
      concurrency: CONNECTIONS,
      expectStatus: 201
    })
    await load.call<LoadResult>("run", spec(warmup))
    const meters = [server, meterOf("load", load.pid), ...(database.meter ? [database.meter] : [])]
    const { result, cpu } = await measureCpu(meters, () => load.call<LoadResult>("run", spec(requests)))
    return { requests, refused: result.errors, firstRefusal: result.firstError, seconds: result.seconds, cpu }
  } finally {
    await load.stop()
  }
}

export default async (context: BenchContext): Promise<ScenarioResult> => {
  const warmup = context.quick ? 300 : 2_000
  const requests = context.quick ? 1_500 : 10_000
  const rows: Array<Record<string, string | number>> = []
  const databases: Array<BenchDatabase> = []
  try {
    let last: { database: BenchDatabase; key: string; traceId: string } | undefined
    for (const checkout of context.checkouts) {
      const database = await freshDatabase(context.database, `flood_${checkout.label}`)
      databases.push(database)
      const svc = await startSvc(checkout, database, {}, path.join(context.logDir, `flood-${checkout.label}-${context.database}.log`))
      try {
        const { key } = await svc.provision()
        const task = await svc.api<{ id: string }>(key, "POST", "/v1/tasks", { name: "orders", answer_schema: answerSchema })
        const run = await svc.api<{ trace_id: string }>(key, "POST", `/v1/tasks/${task.id}/runs`, { input: { ticket: "where is my refund" }, answer: correction(0) })
        const result = await flood(svc.meter, database, svc.baseUrl, key, run.trace_id, warmup, requests)
        rows.push(row(checkout.label, result))
        last = { database, key, traceId: run.trace_id }
      } finally {
        await svc.stop()
      }
    }
    const { database, key, traceId } = last!
    const bare = await spawnChild("bare", new URL("../baselines/bare-http.ts", import.meta.url), {
      BENCH_BARE: JSON.stringify({ kind: database.kind, dataDir: database.dataDir, url: database.url, key })
    })
    try {
      const url = await bare.call<string>("url")
      rows.push(row("bare node:http + INSERT", await flood(meterOf("bare", bare.pid), database, url, key, traceId, warmup, requests)))
      await bare.call("close")
    } finally {
      await bare.stop()
    }
  } finally {
    for (const database of databases) await database.drop()
  }
  return {
    scenario: "feedback-flood",
    database: context.database,
    rows,
    aims: [],
    notes: [
      `${requests} requests after ${warmup} warm-up, over ${CONNECTIONS} connections of one organization in a closed loop (a refused request is followed at once by the next).`,
      "accepted/s counts 201 answers; refused/s every other answer (429 VALIDATION_BUSY unless `first refusal` says otherwise); svc CPU per accepted request includes the CPU its refusals cost."
    ]
  }
}

const row = (arm: string, result: Flooded): Record<string, string | number> => {
  const accepted = result.requests - result.refused
  return {
    arm,
    "accepted/s": round(accepted / result.seconds),
    "refused/s": round(result.refused / result.seconds),
    "CPU µs/accepted": formatPerOp(perOp(result.cpu, accepted)),
    "first refusal": result.firstRefusal?.slice(0, 80) ?? ""
  }
}
