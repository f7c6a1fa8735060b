/**
 * Profiling aid (not part of `npm run bench`): starts svc from this checkout
 * under `node --cpu-prof` on a fresh database (PROF_DB=pglite|postgres),
 * drives the writes load, stops svc and leaves the profiles in PROF_DIR.
 * It also prints svc's CPU per request by thread name (`MainThread`, the
 * `WorkerThread`s: correction workers and the embedded database, and
 * `V8Worker`: V8's helpers, mostly garbage collection).
 *
 * `PROF_ALLOC=1` also starts svc with `--trace-gc-nvp` and a small young
 * generation, and prints what its main thread allocated per request
 * (`allocationRate`): unlike CPU time, a figure that other work on the
 * machine hardly moves. Its CPU figures are not comparable with a run
 * without it.
 */
import { mkdirSync, readdirSync, readFileSync, statSync } from "node:fs"
import * as path from "node:path"
import { runBody } from "./scenarios/writes.ts"
import { spawnChild } from "./support/child.ts"
import { cpuMicros } from "./support/cpu.ts"
import { freshDatabase } from "./support/db.ts"
import type { LoadResult } from "./support/load.ts"
import { REPO, startSvc } from "./support/svc.ts"

const kind = (process.env.PROF_DB ?? "pglite") as "pglite" | "postgres"
const dir = process.env.PROF_DIR ?? "/tmp/wprof"
const endpoint = process.env.PROF_ENDPOINT ?? "feedback"
const count = Number(process.env.PROF_COUNT ?? 6000)
// Requests before the measured ones, per endpoint: enough for V8 to have compiled svc's hot code (15 000 in `writes`).
const warmup = Number(process.env.PROF_WARMUP ?? 1000)
const profile = process.env.PROF_OFF !== "1"
const checkoutDir = process.env.PROF_SVC_DIR ?? REPO
const alloc = process.env.PROF_ALLOC === "1"
// A small young generation: many collections in the measured window, so
// the figure does not hang on where a few fall (CPU figures of such a run
// are not comparable with those of a run without it).
if (alloc) {
  process.env.BENCH_SVC_NODE_ARGS = `${process.env.BENCH_SVC_NODE_ARGS ?? ""} --trace-gc-nvp --max-semi-space-size=2`
}
const answerSchema = {
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
const correction = (i: number) => ({
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
/** CPU time (µs) of each thread of `pid` so far, by thread id and name. */
const threadCpu = (pid: number) => {
  const out = new Map<string, number>()
  for (const tid of readdirSync(`/proc/${pid}/task`)) {
    try {
      const stat = readFileSync(`/proc/${pid}/task/${tid}/stat`, "utf8")
      const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ")
      out.set(
        `${tid} ${stat.slice(stat.indexOf("(") + 1, stat.lastIndexOf(")"))}`,
        (Number(fields[11]) + Number(fields[12])) * 10_000
      )
    } catch {
      // The thread ended meanwhile.
    }
  }
  return out
}
/**
 * What the isolate that collected first (the main thread's) allocated per
 * millisecond between its first and last collection inside byte offsets
 * `from`..`to` of svc's log, from its `--trace-gc-nvp` lines (`allocated=`:
 * bytes since the collection before). The measured requests arrive at a
 * steady rate, so this times the window's length over its requests is the
 * allocation per request.
 */
const allocationRate = (logFile: string, from: number, to: number) => {
  const text = readFileSync(logFile).subarray(0, to).toString("utf8")
  const gc = /^\[\d+:(0x[0-9a-f]+)(?::\d+)?\]\s+([\d.]+) ms: .*\ballocated=(\d+)/
  let main: string | undefined
  let first: number | undefined
  let last = 0
  let bytes = 0
  let collections = 0
  let offset = 0
  for (const line of text.split("\n")) {
    const at = offset
    offset += Buffer.byteLength(line) + 1
    const m = gc.exec(line)
    if (m === null) continue
    main ??= m[1]
    if (m[1] !== main || at < from) continue
    const ms = Number(m[2])
    if (first === undefined) first = ms
    else {
      bytes += Number(m[3])
      collections += 1
    }
    last = ms
  }
  return { bytesPerMs: first === undefined || last === first ? NaN : bytes / (last - first), collections }
}
mkdirSync(dir, { recursive: true })
const database = await freshDatabase(kind, "prof")
const env: Record<string, string> = profile ? { NODE_OPTIONS: `--cpu-prof --cpu-prof-dir=${dir}` } : {}
const logFile = path.join(dir, `svc-${kind}-${process.pid}.log`)
const svc = await startSvc({ label: "svc", dir: checkoutDir }, database, env, logFile)
const load = await spawnChild("load", new URL("./support/load.ts", import.meta.url))
try {
  const { key } = await svc.provision()
  const task = await svc.api<{ id: string }>(key, "POST", "/v1/tasks", { name: "orders", answer_schema: answerSchema })
  const run = await svc.api<{ trace_id: string }>(key, "POST", `/v1/tasks/${task.id}/runs`, {
    input: { ticket: "x" },
    answer: correction(0)
  })
  // Governed steps (`steps-allow`, `steps-pending`): the policies and sessions of `bench/scenarios/steps.ts`.
  const policy = (mode: string) => ({
    mode,
    review_seconds: 3600,
    expiring_notice_seconds: 60,
    timeout_action: "reject"
  })
  await svc.api(key, "PUT", "/v1/approval-policies/bench.allow", policy("allow"))
  await svc.api(key, "PUT", "/v1/approval-policies/bench.ask", policy("require_approval"))
  const sessions: Array<string> = []
  for (let i = 0; i < 16; i++) sessions.push((await svc.api<{ id: string }>(key, "POST", "/v1/agent-sessions", {})).id)
  for (const ep of endpoint.split(",")) {
    const headers = { authorization: `Bearer ${key}`, "content-type": "application/json" }
    const step = ep.startsWith("steps-") ? (ep === "steps-allow" ? "bench.allow" : "bench.ask") : undefined
    const spec = (n: number) =>
      step !== undefined
        ? {
          url: "",
          urls: sessions.map((id) => `${svc.baseUrl}/v1/agent-sessions/${id}/steps`),
          method: "POST" as const,
          headers,
          bodies: [
            JSON.stringify({
              step_id: "@STEP@",
              tool: "shell",
              action_class: step,
              arguments: { command: "ls -la /srv/app", cwd: "/srv" }
            })
          ],
          unique: "@STEP@",
          count: n,
          concurrency: 16,
          expectStatus: 200
        }
        : ep === "runs"
        ? {
          url: `${svc.baseUrl}/v1/tasks/${task.id}/runs`,
          method: "POST" as const,
          headers,
          bodies: Array.from({ length: 64 }, (_, i) => JSON.stringify(runBody(i))),
          count: n,
          concurrency: 16,
          expectStatus: 201
        }
        : {
          url: `${svc.baseUrl}/v1/${ep}`,
          method: "POST" as const,
          headers,
          bodies: ep === "feedback"
            ? Array.from({ length: 64 }, (_, i) =>
              JSON.stringify({ inference_log_id: run.trace_id, score: -1, correction: correction(i) }))
            : ["{}"],
          count: n,
          concurrency: 16,
          expectStatus: 201
        }
    await load.call<LoadResult>("run", spec(warmup))
    const t0 = threadCpu(svc.pid)
    const c0 = cpuMicros(svc.pid)
    const log0 = statSync(logFile).size
    const r = await load.call<LoadResult>("run", spec(count))
    const c1 = cpuMicros(svc.pid)
    if (alloc) {
      const { bytesPerMs, collections } = allocationRate(logFile, log0, statSync(logFile).size)
      const kbPerRequest = (bytesPerMs * r.seconds * 1000) / count / 1024
      console.log(`  allocated (main thread): ${kbPerRequest.toFixed(1)} KB/req (${collections} collections apart)`)
    }
    const byName = new Map<string, number>()
    for (const [thread, micros] of threadCpu(svc.pid)) {
      const name = thread.slice(thread.indexOf(" ") + 1)
      byName.set(name, (byName.get(name) ?? 0) + (micros - (t0.get(thread) ?? 0)) / count)
    }
    console.log(
      `  by thread (µs/req): ${
        [...byName].filter(([, v]) => v >= 1).map(([k, v]) => `${k} ${v.toFixed(0)}`).join(" · ")
      }`
    )
    console.log(
      `${kind} ${ep}: ${(count / r.seconds).toFixed(0)} req/s, svc CPU ${
        ((c1 - c0) / count).toFixed(0)
      } µs/req, errors ${r.errors} ${r.firstError ?? ""}`
    )
  }
} finally {
  await load.stop()
  await svc.stop()
  await database.drop()
}
