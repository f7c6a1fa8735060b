/**
 * Authenticated writes: `POST /v1/feedback` (a correction checked against an
 * order-shaped answer schema) and the cheapest authenticated writes,
 * `POST /v1/tasks/:id/runs` (a logged run of about 1 KB, one INSERT) and
 * `POST /v1/agent-sessions` (one INSERT), each against the two request
 * baselines (`support/baselines.ts`): the bare server
 * (`baselines/bare-http.ts`: node:http, the key checked in memory, the same
 * INSERT on the same database) and the Effect floor
 * (`baselines/effect-floor.ts`: Effect HttpApi and `@effect/sql-pg`, the key
 * looked up as svc does, the body decoded by Schema, svc's INSERT). svc,
 * each baseline and the load generator are processes of their own; each
 * arm is started fresh, warmed up with the same requests, then measured;
 * rounds run svc, then the baselines (in reverse order every other round).
 * svc's CPU per request is reported as a ratio of each baseline's; the
 * feedback POST's also over the floor's plus its own work measured alone
 * (`inprocess/feedback-work.ts`: the correction's check in a worker and the
 * secret scan, which the floor does not do).
 */
import * as path from "node:path"
import { measureFeedbackWork } from "../inprocess/feedback-work.ts"
import { armTitle, BASELINE_NAMES, cpuRatio, startBaseline } from "../support/baselines.ts"
import { spawnChild } from "../support/child.ts"
import { formatPerOp, measureCpu, type Meter, meterOf, perOp, v8HelpersOf } from "../support/cpu.ts"
import { type BenchDatabase, freshDatabase } from "../support/db.ts"
import type { LoadResult, LoadSpec } from "../support/load.ts"
import { atLeast, atMost, type BenchContext, type ScenarioResult, sizes } from "../support/scenario.ts"
import { median, percentile, round, sorted, spread } from "../support/stats.ts"
import { startSvc } from "../support/svc.ts"
import { formatWorkPerOp, sumWork, type Work, WORK_NOTE } from "../support/work.ts"

export const answerSchema = {
  type: "object",
  required: ["customer", "items", "total", "currency"],
  additionalProperties: false,
  properties: {
    customer: {
      type: "object",
      required: ["id", "email"],
      properties: {
        id: { type: "string", pattern: "^C-[0-9]{6}$" },
        email: { type: "string", format: "email" },
        name: { type: "string", maxLength: 200 }
      }
    },
    items: {
      type: "array",
      minItems: 1,
      maxItems: 50,
      items: {
        type: "object",
        required: ["sku", "quantity", "price"],
        properties: {
          sku: { type: "string", minLength: 3 },
          quantity: { type: "integer", minimum: 1 },
          price: { type: "number", minimum: 0 },
          note: { type: "string" }
        }
      }
    },
    total: { type: "number" },
    currency: { enum: ["EUR", "USD", "GBP"] },
    status: { enum: ["open", "refunded", "shipped"] },
    notes: { type: "string", maxLength: 2000 },
    token: { type: "string" }
  }
}

export const correction = (i: number) => ({
  customer: { id: `C-${String(100000 + (i % 900000))}`, email: `buyer${i}@example.com`, name: "Ada Lovelace" },
  items: Array.from(
    { length: 5 },
    (_, k) => ({ sku: `SKU-${k}-${i % 97}`, quantity: 1 + k, price: 9.99 * (k + 1), note: "gift wrap please" })
  ),
  total: 149.85,
  currency: "EUR",
  status: "refunded",
  notes:
    "Customer called twice about the late delivery; refund approved by the shift lead after checking the courier log.",
  token: "session-7"
})

/** A logged run of about 1 KB: a ticket and an order-shaped answer. */
export const runBody = (i: number) => ({
  input: {
    ticket: `Order ${
      1000 + i
    }: where is my refund? The parcel came back to the depot two weeks ago and nobody has called.`,
    channel: "email"
  },
  answer: correction(i)
})

