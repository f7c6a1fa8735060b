/**
 * svc as its own process, started the way an operator starts it
 * (`node src/main.ts` in a checkout, configured by environment variables),
 * provisioned with its CLI and driven over HTTP only. `BENCH_SVC_DIR` names
 * the checkouts to compare (`before=/tmp/svc-before,after=/work/main`, or
 * plain paths); by default, this checkout.
 */
import { type ChildProcess, execFile, spawn } from "node:child_process"
import { randomBytes } from "node:crypto"
import { closeSync, existsSync, openSync } from "node:fs"
import { createServer } from "node:net"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { promisify } from "node:util"
import { BASELINE_NAMES } from "./baselines.ts"
import { cpuMicros, type Meter } from "./cpu.ts"
import type { BenchDatabase } from "./db.ts"
import { svcWork } from "./work.ts"

export const REPO = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..")

export interface SvcCheckout {
  readonly label: string
  readonly dir: string
}

export const svcCheckouts = (): ReadonlyArray<SvcCheckout> => {
  const raw = process.env.BENCH_SVC_DIR?.trim()
  if (raw === undefined || raw === "") return [{ label: "svc", dir: REPO }]
  const checkouts = raw.split(",").map((entry, i) => {
    const [label, dir] = entry.includes("=") ? entry.split("=", 2) as [string, string] : [undefined, entry]
    return { label: label ?? `svc@${path.basename(path.resolve(dir)) || i}`, dir: path.resolve(dir) }
  })
  const labels = checkouts.map((c) => c.label)
  if (
    new Set(labels).size !== labels.length ||
    labels.some((label) => (BASELINE_NAMES as ReadonlyArray<string>).includes(label))
  ) {
    throw new Error(
      `BENCH_SVC_DIR: give each checkout its own label (label=path), other than ${
        BASELINE_NAMES.map((n) => `"${n}"`).join(" and ")
      }: ${labels.join(", ")}`
    )
  }
  for (const c of checkouts) {
    if (!existsSync(path.join(c.dir, "src/main.ts")) || !existsSync(path.join(c.dir, "node_modules"))) {
      throw new Error(`BENCH_SVC_DIR: ${c.dir} is not an svc checkout with its node_modules (run npm ci there)`)
    }
  }
  return checkouts
}

/** The commit each checkout is at (for the results file). */
export const describeCheckout = async (dir: string) => {
  try {
    const { stdout } = await promisify(execFile)("git", ["-C", dir, "log", "-1", "--format=%h %cI %s"])
    return stdout.trim()
  } catch {
    return "unknown"
  }
}

export const freePort = () =>
  new Promise<number>((resolve, reject) => {
    const server = createServer()
    server.once("error", reject)
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address() as { port: number }
      server.close(() => resolve(port))
    })
  })

export interface SvcProcess {
  readonly label: string
  readonly pid: number
  readonly baseUrl: string
  readonly meter: Meter
  readonly cpu: () => number
  /** Runs the checkout's CLI (`--json` added) against this process's database. */
  readonly cli: <A>(...args: ReadonlyArray<string>) => Promise<A>
  /** An organization and a key with every scope. */
  readonly provision: () => Promise<{ orgId: string; key: string }>
  /** `fetch` on this process with the key, answering the parsed JSON (throws unless 2xx). */
  readonly api: <A = any>(key: string, method: string, route: string, body?: unknown) => Promise<A>
  readonly stop: () => Promise<void>
}

const ALL_SCOPES = [
  "feedback.write",
  "feedback.read",
  "datasets.write",
  "datasets.read",
  "org_config.read",
  "org_config.write",
  "tasks.read",
  "tasks.write",
  "agents.read",
  "agents.write",
  "approvals.decide"
]

/** `SvcProcess.api` for the server at `baseUrl` (svc or a baseline that serves svc's routes). */
export const apiOn = (baseUrl: string) => async (key: string, method: string, route: string, body?: unknown) => {
  const response = await fetch(`${baseUrl}${route}`, {
    method,
    headers: { authorization: `Bearer ${key}`, ...(body === undefined ? {} : { "content-type": "application/json" }) },
    body: body === undefined ? null : JSON.stringify(body)
  })
  const text = await response.text()
  if (!response.ok) throw new Error(`${method} ${route} answered ${response.status}: ${text}`)
  return text === "" ? undefined : JSON.parse(text)
}

