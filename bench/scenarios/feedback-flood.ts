/**
 * One busy client: 50 keep-alive connections of one organization sending
 * `POST /v1/feedback` with a correction in a closed loop (each connection
 * sends its next request as soon as it has an answer, a 429 included), on
 * a service nobody else uses. What matters is the accepted rate and svc's
 * CPU per accepted request: a service whose refusals cost nearly what the
 * work does spends its CPU refusing, and the accepted rate collapses.
 * Reported beside the same load's accepted rate of the request baselines
 * (`support/baselines.ts`: the bare server and the Effect floor, the same
 * INSERT, no validation), with svc's CPU per accepted request as a ratio of
 * each baseline's, and of the floor's plus the feedback POST's own work
 * measured alone (`inprocess/feedback-work.ts`).
 */
import * as path from "node:path"
import { measureFeedbackWork } from "../inprocess/feedback-work.ts"
import { armTitle, BASELINE_NAMES, cpuRatio, startBaseline } from "../support/baselines.ts"
import { spawnChild } from "../support/child.ts"
import { formatPerOp, measureCpu, type Meter, meterOf, perOp } from "../support/cpu.ts"
import { type BenchDatabase, freshDatabase } from "../support/db.ts"
import type { LoadResult, LoadSpec } from "../support/load.ts"
import type { BenchContext, ScenarioResult } from "../support/scenario.ts"
import { round } from "../support/stats.ts"
import { startSvc } from "../support/svc.ts"
import { formatWorkPerOp, type Work, WORK_NOTE } from "../support/work.ts"
import { answerSchema, correction } from "./writes.ts"

const CONNECTIONS = 50

interface Flooded {
  readonly requests: number
  readonly refused: number
  readonly firstRefusal?: string | undefined
  readonly seconds: number
  readonly cpu: Record<string, number>
  readonly work: Record<string, Work | undefined>
}

const flood = async (
  server: Meter,
  database: BenchDatabase,
  baseUrl: string,
  key: string,
  traceId: string,
  warmup: number,
  requests: number
): Promise<Flooded> => {
  const load = await spawnChild("load", new URL("../support/load.ts", import.meta.url))
  try {
    const spec = (count: number): LoadSpec => ({
      url: `${baseUrl}/v1/feedback`,
      method: "POST",
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
      bodies: Array.from(
        { length: 64 },
        (_, i) => JSON.stringify({ inference_log_id: traceId, score: -1, correction: correction(i) })
      ),
      count,
      concurrency: CONNECTIONS,
      expectStatus: 201
    })
    await load.call<LoadResult>("run", spec(warmup))
    const meters = [server, meterOf("load", load.pid), ...(database.meter ? [database.meter] : [])]
    const { result, cpu, work } = await measureCpu(meters, () => load.call<LoadResult>("run", spec(requests)))
    return { requests, refused: result.errors, firstRefusal: result.firstError, seconds: result.seconds, cpu, work }
  } finally {
    await load.stop()
  }
}

export default async (context: BenchContext): Promise<ScenarioResult> => {
  const warmup = context.quick ? 300 : 2_000
  const requests = context.quick ? 1_500 : 10_000
  const flooded = new Map<string, Flooded>()
  const databases: Array<BenchDatabase> = []
  try {
    let last: { database: BenchDatabase; key: string; traceId: string } | undefined
    for (const checkout of context.checkouts) {
      const database = await freshDatabase(context.database, `flood_${checkout.label}`)
      databases.push(database)
      const svc = await startSvc(
        checkout,
        database,
        {},
        path.join(context.logDir, `flood-${checkout.label}-${context.database}.log`)
      )
      try {
        const { key } = await svc.provision()
        const task = await svc.api<{ id: string }>(key, "POST", "/v1/tasks", {
          name: "orders",
          answer_schema: answerSchema
        })
        const run = await svc.api<{ trace_id: string }>(key, "POST", `/v1/tasks/${task.id}/runs`, {
          input: { ticket: "where is my refund" },
          answer: correction(0)
        })
        flooded.set(checkout.label, await flood(svc.meter, database, svc.baseUrl, key, run.trace_id, warmup, requests))
        last = { database, key, traceId: run.trace_id }
      } finally {
        await svc.stop()
      }
    }
    const { database, key, traceId } = last!
    for (const name of BASELINE_NAMES) {
      const baseline = await startBaseline(name, database, key)
      try {
        const url = await baseline.call<string>("url")
        flooded.set(name, await flood(meterOf(name, baseline.pid), database, url, key, traceId, warmup, requests))
        await baseline.call("close")
      } finally {
        await baseline.stop()
      }
    }
  } finally {
    for (const database of databases) await database.drop()
  }
  /** The server process's CPU per accepted request. */
  const perAccepted = (arm: string) => {
    const result = flooded.get(arm)
    return result === undefined
      ? undefined
      : (result.cpu[arm] ?? Number.NaN) / Math.max(1, result.requests - result.refused)
  }
  // The feedback POST's own work (the correction's check in a worker and the secret scan), measured alone.
  const work = await measureFeedbackWork()
  const workMicros = work.inWorker.main + work.inWorker.worker
  const floorAndWork = perAccepted("floor") === undefined ? undefined : perAccepted("floor")! + workMicros
  const rows = [...flooded].map(([arm, result]) => ({
    ...row(armTitle(arm), result),
    ...Object.fromEntries(
      BASELINE_NAMES.map((name) => [`CPU / ${name}`, cpuRatio(perAccepted(arm), perAccepted(name))])
    ),
    "CPU / (floor + work)": cpuRatio(perAccepted(arm), floorAndWork)
  }))
  return {
    scenario: "feedback-flood",
    database: context.database,
    rows,
    aims: [],
    notes: [
      `${requests} requests after ${warmup} warm-up, over ${CONNECTIONS} connections of one organization in a closed loop (a refused request is followed at once by the next).`,
      "CPU / bare, CPU / floor: the server process's CPU per accepted request over that baseline's (the postgres backends not in it).",
      `CPU / (floor + work): over the floor's plus the feedback POST's own work measured alone (bench/inprocess/feedback-work.ts: the correction's check through svc's correction worker and the secret scan, ${
        round(workMicros, 1)
      } µs per correction), which the floor does not do.`,
      WORK_NOTE,
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
    "work/accepted": formatWorkPerOp(result.work, accepted),
    "first refusal": result.firstRefusal?.slice(0, 80) ?? ""
  }
}