const ENDPOINTS = ["feedback", "runs", "agent-sessions"] as const
type Endpoint = (typeof ENDPOINTS)[number]
const WRITE_TITLES: Record<Endpoint, string> = {
  feedback: "POST /v1/feedback",
  runs: "POST /v1/tasks/:id/runs",
  "agent-sessions": "POST /v1/agent-sessions"
}

interface Measured {
  readonly requests: number
  readonly errors: number
  readonly firstError?: string | undefined
  readonly seconds: number
  readonly latencies: ReadonlyArray<number>
  readonly cpu: Record<string, number>
  readonly work: Record<string, Work | undefined>
}

/** Warm-up, then the measured requests, with the CPU of the server, the load generator and the database server. */
const drive = async (
  server: Meter,
  serverPid: number,
  database: BenchDatabase,
  baseUrl: string,
  key: string,
  { taskId, traceId }: { readonly taskId: string; readonly traceId: string },
  size: ReturnType<typeof sizes>["writes"]
) => {
  const load = await spawnChild("load", new URL("../support/load.ts", import.meta.url))
  try {
    const out = {} as Record<Endpoint, Measured>
    for (const endpoint of ENDPOINTS) {
      const spec = (count: number): LoadSpec => ({
        url: endpoint === "runs" ? `${baseUrl}/v1/tasks/${taskId}/runs` : `${baseUrl}/v1/${endpoint}`,
        method: "POST",
        headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
        bodies: endpoint === "feedback"
          ? Array.from(
            { length: 64 },
            (_, i) => JSON.stringify({ inference_log_id: traceId, score: -1, correction: correction(i) })
          )
          : endpoint === "runs"
          ? Array.from({ length: 64 }, (_, i) => JSON.stringify(runBody(i)))
          : ["{}"],
        count,
        concurrency: size.concurrency,
        expectStatus: 201
      })
      await load.call<LoadResult>("run", spec(size.warmup))
      const meters = [
        server,
        v8HelpersOf("v8 helpers", serverPid),
        meterOf("load", load.pid),
        ...(database.meter ? [database.meter] : [])
      ]
      const { result, cpu, work } = await measureCpu(meters, () => load.call<LoadResult>("run", spec(size.requests)))
      out[endpoint] = {
        requests: size.requests,
        errors: result.errors,
        firstError: result.firstError,
        seconds: result.seconds,
        latencies: result.latencies,
        cpu,
        work
      }
    }
    return out
  } finally {
    await load.stop()
  }
}

/**
 * `BENCH_WRITES_WARMUP`: warm-up requests per endpoint and arm, the same for
 * every arm (default 15 000; quick runs: the size's, 200). svc's code takes
 * V8 longer to tier up than the baselines': after 1 000 requests its
 * background compiler still runs (on the PostgreSQL server about 100 µs per
 * write in the next 4 000 requests, under 20 once some 15 000 have passed),
 * and that compilation is most of the "V8 helpers" column. 15 000 measures
 * every arm's steady state; the baselines, smaller, are steady well before.
 */
export const WRITES_WARMUP = 15_000

const warmupOf = (quick: boolean, size: number) => {
  const given = process.env.BENCH_WRITES_WARMUP
  return given === undefined || given === "" ? (quick ? size : WRITES_WARMUP) : Number(given)
}

