/**
 * Dataset export cost (`GET /v1/datasets/:id/export`) against reading the
 * same version through `GET /v1/datasets/:id` page by page (100 examples a
 * page): svc of one or more checkouts (A/B, interleaved), each started as
 * an operator starts it on a fresh database of a PostgreSQL server. The
 * version is written with SQL (N examples, input `{n, ones}` with `ones`
 * an array of E ones: three bytes of text each), not measured. Reported per
 * checkout: the first export (which measures the version before its first
 * byte; time to the first byte and to the last), a later export, and the
 * page-by-page read, in ms, and the export's size.
 *
 *   BENCH_DATABASE_URL=postgres://postgres@127.0.0.1:5432/test \
 *   BENCH_SVC_DIR=main=/work/main,branch=. npx node bench/export.ts
 *
 * `BENCH_EXAMPLES` (default 500), `BENCH_ELEMENTS` (30000, about 90 KB a line).
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
const examples = Number(process.env.BENCH_EXAMPLES ?? 500)
const elements = Number(process.env.BENCH_ELEMENTS ?? 30_000)

const withClient = async <A>(url: string, f: (client: pg.Client) => Promise<A>) => {
  const client = new pg.Client({ connectionString: url })
  await client.connect()
  try {
    return await f(client)
  } finally {
    await client.end()
  }
}

const startSvc = async (dir: string, databaseUrl: string) => {
  const port = 20000 + Math.floor(Math.random() * 20000)
  const log = path.join(os.tmpdir(), `svc-export-bench-${port}.log`)
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

const run = async (dir: string) => {
  const name = `export_bench_${process.pid}_${Math.floor(Math.random() * 1e9)}`
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
          "datasets.read"
        ]]
      )
      const headers = { authorization: `Bearer ${key}`, "content-type": "application/json" }
      const task = await (await fetch(`${svc.base}/v1/tasks`, {
        method: "POST",
        headers,
        body: JSON.stringify({ name: "bench", answer_schema: { type: "object" } })
      })).json() as any
      const first = (await db.query("SELECT id FROM datasets WHERE task_id = $1", [task.id])).rows[0].id
      const id = crypto.randomUUID()
      await db.query(
        "INSERT INTO datasets (id, org_id, task_id, version, example_count, lineage_id) VALUES ($1, $2, $3, 2, $4, $5)",
        [id, org, task.id, examples, first]
      )
      for (let from = 0; from < examples; from += 100) {
        await db.query(
          `WITH ones AS (SELECT jsonb_agg(1) AS v FROM generate_series(1, $1::int))
           INSERT INTO dataset_examples (lineage_id, position, dataset_id, input, answer, feedback_id)
           SELECT $2, g, $3, jsonb_build_object('n', g, 'ones', ones.v), jsonb_build_object('label', 'l' || g), NULL
           FROM ones, generate_series($4::int, $5::int) g`,
          [elements, first, id, from, Math.min(examples, from + 100) - 1]
        )
      }
      const download = async () => {
        const started = performance.now()
        const response = await fetch(`${svc.base}/v1/datasets/${id}/export`, { headers })
        const firstByte = performance.now() - started
        if (!response.ok) {
          return {
            status: response.status,
            first_byte_ms: Math.round(firstByte),
            ms: Math.round(performance.now() - started),
            bytes: 0
          }
        }
        const bytes = (await response.arrayBuffer()).byteLength
        return {
          status: response.status,
          first_byte_ms: Math.round(firstByte),
          ms: Math.round(performance.now() - started),
          bytes
        }
      }
      const firstExport = await download()
      const laterExport = await download()
      const started = performance.now()
      let cursor: string | null = null
      let read = 0
      do {
        const response: Response = await fetch(
          `${svc.base}/v1/datasets/${id}?limit=100${cursor === null ? "" : `&cursor=${cursor}`}`,
          { headers }
        )
        const body = await response.json() as any
        if (!response.ok) throw new Error(`GET /v1/datasets/${id}: ${response.status} ${JSON.stringify(body)}`)
        read += body.examples.length
        cursor = body.next_cursor
      } while (cursor !== null)
      const pagesMs = Math.round(performance.now() - started)
      return {
        mib: Math.round(laterExport.bytes / 2 ** 20 * 10) / 10,
        first_status: firstExport.status,
        first_byte_ms: firstExport.first_byte_ms,
        first_ms: firstExport.ms,
        later_ms: laterExport.ms,
        pages_ms: pagesMs,
        pages_read: read
      }
    })
  } finally {
    await svc.stop()
    await withClient(adminUrl, (c) => c.query(`DROP DATABASE ${name} WITH (FORCE)`))
  }
}

const results: Array<Record<string, string | number>> = []
console.log(
  `load before: ${
    os.loadavg().map((l) => l.toFixed(2)).join(" ")
  } (${os.cpus().length} cores); ${examples} examples of ${elements} elements`
)
for (const checkout of checkouts) {
  results.push({ checkout: checkout.label, ...(await run(checkout.dir)) })
  console.log(JSON.stringify(results.at(-1)))
}
console.table(results)
console.log(`load after: ${os.loadavg().map((l) => l.toFixed(2)).join(" ")}`)
