/**
 * The hostile-tenant harness (test/hostile/): svc's server as a real child
 * process with its shipped limits, two organizations on it, and a way to
 * measure what one organization's most expensive input costs the other.
 *
 * `measure(name, attack)` times the victim's `GET /v1/agent-approvals?limit=1`
 * every 100 ms from a process of its own (`hostile-probe.ts`; each request
 * sent on time, whether or not the one before has answered, so a stall
 * shows as latency rather than as fewer requests): first 2 s of quiet, then
 * for as long as the attack runs. Meanwhile it
 * samples the server's resident memory from `/proc/<pid>/status` (and,
 * reported apart, its child processes': the rule workers, each bounded by
 * its own heap and deadline). The case
 * passes when, during the attack, the victim's p95 is within 3 times its
 * quiet p95 plus 250 ms, and the process grew by less than `RSS_BOUND_MB`
 * and still answers `/health`. After a failed case the process is killed
 * and started again on the same data, so that what the attack left running
 * or holding is not counted against the next case.
 */
import { spawn } from "node:child_process"
import { randomBytes } from "node:crypto"
import * as fs from "node:fs"
import * as path from "node:path"
import pg from "pg"
import { onServerRun } from "./databases.ts"
import { cli, root, type RunningServer, seededDataDir, startServer } from "./process.ts"
import { makeTestTls, type TestTlsMaterial } from "./tls.ts"

/**
 * Growth of the server's resident memory an attack may cause. The server
 * idles at about 250 MB (the embedded database included). One organization
 * holds at most all workers of a pool but one, so with the default two of
 * each it may fill one validation worker's heap (`SVC_ANSWER_VALIDATION_HEAP_MB`,
 * 256) or one rule worker's (`SVC_APPROVAL_RULES_HEAP_MB`, 256) before it is
 * ended (a case attacks one pool), and a fresh worker costs about 40 MB;
 * the embedded database's WebAssembly memory grows with what a case writes
 * and is never given back (48 task schemas: about 100 MB). 512 MB allows
 * that and refuses anything that grows with the tenant's input.
 */
export const RSS_BOUND_MB = 512

/** Quiet period before each attack. */
const QUIET_MS = 2_000
/** A victim request still unanswered after this counts as this long. */
const PROBE_TIMEOUT_MS = 15_000

export const ALL_SCOPES = [
  "feedback.write",
  "feedback.review",
  "feedback.read",
  "datasets.write",
  "datasets.read",
  "org_config.read",
  "org_config.write",
  "tasks.read",
  "tasks.write",
  "agents.read",
  "agents.write",
  "approvals.decide",
  "keys.manage"
]

export interface Tenant {
  readonly orgId: string
  readonly key: string
}

export interface Answer {
  readonly status: number
  readonly text: string
  readonly json: any
  readonly ms: number
}

export interface Figures {
  readonly name: string
  readonly quietP95: number
  readonly attackP95: number
  readonly attackMax: number
  readonly probes: number
  readonly rssBeforeMb: number
  readonly rssPeakMb: number
  /** The peak of the server's child processes together (the rule workers): apart from its bound, reported. */
  readonly childrenPeakMb: number
  readonly attackMs: number
  /** What went wrong, if anything: the criterion's words, for the assertion. */
  readonly failures: ReadonlyArray<string>
}

