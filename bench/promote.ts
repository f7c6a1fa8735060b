/**
 * Promote cost against the size of the dataset: svc of one or more
 * checkouts (A/B, interleaved size by size), each started as an operator
 * starts it on a fresh database of a PostgreSQL server. For each size N the
 * task gets a version of N examples (N staged corrections seeded with SQL,
 * then promoted once through the API, not measured), then `rounds` times:
 * 10 corrections staged (SQL), preview and promote through the API, timed.
 * Reported per checkout and size: the median promote time (ms), the example
 * rows one promote wrote, and the growth of the examples table on disk.
 *
 *   BENCH_DATABASE_URL=postgres://postgres@127.0.0.1:5432/test \
 *   BENCH_SVC_DIR=main=/work/main,branch=. npx node bench/promote.ts
 *
 * `BENCH_SIZES` (default `10,1000,10000,100000`), `BENCH_ROUNDS` (5).
 */
import { spawn } from "node:child_process"
import crypto from "node:crypto"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import pg from "pg"

const adminUrl = process.env.BENCH_DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/test"
const checkouts = (process.env.BENCH_SVC_DIR ?? `svc=${process.cwd()}`).split(",").map((entry) => {
  const [label, dir] = entry.includes("=") ? entry.split("=") as [string, string] : [path.basename(entry), entry]
  return { label, dir: path.resolve(dir) }
})
const sizes = (process.env.BENCH_SIZES ?? "10,1000,10000,100000").split(",").map(Number)
const rounds = Number(process.env.BENCH_ROUNDS ?? 5)
const STAGED = 10

const withClient = async <A>(url: string, f: (client: pg.Client) => Promise<A>) => {
  const client = new pg.Client({ connectionString: url })
  await client.connect()
  try {
    return await f(client)
  } finally {
    await client.end()
  }
}

const freePort = () => 20000 + Math.floor(Math.random() * 20000)

const startSvc = async (dir: string, databaseUrl: string) => {
  const port = freePort()
  const log = path.join(os.tmpdir(), `svc-promote-bench-${port}.log`)
  const out = fs.openSync(log, "w")
  const proc = spawn(process.execPath, ["src/main.ts"], {
    cwd: dir,
    env: {
      ...process.env,
      PORT: String(port),
      HOST: "127.0.0.1",
      DATABASE_URL: databaseUrl,
      SVC_MASTER_KEY: crypto.randomBytes(32).toString("base64")
    },
    stdio: ["ignore", out, out]
  })
  const base = `http://127.0.0.1:${port}`
  const deadline = Date.now() + 60_000
  for (;;) {
    if (Date.now() > deadline) throw new Error(`svc in ${dir} did not get ready (log: ${log})`)
    try {
      if ((await fetch(`${base}/ready`)).ok) break
    } catch {
      // not listening yet
    }
    await new Promise((resolve) => setTimeout(resolve, 200))
  }
  return {
    base,
    stop: async () => {
      const exited = new Promise((resolve) => proc.once("exit", resolve))
      proc.kill("SIGTERM")
      await exited
    }
  }
}

const run = async (dir: string, size: number) => {
  const name = `promote_bench_${process.pid}_${Math.floor(Math.random() * 1e9)}`
  await withClient(adminUrl, (c) => c.query(`CREATE DATABASE ${name}`))
  const url = new URL(adminUrl)
  url.pathname = `/${name}`
  const svc = await startSvc(dir, url.toString())
  try {
    return await withClient(url.toString(), async (db) => {
      const org = crypto.randomUUID()
      const key = `svc_${crypto.randomBytes(32).toString("base64url")}`
      await db.query("INSERT INTO orgs (id, name) VALUES ($1, 'bench')", [org])
      await db.query(
        "INSERT INTO api_keys (id, org_id, key_hash, key_prefix, scopes) VALUES ($1, $2, $3, $4, $5)",
        [crypto.randomUUID(), org, crypto.createHash("sha256").update(key).digest("hex"), key.slice(0, 12), [
          "tasks.write",
          "tasks.read",
          "feedback.read",
          "feedback.write",
          "datasets.write",
          "datasets.read"
        ]]
      )
      const api = async (method: string, route: string, body?: unknown) => {
        const response = await fetch(`${svc.base}${route}`, {
          method,
          headers: {
            authorization: `Bearer ${key}`,
            ...(body === undefined ? {} : { "content-type": "application/json" })
          },
          ...(body === undefined ? {} : { body: JSON.stringify(body) })
        })
        const json = await response.json() as any
        if (!response.ok) throw new Error(`${method} ${route}: ${response.status} ${JSON.stringify(json)}`)
        return json
      }
      const task = await api("POST", "/v1/tasks", { name: "bench", answer_schema: { type: "object" } })
      const stage = (count: number) =>
        db.query(
          `WITH r AS (
             INSERT INTO runs (trace_id, org_id, task_id, input, answer)
             SELECT md5(random()::text || i), $1, $2, jsonb_build_object('ticket', 'ticket number ' || i, 'body', repeat('x', 200)), '{"label":"wrong"}'::jsonb
             FROM generate_series(1, $3::int) i RETURNING trace_id
           )
           INSERT INTO feedback (id, org_id, task_id, inference_log_id, score, correction, status)
           SELECT gen_random_uuid(), $1, $2, trace_id, -1, '{"label":"right"}'::jsonb, 'staged' FROM r`,
          [org, task.id, count]
        )
      const promote = async () => {
        const preview = await api("GET", `/v1/tasks/${task.id}/feedback/promote/preview`)
        return api("POST", `/v1/tasks/${task.id}/feedback/promote`, {
          base_dataset_id: preview.base_dataset_id,
          expected_feedback_revision: preview.expected_feedback_revision
        })
      }
      // In steps of at most 10 000: before datasets by reference a promote
      // of some tens of thousands of staged corrections failed (a bind parameter each).
      for (let seeded = 0; seeded < size; seeded += 10_000) {
        await stage(Math.min(10_000, size - seeded))
        await promote()
      }
      const rows = async () => Number((await db.query("SELECT count(*) AS n FROM dataset_examples")).rows[0].n)
      const bytes = async () =>
        Number((await db.query("SELECT pg_total_relation_size('dataset_examples') AS n")).rows[0].n)
      const times: Array<number> = []
      const rowsBefore = await rows()
      const bytesBefore = await bytes()
      for (let i = 0; i < rounds; i++) {
        await stage(STAGED)
        const started = performance.now()
        await promote()
        times.push(performance.now() - started)
      }
      times.sort((a, b) => a - b)
      return {
        median_ms: Math.round(times[Math.floor(times.length / 2)]! * 10) / 10,
        rows_per_promote: Math.round(((await rows()) - rowsBefore) / rounds),
        kib_per_promote: Math.round(((await bytes()) - bytesBefore) / rounds / 1024)
      }
    })
  } finally {
    await svc.stop()
    await withClient(adminUrl, (c) => c.query(`DROP DATABASE ${name} WITH (FORCE)`))
  }
}

const results: Array<Record<string, string | number>> = []
console.log(`load before: ${os.loadavg().map((l) => l.toFixed(2)).join(" ")} (${os.cpus().length} cores)`)
for (const size of sizes) {
  for (const checkout of checkouts) {
    const result = await run(checkout.dir, size)
    results.push({ checkout: checkout.label, examples: size, ...result })
    console.log(JSON.stringify(results.at(-1)))
  }
}
console.table(results)
console.log(`load after: ${os.loadavg().map((l) => l.toFixed(2)).join(" ")}`)