export default async (context: BenchContext): Promise<ScenarioResult> => {
  const size = { ...sizes(context.quick).writes, warmup: warmupOf(context.quick, sizes(context.quick).writes.warmup) }
  const arms = [...context.checkouts.map((c) => c.label), ...BASELINE_NAMES]
  const results = new Map<string, Array<Record<Endpoint, Measured>>>(arms.map((arm) => [arm, []]))
  for (let round = 0; round < size.rounds; round++) {
    const databases: Array<BenchDatabase> = []
    try {
      let last: { database: BenchDatabase; key: string; run: { taskId: string; traceId: string } } | undefined
      for (const checkout of context.checkouts) {
        const database = await freshDatabase(context.database, `writes_${checkout.label}`)
        databases.push(database)
        const svc = await startSvc(
          checkout,
          database,
          {},
          path.join(context.logDir, `writes-${checkout.label}-${context.database}.log`)
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
          const ids = { taskId: task.id, traceId: run.trace_id }
          results.get(checkout.label)!.push(await drive(svc.meter, svc.pid, database, svc.baseUrl, key, ids, size))
          last = { database, key, run: ids }
        } finally {
          await svc.stop()
        }
      }
      // The baselines on the last svc arm's database (svc stopped: PGlite has one owner).
      const { database, key, run } = last!
      for (const name of round % 2 === 0 ? BASELINE_NAMES : [...BASELINE_NAMES].reverse()) {
        const baseline = await startBaseline(name, database, key)
        try {
          const url = await baseline.call<string>("url")
          results.get(name)!.push(await drive(meterOf(name, baseline.pid), baseline.pid, database, url, key, run, size))
          await baseline.call("close")
        } finally {
          await baseline.stop()
        }
      }
    } finally {
      for (const database of databases) await database.drop()
    }
  }

  const rows: Array<Record<string, string | number>> = []
  const rate = (arm: string, endpoint: Endpoint) =>
    median(results.get(arm)!.map((r) => r[endpoint].requests / r[endpoint].seconds))
  /** The server process's CPU per request (all its threads), over every round. */
  const serverCpu = (arm: string, endpoint: Endpoint) => {
    const runs = results.get(arm)!.map((r) => r[endpoint])
    return runs.reduce((sum, r) => sum + (r.cpu[arm] ?? Number.NaN), 0) / runs.reduce((sum, r) => sum + r.requests, 0)
  }
  for (const endpoint of ENDPOINTS) {
    for (const arm of arms) {
      const runs = results.get(arm)!.map((r) => r[endpoint])
      const latencies = sorted(runs.flatMap((r) => r.latencies))
      const cpu: Record<string, number> = {}
      for (const r of runs) for (const [name, micros] of Object.entries(r.cpu)) cpu[name] = (cpu[name] ?? 0) + micros
      const requests = runs.reduce((sum, r) => sum + r.requests, 0)
      const errors = runs.reduce((sum, r) => sum + r.errors, 0)
      rows.push({
        write: WRITE_TITLES[endpoint],
        arm: armTitle(arm),
        "req/s": round(rate(arm, endpoint)),
        "req/s per round": runs.map((r) => round(r.requests / r.seconds)).join(", "),
        "p50 ms": round(percentile(latencies, 0.5), 2),
        "p99 ms": round(percentile(latencies, 0.99), 2),
        "CPU µs/req": formatPerOp(perOp(cpu, requests)),
        "work/req": formatWorkPerOp(sumWork(runs.map((r) => r.work)), requests),
        ...Object.fromEntries(
          BASELINE_NAMES.map((name) => [`CPU / ${name}`, cpuRatio(serverCpu(arm, endpoint), serverCpu(name, endpoint))])
        ),
        errors: errors === 0 ? 0 : `${errors} (${runs.find((r) => r.firstError)?.firstError})`
      })
    }
  }
  const helpers = (arm: string, endpoint: Endpoint) => {
    const runs = results.get(arm)!.map((r) => r[endpoint])
    return runs.reduce((sum, r) => sum + (r.cpu["v8 helpers"] ?? 0), 0) /
      Math.max(1, runs.reduce((sum, r) => sum + r.requests, 0))
  }
  // The feedback POST's own work (the correction's check in a worker and the secret scan), measured alone.
  const work = await measureFeedbackWork()
  const workMicros = work.inWorker.main + work.inWorker.worker
  const overFloorAndWork = (arm: string) => serverCpu(arm, "feedback") / (serverCpu("floor", "feedback") + workMicros)
  const aims = context.checkouts.flatMap((c) => [
    atMost(
      `${c.label}: CPU per logged run (POST /v1/tasks/:id/runs) / the floor's`,
      serverCpu(c.label, "runs") / serverCpu("floor", "runs"),
      1.2
    ),
    atMost(
      `${c.label}: CPU per feedback POST / (the floor's + its own work's ${round(workMicros)} µs)`,
      overFloorAndWork(c.label),
      1
    ),
    atMost(
      `${c.label}: V8 helper (GC) CPU per cheapest write / bare's`,
      helpers(c.label, "agent-sessions") / Math.max(1, helpers("bare", "agent-sessions")),
      1.5
    ),
    atLeast(`${c.label}: feedback POST / bare`, rate(c.label, "feedback") / rate("bare", "feedback"), 0.7),
    atLeast(
      `${c.label}: cheapest authenticated write / bare`,
      rate(c.label, "agent-sessions") / rate("bare", "agent-sessions"),
      0.8
    )
  ])
  return {
    scenario: "writes",
    database: context.database,
    rows,
    aims,
    notes: [
      ...context.checkouts.map((c) =>
        `${c.label}'s CPU per request over the baselines' (bare, floor): ${
          ENDPOINTS.map((endpoint) =>
            `${WRITE_TITLES[endpoint]} ${
              BASELINE_NAMES.map((name) => cpuRatio(serverCpu(c.label, endpoint), serverCpu(name, endpoint))).join(", ")
            }`
          ).join("; ")
        }; feedback POST over the floor plus its own work ${cpuRatio(overFloorAndWork(c.label), 1)}.`
      ),
      `The feedback POST's own work, measured alone (bench/inprocess/feedback-work.ts, in this process): the correction's check against the answer schema and the secret scan, ${
        round(work.alone, 1)
      } µs per correction in a loop; through svc's correction worker one at a time (each request wakes it, as under this load) ${
        round(workMicros, 1)
      } µs (sending thread ${round(work.inWorker.main, 1)}, worker ${round(work.inWorker.worker, 1)}); 16 in flight ${
        round(work.inWorkerBusy.main + work.inWorkerBusy.worker, 1)
      } µs.`,
      `${size.requests} requests per arm and round at concurrency ${size.concurrency}, after ${size.warmup} warm-up requests; ${size.rounds} round(s), each arm started fresh; req/s is the median over rounds (spread ${
        spread(results.get(arms[0]!)!.map((r) => r.feedback.requests / r.feedback.seconds), 0)
      } for ${arms[0]} feedback).`,
      "The cheapest authenticated writes: POST /v1/tasks/:id/runs (a logged run of about 1 KB, one INSERT; the answer echoes it) and POST /v1/agent-sessions (an empty body, one INSERT). The bare baseline checks the bearer key against the one it loaded at start (sha256 in memory) and makes the same INSERT (feedback's without svc's credential-fingerprint check and quota count). The Effect floor looks the key up as svc does (sha256, a 2 s cache in front of one lookup by hash), decodes the body with Schema and makes svc's INSERT (feedback's with the quota count, without the fingerprint check); no correction check, no secret scan, no request log, no spans.",
      "CPU / bare, CPU / floor: the server process's CPU per request (all its threads: on PGlite the database thread too) over that baseline's, over all rounds; the postgres backends are not in it. On PGlite the baselines' database thread runs each statement through PGlite's `query` (a worker of their own), svc's through its own prepared statements: that difference is inside the ratio.",
      WORK_NOTE,
      "CPU µs/req: each process's user+system CPU over the measured requests (/proc), divided by the requests; postgres = the server backends of the run's database; v8 helpers = the server's V8 helper threads (concurrent GC, background compilation), already inside the server's figure."
    ]
  }
}