const p95 = (values: ReadonlyArray<number>) => {
  if (values.length === 0) return 0
  const sorted = [...values].sort((a, b) => a - b)
  return sorted[Math.min(sorted.length - 1, Math.ceil(sorted.length * 0.95) - 1)]!
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

/** Resident memory of `pid` in MB (`VmRSS`), or undefined once it is gone. */
export const rssMb = (pid: number): number | undefined => {
  try {
    const match = /VmRSS:\s+(\d+) kB/.exec(fs.readFileSync(`/proc/${pid}/status`, "utf8"))
    return match ? Number(match[1]) / 1024 : undefined
  } catch {
    return undefined
  }
}

/** The processes started by `pid` and by those, recursively (`/proc/<pid>/task/<tid>/children`). */
const descendants = (pid: number): Array<number> => {
  const found: Array<number> = []
  const visit = (parent: number) => {
    let tasks: Array<string> = []
    try {
      tasks = fs.readdirSync(`/proc/${parent}/task`)
    } catch {
      return
    }
    for (const task of tasks) {
      let children = ""
      try {
        children = fs.readFileSync(`/proc/${parent}/task/${task}/children`, "utf8")
      } catch {
        continue
      }
      for (const child of children.split(" ").filter((each) => each !== "").map(Number)) {
        found.push(child)
        visit(child)
      }
    }
  }
  visit(pid)
  return found
}

/** Resident memory of `pid`'s descendants together, in MB. */
const childrenRssMb = (pid: number) => descendants(pid).reduce((total, child) => total + (rssMb(child) ?? 0), 0)

export interface Hostile {
  readonly baseUrl: () => string
  readonly pid: () => number
  readonly attacker: Tenant
  readonly victim: Tenant
  /** The test CA the server trusts (`SVC_EXTRA_CA_FILE`): receivers and collectors use its certificate. */
  readonly tls: TestTlsMaterial
  readonly call: (
    tenant: Tenant,
    method: string,
    path: string,
    body?: unknown,
    options?: { readonly raw?: string; readonly timeoutMs?: number }
  ) => Promise<Answer>
  readonly measure: (name: string, attack: () => Promise<unknown>) => Promise<Figures>
  readonly figures: ReadonlyArray<Figures>
  readonly stop: () => Promise<void>
}

/**
 * The server's environment: shipped limits, loopback receivers allowed, the
 * test CA trusted, and warmed up before it listens as a server is by default
 * (`SVC_WARM_START`): its workers start before the quiet period, not during
 * the first attack.
 */
const serverEnv = (tls: TestTlsMaterial, database: Record<string, string>) => ({
  ...database,
  SVC_WARM_START: "true",
  SVC_ALLOWED_TARGET_CIDRS: "127.0.0.0/8",
  SVC_EXTRA_CA_FILE: tls.caFile
})

const makeDatabase = async (): Promise<{ env: Record<string, string>; drop: () => Promise<void> }> => {
  if (!onServerRun) {
    const dir = seededDataDir("svc-hostile-")
    return {
      env: { SVC_DATA_DIR: dir, DATABASE_URL: "" },
      drop: async () => fs.rmSync(dir, { recursive: true, force: true })
    }
  }
  const name = `svc_hostile_${randomBytes(6).toString("hex")}`
  const admin = async (statement: string) => {
    const client = new pg.Client({ connectionString: process.env.TEST_DATABASE_URL })
    await client.connect()
    try {
      await client.query(statement)
    } finally {
      await client.end()
    }
  }
  // A copy of the run's migrated template (test/support/global-setup.ts) when there is one: no migrations at start.
  const template = process.env.TEST_DATABASE_TEMPLATE
  await admin(`CREATE DATABASE ${name}${template === undefined ? "" : ` TEMPLATE ${template}`}`)
  const url = new URL(process.env.TEST_DATABASE_URL!)
  url.pathname = `/${name}`
  return {
    env: { DATABASE_URL: url.toString(), SVC_MASTER_KEY: randomBytes(32).toString("base64") },
    drop: () => admin(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`)
  }
}

const tenant = async (env: Record<string, string>, name: string): Promise<Tenant> => {
  const org = await cli(["orgs", "create", "--name", name, "--json"], env)
  if (org.code !== 0) throw new Error(`orgs create: ${org.stderr}`)
  const orgId = JSON.parse(org.stdout).id as string
  const key = await cli(["keys", "create", "--org", orgId, "--scopes", ALL_SCOPES.join(","), "--json"], env)
  if (key.code !== 0) throw new Error(`keys create: ${key.stderr}`)
  return { orgId, key: JSON.parse(key.stdout).key as string }
}

/** Starts the server with two organizations holding every scope: `attacker` and `victim`. */
export const startHostile = async (): Promise<Hostile> => {
  const tls = await makeTestTls()
  const database = await makeDatabase()
  const env = serverEnv(tls, database.env)
  let server: RunningServer = await startServer(env, 120_000)
  const [attacker, victim] = [await tenant(env, "attacker"), await tenant(env, "victim")]
  const figures: Array<Figures> = []

  const call: Hostile["call"] = async (who, method, path, body, options = {}) => {
    const started = performance.now()
    const payload = options.raw ?? (body === undefined ? undefined : JSON.stringify(body))
    try {
      const response = await fetch(`${server.baseUrl}${path}`, {
        method,
        headers: {
          authorization: `Bearer ${who.key}`,
          ...(payload === undefined ? {} : { "content-type": "application/json" })
        },
        ...(payload === undefined ? {} : { body: payload }),
        signal: AbortSignal.timeout(options.timeoutMs ?? PROBE_TIMEOUT_MS)
      })
      const text = await response.text()
      let json: any
      try {
        json = JSON.parse(text)
      } catch {
        json = undefined
      }
      return { status: response.status, text, json, ms: performance.now() - started }
    } catch (error) {
      return { status: 0, text: String(error), json: undefined, ms: performance.now() - started }
    }
  }

  /** The victim's requests every 100 ms (`hostile-probe.ts`) until `until` settles (at least `minMs`): their latencies. */
  const probe = async (until: () => Promise<unknown>, minMs: number) => {
    const child = spawn(process.execPath, [path.join(root, "test/support/hostile-probe.ts")], {
      env: {
        ...process.env,
        PROBE_URL: server.baseUrl,
        PROBE_KEY: victim.key,
        PROBE_TIMEOUT_MS: String(PROBE_TIMEOUT_MS)
      },
      stdio: ["pipe", "pipe", "inherit"]
    })
    let output = ""
    let ready: () => void = () => undefined
    const probing = new Promise<void>((resolve) => (ready = resolve))
    child.stdout.on("data", (chunk) => {
      output += chunk
      if (output.startsWith("ready\n")) ready()
    })
    const exited = new Promise((resolve) => child.on("exit", resolve))
    // The attack starts once the probe is sending: a process takes a while to start on a loaded machine.
    await Promise.race([probing, exited])
    await Promise.all([until(), sleep(minMs)])
    child.stdin.write("stop\n")
    await exited
    output = output.replace(/^ready\n/, "")
    return JSON.parse(output) as Array<number>
  }

  const healthy = async () => {
    if (server.child.exitCode !== null || server.child.signalCode !== null) return false
    const answer = await fetch(`${server.baseUrl}/health`, { signal: AbortSignal.timeout(5_000) }).catch(() =>
      undefined
    )
    return answer?.status === 200
  }

  const restart = async () => {
    server.child.kill("SIGKILL")
    await server.exited.catch(() => undefined)
    server = await startServer(env, 120_000)
  }

  const measure: Hostile["measure"] = async (name, attack) => {
    const pid = server.child.pid!
    const quiet = await probe(() => sleep(QUIET_MS), QUIET_MS)
    const rssBefore = rssMb(pid) ?? 0
    let rssPeak = rssBefore
    let childrenPeak = childrenRssMb(pid)
    const sampler = setInterval(() => {
      rssPeak = Math.max(rssPeak, rssMb(pid) ?? 0)
      childrenPeak = Math.max(childrenPeak, childrenRssMb(pid))
    }, 50)
    let started = 0
    let ended = 0
    let running: Promise<unknown> = Promise.resolve()
    const during = await probe(() => {
      started = performance.now()
      running = attack().then(() => undefined, (error: unknown) => error).finally(() => (ended = performance.now()))
      return running
    }, 0)
    const attackError = await running
    const attackMs = ended - started
    clearInterval(sampler)
    rssPeak = Math.max(rssPeak, rssMb(pid) ?? 0)
    const quietP95 = p95(quiet)
    const attackP95 = p95(during)
    const failures: Array<string> = []
    if (attackError !== undefined) failures.push(`the attack itself failed: ${String(attackError)}`)
    if (attackP95 > 3 * quietP95 + 250) {
      failures.push(
        `the other organization's p95 was ${attackP95.toFixed(0)} ms, over 3 x ${quietP95.toFixed(0)} + 250 ms`
      )
    }
    if (rssPeak - rssBefore >= RSS_BOUND_MB) {
      failures.push(`the process grew by ${(rssPeak - rssBefore).toFixed(0)} MB, over ${RSS_BOUND_MB} MB`)
    }
    if (!(await healthy())) {
      const said = server.output().split("\n").filter((line) => !line.includes("\"message\":\"request\"")).slice(-8)
        .join("\n")
      failures.push(
        `the process ${server.child.exitCode === null ? "stopped answering" : "died"}:\n${said.slice(-1500)}`
      )
    }
    // A failed case may leave work running or memory held: the next case gets a fresh process.
    if (failures.length > 0) await restart()
    const result: Figures = {
      name,
      quietP95: Math.round(quietP95),
      attackP95: Math.round(attackP95),
      attackMax: Math.round(Math.max(0, ...during)),
      probes: during.length,
      rssBeforeMb: Math.round(rssBefore),
      rssPeakMb: Math.round(rssPeak),
      childrenPeakMb: Math.round(childrenPeak),
      attackMs: Math.round(attackMs),
      failures
    }
    figures.push(result)
    console.log(`hostile ${JSON.stringify(result)}`)
    return result
  }

  const stop = async () => {
    server.child.kill("SIGTERM")
    const killer = setTimeout(() => server.child.kill("SIGKILL"), 20_000)
    await server.exited.catch(() => undefined)
    clearTimeout(killer)
    await database.drop()
    if (figures.length > 0) {
      console.log(
        [
          "case | quiet p95 | attack p95 | max | RSS before/peak MB | children peak MB | attack ms",
          ...figures.map((f) =>
            `${f.name} | ${f.quietP95} | ${f.attackP95} | ${f.attackMax} | ${f.rssBeforeMb}/${f.rssPeakMb} | ${f.childrenPeakMb} | ${f.attackMs}`
          )
        ].join("\n")
      )
    }
  }

  return {
    baseUrl: () => server.baseUrl,
    pid: () => server.child.pid!,
    attacker,
    victim,
    tls,
    call,
    measure,
    figures,
    stop
  }
}

/** Runs `count` copies of `job` with at most `parallel` at once. */
export const inParallel = async <A>(count: number, parallel: number, job: (index: number) => Promise<A>) => {
  const results: Array<A> = []
  let next = 0
  await Promise.all(Array.from({ length: Math.min(parallel, count) }, async () => {
    while (next < count) {
      const index = next++
      results[index] = await job(index)
    }
  }))
  return results
}
