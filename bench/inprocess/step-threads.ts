/**
 * `npx node bench/inprocess/step-threads.ts`: svc's CPU per governed step
 * and per cheapest write, split by thread, with the arms measured in
 * alternating blocks under the same machine load (the arms run at once; a
 * block of one arm, then a block of the next, the order turned every round).
 *
 * Unlike `npm run bench -- steps`, nothing is restarted between the
 * measurements, and every arm gets the same long warm-up first, so the
 * figures are those of a warm process (V8 has compiled the request path)
 * on both databases alike.
 *
 * Arms: `BENCH_ARMS` (default `pglite`; with `BENCH_DATABASE_URL` also
 * `postgres`), each `label=kind[@checkout]`, e.g.
 * `BENCH_ARMS=before=pglite@/work/base,after=pglite,server=postgres`.
 * `BENCH_KINDS` (default `session,allow,pending,delivered`; `delivered`: a
 * pending step whose `approval.requested` event goes to one subscribed
 * webhook endpoint, on an HTTPS receiver of its own process, the block
 * ending when every webhook arrived), `BENCH_WARMUP` requests
 * per kind and arm (default 3 000), `BENCH_BLOCK` requests per block
 * (default 2 000), `BENCH_ROUNDS` (default 3).
 *
 * Reported per request, µs (medians over the rounds): svc's main thread,
 * its worker threads (`WorkerThread`: PGlite's session on the embedded
 * database), V8's helper threads (garbage collection and compilation, of
 * every isolate of the process: the worker's too), and the server's
 * backends (`postgres`).
 */
import { mkdtempSync } from "node:fs"
import { tmpdir } from "node:os"
import * as path from "node:path"
import { makeTestTls } from "../../test/support/tls.ts"
import { spawnChild } from "../support/child.ts"
import { cpuMicros, threadsCpuMicros } from "../support/cpu.ts"
import { type BenchDatabase, type DatabaseKind, freshDatabase } from "../support/db.ts"
import type { LoadResult, LoadSpec } from "../support/load.ts"
import type { Receipts } from "../support/receiver.ts"
import { REPO, startSvc, type SvcProcess } from "../support/svc.ts"

type Kind = "session" | "allow" | "pending" | "delivered"

const WARMUP = Number(process.env.BENCH_WARMUP ?? 3_000)
const BLOCK = Number(process.env.BENCH_BLOCK ?? 2_000)
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3)
const KINDS = (process.env.BENCH_KINDS ?? "session,allow,pending,delivered").split(",") as ReadonlyArray<Kind>
const serverUrl = process.env.BENCH_DATABASE_URL

const armSpecs = (process.env.BENCH_ARMS ?? (serverUrl ? "pglite=pglite,postgres=postgres" : "pglite=pglite")).split(
  ","
).map((entry) => {
  const [label, rest] = entry.split("=", 2) as [string, string]
  const [kind, dir] = rest.split("@", 2) as [DatabaseKind, string | undefined]
  return { label, kind, dir: path.resolve(dir ?? REPO) }
})

interface Arm {
  readonly label: string
  readonly svc: SvcProcess
  readonly database: BenchDatabase
  readonly key: string
  readonly sessions: ReadonlyArray<string>
  /** The receiver's path of this arm's endpoint (`delivered`). */
  readonly route: string
  /** The endpoint's events while `delivered` runs, and none otherwise. */
  readonly endpoint: string
}

const logDir = mkdtempSync(path.join(tmpdir(), "step-threads-"))
const load = await spawnChild("load", new URL("../support/load.ts", import.meta.url))
const tls = await makeTestTls()
const receiver = await spawnChild("receiver", new URL("../support/receiver.ts", import.meta.url), {
  BENCH_TLS_CERT: tls.cert,
  BENCH_TLS_KEY: tls.key
})
const receiverUrl = await receiver.call<string>("url")
const arms: Array<Arm> = []

const spec = (arm: Arm, kind: Kind, count: number): LoadSpec => {
  const headers = { authorization: `Bearer ${arm.key}`, "content-type": "application/json" }
  return kind === "session"
    ? {
      url: `${arm.svc.baseUrl}/v1/agent-sessions`,
      method: "POST",
      headers,
      bodies: ["{}"],
      count,
      concurrency: 16,
      expectStatus: 201
    }
    : {
      url: "",
      urls: arm.sessions.map((id) => `${arm.svc.baseUrl}/v1/agent-sessions/${id}/steps`),
      method: "POST",
      headers,
      bodies: [
        JSON.stringify({
          step_id: "@STEP@",
          tool: "shell",
          action_class: kind === "allow" ? "bench.allow" : "bench.ask",
          arguments: { command: "ls -la /srv/app", cwd: "/srv" }
        })
      ],
      unique: "@STEP@",
      count,
      concurrency: 16,
      expectStatus: 200
    }
}

