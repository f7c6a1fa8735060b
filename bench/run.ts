/**
 * `npm run bench [-- scenario ...]`: the fair benchmark. Every scenario runs
 * svc as its own process (`node src/main.ts` of each checkout in
 * `BENCH_SVC_DIR`, by default this one) next to baselines, load generators,
 * receivers and sinks, each a process of its own, on embedded PGlite and,
 * with `BENCH_DATABASE_URL`, on that PostgreSQL server. It prints a table
 * per scenario and database with each process's CPU per operation, the
 * ratios against their aims (docs/performance.md), and writes everything
 * as JSON to `bench-results/` (git-ignored). Figures are reported, never
 * asserted. `BENCH_QUICK=1` runs small sizes (a smoke run).
 *
 * `npm run bench -- metrics` (or `approvals`) runs one of the older
 * scenarios in `bench/inprocess/`, which run svc inside the benchmark's
 * process; they are not part of the default run.
 */
import { mkdirSync, mkdtempSync, writeFileSync } from "node:fs"
import { cpus, loadavg, tmpdir, totalmem } from "node:os"
import * as path from "node:path"
import { makeTestTls } from "../test/support/tls.ts"
import { databaseKinds } from "./support/db.ts"
import type { BenchContext, Scenario, ScenarioResult } from "./support/scenario.ts"
import { describeCheckout, REPO, svcCheckouts } from "./support/svc.ts"

const SCENARIOS = [
  "writes",
  "feedback-flood",
  "steps",
  "webhooks",
  "webhooks-scale",
  "latency",
  "held-horizon",
  "drain-history",
  "telemetry-latency",
  "telemetry-export",
  "cli",
  "first-request",
  "delivery-search",
  "mcp"
] as const
const INPROCESS = ["approvals", "metrics", "rules"] as const

const wanted = process.argv.slice(2)
const quick = ["1", "true", "yes"].includes(process.env.BENCH_QUICK ?? "")

for (const name of wanted.filter((n) => (INPROCESS as ReadonlyArray<string>).includes(n))) {
  const scenario = (await import(`./inprocess/${name}.ts`)).default as () => Promise<
    { rows: Array<unknown>; notes?: Array<string> }
  >
  console.log(`\n== ${name} (in-process, not part of the fair comparison)`)
  const result = await scenario()
  console.table(result.rows)
  for (const note of result.notes ?? []) console.log(`  ${note}`)
}
const selected = wanted.length === 0 ? SCENARIOS : SCENARIOS.filter((n) => wanted.includes(n))
const unknown = wanted.filter((n) =>
  !(SCENARIOS as ReadonlyArray<string>).includes(n) && !(INPROCESS as ReadonlyArray<string>).includes(n)
)
if (unknown.length > 0) {
  console.error(`unknown scenario(s): ${unknown.join(", ")}; known: ${[...SCENARIOS, ...INPROCESS].join(", ")}`)
  process.exit(2)
}
if (selected.length === 0) process.exit(0)

// Interrupted: exit, so that svc processes are killed (support/svc.ts) and the other children see their stdin close.
for (const signal of ["SIGINT", "SIGTERM"] as const) process.once(signal, () => process.exit(130))

const started = new Date()
const checkouts = svcCheckouts()
const tls = await makeTestTls()
const logDir = mkdtempSync(path.join(tmpdir(), "svc-bench-logs-"))
const machine = {
  cpus: `${cpus().length} × ${cpus()[0]?.model ?? "?"}`,
  memoryGb: Math.round(totalmem() / 2 ** 30),
  node: process.version,
  loadavgAtStart: loadavg().map((n) => n.toFixed(2)).join(" ")
}
const checkoutInfo = await Promise.all(checkouts.map(async (c) => ({ ...c, commit: await describeCheckout(c.dir) })))
console.log(
  `svc bench ${
    quick ? "(quick) " : ""
  }on ${machine.cpus}, ${machine.memoryGb} GB, Node ${machine.node}, load ${machine.loadavgAtStart}`
)
for (const c of checkoutInfo) console.log(`  ${c.label}: ${c.dir} (${c.commit})`)
console.log(`  databases: ${databaseKinds().join(", ")}; svc logs in ${logDir}`)

const results: Array<(ScenarioResult | { scenario: string; database: string; error: string }) & { seconds?: number }> =
  []
for (const name of selected) {
  const scenario = (await import(`./scenarios/${name}.ts`)).default as Scenario
  for (const database of databaseKinds()) {
    const context: BenchContext = { quick, database, checkouts, tls, logDir }
    const t0 = Date.now()
    console.log(`\n== ${name} on ${database === "pglite" ? "embedded PGlite" : "PostgreSQL server"}`)
    try {
      const result = await scenario(context)
      results.push({ ...result, seconds: Math.round((Date.now() - t0) / 1000) })
      console.table(result.rows)
      for (const aim of result.aims) {
        console.log(`  ${aim.met ? "meets" : "MISSES"}  ${aim.what}: ${aim.value} (aim ${aim.aim})`)
      }
      for (const note of result.notes) console.log(`  ${note}`)
    } catch (error) {
      const message = error instanceof Error ? (error.stack ?? error.message) : String(error)
      results.push({ scenario: name, database, error: message })
      console.log(`  FAILED: ${message}`)
    }
    console.log(`  (${Math.round((Date.now() - t0) / 1000)} s)`)
  }
}

const finished = new Date()
const out = path.join(REPO, "bench-results")
mkdirSync(out, { recursive: true })
const file = path.join(out, `${started.toISOString().replace(/[:.]/g, "-")}${quick ? "-quick" : ""}.json`)
writeFileSync(
  file,
  JSON.stringify(
    {
      started: started.toISOString(),
      seconds: Math.round((finished.getTime() - started.getTime()) / 1000),
      quick,
      machine: { ...machine, loadavgAtEnd: loadavg().map((n) => n.toFixed(2)).join(" ") },
      checkouts: checkoutInfo,
      results
    },
    null,
    2
  )
)
console.log(
  `\nwritten ${path.relative(process.cwd(), file)}; ${
    Math.round((finished.getTime() - started.getTime()) / 1000)
  } s in all; load average at the end ${loadavg().map((n) => n.toFixed(2)).join(" ")}`
)
process.exit(0)