/** Starts svc from `checkout` on `database`; resolves once it answers `/ready`. */
export const startSvc = async (
  checkout: SvcCheckout,
  database: BenchDatabase,
  env: Record<string, string> = {},
  logFile: string
): Promise<SvcProcess> => {
  const port = await freePort()
  // The metrics listener, from which the work counts are read (`work.ts`); `BENCH_SVC_METRICS=0` leaves it off.
  const metricsPort = process.env.BENCH_SVC_METRICS === "0" ? undefined : await freePort()
  const metricsEnv: Record<string, string> = metricsPort === undefined
    ? {}
    : { SVC_METRICS_PORT: String(metricsPort), SVC_METRICS_HOST: "127.0.0.1" }
  const databaseEnv: Record<string, string> = database.kind === "pglite"
    ? { SVC_DATA_DIR: database.dataDir! }
    : { DATABASE_URL: database.url!, SVC_MASTER_KEY: masterKey }
  // Nothing of the caller's own svc settings (a DATABASE_URL, SVC_*, OTEL_*) leaks into the measured process.
  const inherited = Object.fromEntries(
    Object.entries(process.env).filter(([name]) => !/^(DATABASE_URL|PORT|HOST|SVC_.*|OTEL_.*)$/.test(name))
  )
  const fullEnv: Record<string, string | undefined> = {
    ...inherited,
    HOST: "127.0.0.1",
    PORT: String(port),
    ...metricsEnv,
    ...databaseEnv,
    ...env
  }
  const log = openSync(logFile, "a")
  // `BENCH_SVC_NODE_ARGS` (e.g. `--cpu-prof --cpu-prof-dir=/tmp/prof`): flags for svc's node only, to profile it.
  const nodeArgs = (process.env.BENCH_SVC_NODE_ARGS ?? "").split(" ").filter((arg) => arg !== "")
  const proc = spawn(process.execPath, [...nodeArgs, path.join(checkout.dir, "src/main.ts")], {
    cwd: checkout.dir,
    env: fullEnv,
    stdio: ["ignore", log, log]
  })
  closeSync(log)
  let exited = false
  running.add(proc)
  const exit = new Promise<void>((resolve) =>
    proc.once("exit", () => {
      exited = true
      running.delete(proc)
      resolve()
    })
  )
  const baseUrl = `http://127.0.0.1:${port}`
  const deadline = Date.now() + 120_000
  for (;;) {
    if (exited) throw new Error(`${checkout.label} exited while starting; see ${logFile}`)
    if (Date.now() > deadline) {
      proc.kill("SIGKILL")
      throw new Error(`${checkout.label} did not become ready in 120 s; see ${logFile}`)
    }
    const ok = await fetch(`${baseUrl}/ready`).then((r) => r.ok, () => false)
    if (ok) break
    await new Promise((resolve) => setTimeout(resolve, 100))
  }
  const cli = async <A>(...args: ReadonlyArray<string>): Promise<A> => {
    const { stdout } = await promisify(execFile)(process.execPath, [
      path.join(checkout.dir, "src/cli/main.ts"),
      ...args,
      "--json"
    ], {
      cwd: checkout.dir,
      env: fullEnv
    })
    const line = stdout.trim().split("\n").findLast((l) => l.startsWith("{"))
    return JSON.parse(line!) as A
  }
  const api = apiOn(baseUrl)
  return {
    label: checkout.label,
    pid: proc.pid!,
    baseUrl,
    meter: {
      name: checkout.label,
      pids: () => [proc.pid!],
      ...(metricsPort === undefined ? {} : { work: svcWork(`http://127.0.0.1:${metricsPort}/metrics`) })
    },
    cpu: () => cpuMicros(proc.pid!),
    cli,
    api,
    provision: async () => {
      const org = await cli<{ id: string }>("orgs", "create", "--name", "bench")
      const key = await cli<{ key: string }>("keys", "create", "--org", org.id, "--scopes", ALL_SCOPES.join(","))
      return { orgId: org.id, key: key.key }
    },
    stop: async () => {
      if (exited) return
      proc.kill("SIGTERM")
      const timer = setTimeout(() => proc.kill("SIGKILL"), 30_000)
      await exit
      clearTimeout(timer)
    }
  }
}

/** svc processes still running: killed if the benchmark itself ends early (its children exit with their stdin). */
const running = new Set<ChildProcess>()
process.once("exit", () => {
  for (const proc of running) proc.kill("SIGKILL")
})

/** One master key per benchmark run (svc on a server requires one). */
const masterKey = randomBytes(32).toString("base64")