const snapshot = async (arm: Arm) => {
  const pid = arm.svc.pid
  const sum = (m: Map<number, number>) => [...m.values()].reduce((a, b) => a + b, 0)
  const backends = arm.database.meter === undefined
    ? 0
    : (await arm.database.meter.pids()).reduce((s, p) => s + cpuMicros(p), 0)
  return {
    all: cpuMicros(pid),
    main: sum(threadsCpuMicros(pid, (comm) => comm === "MainThread" || comm === "node")),
    worker: sum(threadsCpuMicros(pid, "WorkerThread")),
    helpers: sum(threadsCpuMicros(pid, (comm) => comm.startsWith("V8"))),
    postgres: backends
  }
}

try {
  for (const a of armSpecs) {
    const database = await freshDatabase(a.kind, `threads_${a.label}`)
    const svc = await startSvc({ label: a.label, dir: a.dir }, database, {
      SVC_ALLOWED_TARGET_CIDRS: "127.0.0.0/8",
      SVC_EXTRA_CA_FILE: tls.caFile
    }, path.join(logDir, `${a.label}.log`))
    const { key } = await svc.provision()
    const policy = (mode: string) => ({
      mode,
      review_seconds: 3600,
      expiring_notice_seconds: 60,
      timeout_action: "reject"
    })
    await svc.api(key, "PUT", "/v1/approval-policies/bench.allow", policy("allow"))
    await svc.api(key, "PUT", "/v1/approval-policies/bench.ask", policy("require_approval"))
    const sessions: Array<string> = []
    for (let i = 0; i < 16; i++) {
      sessions.push((await svc.api<{ id: string }>(key, "POST", "/v1/agent-sessions", {})).id)
    }
    const route = `/threads-${a.label}`
    // Subscribed to an event no step makes, until `delivered` runs.
    const endpoint = (await svc.api<{ endpoint: { id: string } }>(key, "POST", "/v1/notification-endpoints", {
      url: `${receiverUrl}${route}`,
      events: ["approval.expired"]
    })).endpoint.id
    arms.push({ label: a.label, svc, database, key, sessions, route, endpoint })
  }
  console.log(
    `arms ${
      arms.map((a) => a.label).join(", ")
    }; warm-up ${WARMUP} per kind, blocks of ${BLOCK}, ${ROUNDS} rounds; logs in ${logDir}`
  )
  /** Runs `count` requests of `kind`; for `delivered`, until every webhook arrived. */
  const run = async (
    arm: Arm,
    kind: Kind,
    count: number,
    body: (run: () => Promise<LoadResult>) => Promise<LoadResult> = (f) => f()
  ) => {
    if (kind !== "delivered") return body(() => load.call<LoadResult>("run", spec(arm, kind, count)))
    await arm.svc.api(arm.key, "PATCH", `/v1/notification-endpoints/${arm.endpoint}`, {
      events: ["approval.requested"]
    })
    await receiver.call("reset", { path: arm.route })
    try {
      return await body(async () => {
        const ran = await load.call<LoadResult>("run", spec(arm, kind, count))
        await receiver.call<Receipts>("wait", { path: arm.route, count, timeoutMs: 300_000 })
        return ran
      })
    } finally {
      await arm.svc.api(arm.key, "PATCH", `/v1/notification-endpoints/${arm.endpoint}`, {
        events: ["approval.expired"]
      })
    }
  }
  for (const arm of arms) for (const kind of KINDS) await run(arm, kind, WARMUP)
  const results = new Map<string, Array<Record<string, number>>>()
  for (let round = 0; round < ROUNDS; round++) {
    const order = round % 2 === 0 ? arms : [...arms].reverse()
    for (const kind of KINDS) {
      for (const arm of order) {
        let before = await snapshot(arm)
        let after = before
        const ran = await run(arm, kind, BLOCK, async (f) => {
          before = await snapshot(arm)
          const result = await f()
          after = await snapshot(arm)
          return result
        })
        if (ran.errors > 0) console.log(`${arm.label} ${kind}: ${ran.errors} errors (${ran.firstError})`)
        const per = (k: keyof typeof before) => (after[k] - before[k]) / BLOCK
        const key = `${kind} ${arm.label}`
        results.set(key, [...(results.get(key) ?? []), {
          "req/s": BLOCK / ran.seconds,
          all: per("all"),
          main: per("main"),
          worker: per("worker"),
          helpers: per("helpers"),
          postgres: per("postgres")
        }])
      }
    }
  }
  const median = (values: ReadonlyArray<number>) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!
  console.table([...results].map(([key, rows]) => ({
    request: key,
    "req/s": Math.round(median(rows.map((r) => r["req/s"]!))),
    "svc all": Math.round(median(rows.map((r) => r.all!))),
    "main thread": Math.round(median(rows.map((r) => r.main!))),
    "db thread": Math.round(median(rows.map((r) => r.worker!))),
    "V8 helpers": Math.round(median(rows.map((r) => r.helpers!))),
    other: Math.round(median(rows.map((r) => r.all! - r.main! - r.worker! - r.helpers!))),
    postgres: Math.round(median(rows.map((r) => r.postgres!))),
    "main, rounds": rows.map((r) => Math.round(r.main!)).join(" "),
    "database, rounds": rows.map((r) => Math.round(r.worker! + r.postgres!)).join(" ")
  })))
} finally {
  for (const arm of arms) {
    await arm.svc.stop()
    await arm.database.drop()
  }
  await load.stop()
  await receiver.stop()
}
process.exit(0)
