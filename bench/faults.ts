/**
 * `npx node bench/faults.ts [options]`: the delivery engine's duplicates and
 * losses under repeated faults, measured at scale (not part of `npm run
 * bench`; it counts, it does not time).
 *
 * svc runs as an operator runs it (`support/svc.ts`): on embedded PGlite
 * one process, on a PostgreSQL server of the study's own (a private
 * cluster in a temporary directory, which it crashes with an immediate
 * stop, never the shared server) `--processes` processes sharing the work.
 * One organization, `--endpoints` endpoints on an HTTPS receiver answering
 * after `--delay` ms (`support/recording-receiver.ts`, which records every
 * request's `x-svc-event-id`), `--events` approval events committed to the
 * outbox, each delivered to every endpoint. During the drain, at receipt
 * counts spread over it: `kill -9` of a random svc process (restarted at
 * once), and on the server PostgreSQL crashes (immediate stop, `--down`
 * seconds down, started again). At the end: every event at every endpoint
 * (the receiver's ids; the delivery records all `delivered`), and every
 * repeat owed to the fault before it (`support/fault-tally.ts`), against the
 * stated bound: per kill and endpoint `UNSETTLED_PER_TARGET` (4) times the
 * per-endpoint in-flight limit, per crash and lost answer none. Prints tables and writes JSON to `bench-results/`.
 *
 * `BENCH_SVC_DIR` (as for `npm run bench`) runs svc from other checkouts,
 * each in turn.
 */
import { Effect, Exit, Scope } from "effect"
import { execFileSync } from "node:child_process"
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, readlinkSync, writeFileSync } from "node:fs"
import { cpus, loadavg, tmpdir, totalmem } from "node:os"
import * as path from "node:path"
import { parseArgs } from "node:util"
import pg from "pg"
import { PER_ENDPOINT } from "../src/notifications/send/Sender.ts"
import { postgresBin, privatePostgres } from "../test/support/privatePostgres.ts"
import { makeTestTls } from "../test/support/tls.ts"
import { spawnChild } from "./support/child.ts"
import { type BenchDatabase, freshDatabase } from "./support/db.ts"
import { approvalEvent } from "./support/events.ts"
import {
  boundPerEndpoint,
  type FaultKind,
  type FaultWindow,
  type KindSummary,
  summarize,
  tally
} from "./support/fault-tally.ts"
import { replyDropper } from "./support/pg-reply-dropper.ts"
import type { Progress, Report, Senders } from "./support/recording-receiver.ts"
import { round } from "./support/stats.ts"
import { describeCheckout, REPO, startSvc, type SvcCheckout, svcCheckouts, type SvcProcess } from "./support/svc.ts"

const { values: args } = parseArgs({
  options: {
    databases: { type: "string" },
    events: { type: "string", default: "30000" },
    endpoints: { type: "string", default: "4" },
    processes: { type: "string", default: "2" },
    kills: { type: "string", default: "8" },
    crashes: { type: "string", default: "4" },
    "lost-replies": { type: "string", default: "0" },
    "lost-reply": { type: "string", default: "take" },
    delay: { type: "string", default: "20-40" },
    down: { type: "string", default: "3-6" },
    gap: { type: "string", default: "3" },
    victim: { type: "string", default: "sending" },
    lease: { type: "string" },
    seed: { type: "string" },
    timeout: { type: "string", default: "3600" },
    help: { type: "boolean", short: "h" }
  }
})

if (args.help) {
  console.log(`npx node bench/faults.ts [options]
  --databases pglite,postgres  which databases (default: both; postgres needs the PostgreSQL binaries)
  --events N        approval events written to the outbox (default 30000), each to every endpoint
  --endpoints N     endpoints of the one organization (default 4)
  --processes N     svc processes on the server (default 2; PGlite: 1)
  --kills N         kill -9 of a random svc process during the drain (default 8)
  --crashes N       PostgreSQL crashes during the drain, server only (default 4)
  --lost-replies N  server only: svc reaches PostgreSQL through a proxy that closes the connection
                    instead of passing on the answer of a statement that committed (default 0)
  --lost-reply S    which statement: take (the log's lease and take) or settle (default take)
  --delay A-B       the receiver answers after A to B ms (default 20-40)
  --down A-B        seconds PostgreSQL stays down after a crash (default 3-6)
  --gap S           seconds after a fault is over, at least, before the next (default 3)
  --victim V        sending: kill a process that sent in the last second (any if none did); any: any process
  --lease D         SVC_WEBHOOK_LEASE for svc (default: svc's own, 30s)
  --seed N          the random choices (fault moments, victims, down times)
  --timeout S       give up the drain after S seconds (default 3600)
BENCH_SVC_DIR as for npm run bench: svc from these checkouts, each in turn.`)
  process.exit(0)
}

const range = (text: string, what: string): readonly [number, number] => {
  const [a, b = a] = text.split("-").map(Number) as [number, number?]
  if (!Number.isFinite(a) || !Number.isFinite(b) || a < 0 || b < a) {
    throw new Error(`--${what}: give A or A-B, got ${text}`)
  }
  return [a, b]
}
const count = (text: string, what: string, min = 0) => {
  const n = Number(text)
  if (!Number.isInteger(n) || n < min) throw new Error(`--${what}: an integer of at least ${min}, got ${text}`)
  return n
}

const options = {
  events: count(args.events, "events", 1),
  endpoints: count(args.endpoints, "endpoints", 1),
  processes: count(args.processes, "processes", 1),
  kills: count(args.kills, "kills"),
  crashes: count(args.crashes, "crashes"),
  lostReplies: count(args["lost-replies"], "lost-replies"),
  lostReply: args["lost-reply"] === "settle" ? "settle" as const : "take" as const,
  delayMs: range(args.delay, "delay"),
  downSeconds: range(args.down, "down"),
  gapSeconds: Number(args.gap),
  victim: args.victim === "any" ? "any" as const : "sending" as const,
  lease: args.lease,
  seed: args.seed === undefined ? Math.floor(Math.random() * 2 ** 31) : count(args.seed, "seed"),
  timeoutSeconds: count(args.timeout, "timeout", 1)
}
type Kind = "pglite" | "postgres"
const databases: ReadonlyArray<Kind> = (args.databases ?? (postgresBin === undefined ? "pglite" : "pglite,postgres"))
  .split(",").map((s) => s.trim()).filter((s): s is Kind => s === "pglite" || s === "postgres")
if (databases.includes("postgres") && postgresBin === undefined) {
  throw new Error("no PostgreSQL binaries under /usr/lib/postgresql: run with --databases pglite")
}

/** mulberry32: the study's random choices, repeatable with `--seed`. */
const random = (() => {
  let a = options.seed >>> 0
  return () => {
    a = (a + 0x6d2b79f5) >>> 0
    let t = a
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
})()
const between = ([a, b]: readonly [number, number]) => a + random() * (b - a)

const now = () => performance.timeOrigin + performance.now()
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

/** The local ports of `pid`'s TCP connections to `remotePort` on loopback (from /proc): which requests are its. */
const portsTo = (pid: number, remotePort: number): Array<number> => {
  const inodes = new Set<string>()
  try {
    for (const fd of readdirSync(`/proc/${pid}/fd`)) {
      try {
        const link = readlinkSync(`/proc/${pid}/fd/${fd}`)
        if (link.startsWith("socket:[")) inodes.add(link.slice(8, -1))
      } catch {
        // Closed meanwhile.
      }
    }
  } catch {
    return []
  }
  const ports: Array<number> = []
  for (const table of ["tcp", "tcp6"]) {
    let text = ""
    try {
      text = readFileSync(`/proc/${pid}/net/${table}`, "utf8")
    } catch {
      continue
    }
    for (const line of text.split("\n").slice(1)) {
      const fields = line.trim().split(/\s+/)
      if (fields.length < 10 || !inodes.has(fields[9]!)) continue
      const local = Number.parseInt(fields[1]!.split(":")[1]!, 16)
      const remote = Number.parseInt(fields[2]!.split(":")[1]!, 16)
      if (remote === remotePort) ports.push(local)
    }
  }
  return ports
}

const sum = (record: Record<string, number>) => Object.values(record).reduce((a, b) => a + b, 0)

/** One fault as it happened. */
interface FaultRecord extends FaultWindow {
  readonly index: number
  /** Kill: the process slot and pid killed. */
  readonly victim?: number
  readonly pid?: number
  /** Distinct deliveries received before it (all endpoints). */
  readonly receivedBefore: number
  /** Requests the receiver was answering at the fault from the processes it hit (a kill: the victim; a crash: all), and received from them in the second before. */
  readonly answering: number
  readonly lastSecond: number
  /** Kill: ms from the signal to the restarted process answering `/ready`. Crash: ms down. */
  readonly restartMs?: number
  readonly downMs?: number
  /** Crash: ms from the database's start until every svc process answered `/ready`; processes that exited meanwhile (restarted). */
  readonly readyAgainMs?: number
  readonly exited?: ReadonlyArray<number>
  /** The longest pause between receipts at one endpoint that began during the fault or within a second before (ms). */
  pauseMs?: number
}

interface Records {
  readonly total: number
  readonly delivered: number
  readonly pairs: number
  readonly undispatched: number
  readonly attempts: number
  readonly attempt_records: number
  readonly undelivered: number
  readonly log_pending: number
  readonly log_in_flight: number
  readonly seqs_in_two_outcomes: number
  readonly rows_written: number
  readonly by_status: Record<string, number> | null
  /** Failed attempts by error, and the endpoints' consecutive failures at the end. */
  readonly failed_attempts: Record<string, number> | null
  readonly consecutive_failures: number
  /** Server: `delivery_records`' own count of delivered rows. */
  view_delivered?: number
}

/**
 * The records at the end of a drain. `delivery_records` (migration 0670) finds
 * a logged row's outcome row by a lateral lookup, which over every row of a
 * drain the planner makes a sequential scan of `delivery_outcomes` per row
 * (hours at 120 000 rows). So its rule is restated here as one join, the
 * same cases in the same order: a row written on its own reads as stored; a
 * logged row an outcome row holds reads `delivered` with one attempt; a
 * logged row past the cursor, at most the mark of a live lease, `sending`;
 * any other logged row `queued`. On the server the view's own count of
 * delivered rows is read as well (`view_delivered`, without sequential
 * scans: a few seconds), to hold the restatement to it.
 */
/** Events not fanned out: past the dispatch cursor (migration 0720), or unmarked in a checkout from before it. */
const UNDISPATCHED = `(SELECT count(*)::int FROM events WHERE dispatched_at IS NULL)`
const undispatched = (sql: string, cursor: boolean) =>
  cursor ? sql : sql.replaceAll("(SELECT count(*)::int FROM undispatched_events)", UNDISPATCHED)

const RECORDS = `
  WITH held AS (
    SELECT o.target_id, s AS seq, count(*)::int AS n FROM delivery_outcomes o, unnest(o.seqs) AS s GROUP BY 1, 2
  ),
  rec AS (
    SELECT d.event_id, d.target_id, coalesce(h.n, 0) AS outcome_rows,
      CASE WHEN d.status <> 'logged' THEN d.status
           WHEN h.seq IS NOT NULL THEN 'delivered'
           WHEN t.lease_id IS NOT NULL AND t.lease_until > now() AND d.seq > t.cursor AND d.seq <= t.leased_to THEN 'sending'
           ELSE 'queued' END AS status,
      CASE WHEN d.status <> 'logged' THEN d.attempts
           WHEN h.seq IS NOT NULL OR (t.lease_id IS NOT NULL AND t.lease_until > now() AND d.seq > t.cursor AND d.seq <= t.leased_to) THEN 1
           ELSE 0 END AS attempts,
      d.status = 'logged' AS logged
    FROM deliveries d
    LEFT JOIN held h ON d.status = 'logged' AND h.target_id = d.target_id AND h.seq = d.seq
    LEFT JOIN delivery_targets t ON d.status = 'logged' AND t.id = d.target_id
    WHERE d.kind = 'webhook'
  ),
  failed AS (
    SELECT coalesce(a.error, 'HTTP ' || a.status_code) AS error, count(*)::int AS n
    FROM delivery_attempts a JOIN deliveries d ON d.id = a.delivery_id
    WHERE d.kind = 'webhook' AND (a.error IS NOT NULL OR a.status_code IS NULL OR a.status_code >= 300)
    GROUP BY 1
  )
  SELECT (SELECT count(*)::int FROM rec) AS total,
         (SELECT count(*)::int FROM rec WHERE status = 'delivered') AS delivered,
         (SELECT count(DISTINCT (event_id, target_id))::int FROM rec) AS pairs,
         (SELECT count(*)::int FROM undispatched_events) AS undispatched,
         (SELECT coalesce(sum(attempts), 0)::int FROM rec) AS attempts,
         (SELECT count(*)::int FROM delivery_attempts a JOIN deliveries d ON d.id = a.delivery_id WHERE d.kind = 'webhook')
           + (SELECT coalesce(sum(outcome_rows), 0)::int FROM rec WHERE logged) AS attempt_records,
         (SELECT coalesce(sum(undelivered), 0)::int FROM delivery_targets WHERE kind = 'webhook') AS undelivered,
         (SELECT coalesce(sum(log_pending), 0)::int FROM delivery_targets WHERE kind = 'webhook') AS log_pending,
         (SELECT coalesce(sum(log_in_flight), 0)::int FROM delivery_targets WHERE kind = 'webhook') AS log_in_flight,
         (SELECT count(*)::int FROM held WHERE n > 1) AS seqs_in_two_outcomes,
         (SELECT count(*)::int FROM rec WHERE NOT logged) AS rows_written,
         (SELECT jsonb_object_agg(status, n) FROM (SELECT status, count(*)::int AS n FROM rec GROUP BY status) s) AS by_status,
         (SELECT jsonb_object_agg(error, n) FROM failed) AS failed_attempts,
         (SELECT coalesce(sum(consecutive_failures), 0)::int FROM delivery_targets WHERE kind = 'webhook') AS consecutive_failures`

/** The view's own count (server only, see RECORDS). */
const VIEW_DELIVERED = `SELECT count(*)::int AS n FROM delivery_records WHERE kind = 'webhook' AND status = 'delivered'`

/**
 * Whether anything is left to send: logged rows not yet settled, rows on their
 * own waiting or in flight, events not fanned out. Cheap (the engine's
 * counts and indexes), so it can be asked while the drain runs; the records
 * are read once, at the end.
 */
const LEFT = `
  SELECT (SELECT coalesce(sum(log_pending), 0)::int FROM delivery_targets WHERE kind = 'webhook')
       + (SELECT count(*)::int FROM deliveries WHERE kind = 'webhook' AND status IN ('queued', 'retrying', 'sending'))
       + (SELECT count(*)::int FROM undispatched_events) AS left`

interface Study {
  readonly checkout: string
  readonly database: Kind
  readonly processes: number
  readonly events: number
  readonly endpoints: number
  readonly expected: number
  readonly seconds: number
  readonly drainSeconds: number
  readonly faults: ReadonlyArray<
    FaultRecord & {
      readonly duplicates: number
      readonly byEndpoint: Record<string, number>
      readonly worstEndpoint: number
      readonly lastRepeatMs: number
    }
  >
  readonly plannedFaults: number
  readonly receipts: number
  /** Receipts by the process (slot and pid) that sent them. */
  readonly byProcess: Record<string, number>
  readonly lost: number
  readonly missing: Record<string, ReadonlyArray<string>>
  readonly duplicates: number
  readonly outside: ReadonlyArray<unknown>
  readonly kills: KindSummary
  readonly crashes: KindSummary
  readonly replies: KindSummary
  readonly records: Records | undefined
  readonly recordsError: string | undefined
  readonly timedOut: boolean
  readonly logs: ReadonlyArray<string>
}

/** A PostgreSQL server of the study's own (`test/support/privatePostgres.ts`), crashable; gone with `close`. */
const privateServer = async () => {
  const scope = Effect.runSync(Scope.make())
  const server = await Effect.runPromise(Scope.provide(scope)(privatePostgres))
  return { server, close: () => Effect.runPromise(Scope.close(scope, Exit.void)) }
}

const runStudy = async (
  checkout: SvcCheckout,
  kind: Kind,
  tls: Awaited<ReturnType<typeof makeTestTls>>,
  logDir: string
): Promise<Study> => {
  const started = now()
  const processes = kind === "pglite" ? 1 : options.processes
  const owned = kind === "postgres" ? await privateServer() : undefined
  const database: BenchDatabase = owned === undefined
    ? await freshDatabase("pglite", `faults_${checkout.label}`)
    : {
      kind: "postgres",
      url: owned.server.url,
      offline: false,
      connect: async () => {
        const client = new pg.Client({ connectionString: owned.server.url })
        await client.connect()
        return {
          query: async (sql, params) => ({ rows: (await client.query(sql, params as Array<unknown>)).rows }),
          end: () => client.end()
        }
      },
      drop: () => owned.close()
    }
  const receiver = await spawnChild("receiver", new URL("./support/recording-receiver.ts", import.meta.url), {
    BENCH_TLS_CERT: tls.cert,
    BENCH_TLS_KEY: tls.key,
    BENCH_DELAY_MIN_MS: String(options.delayMs[0]),
    BENCH_DELAY_MAX_MS: String(options.delayMs[1])
  })
  // svc reaches the server through the proxy when answers are to be lost (the study's own queries do not).
  const dropper = owned !== undefined && options.lostReplies > 0
    ? await replyDropper({ host: "127.0.0.1", port: Number(new URL(owned.server.url).port) })
    : undefined
  const svcDatabase: BenchDatabase = dropper === undefined
    ? database
    : { ...database, url: Object.assign(new URL(owned!.server.url), { port: String(dropper.port) }).toString() }
  const receiverUrl = await receiver.call<string>("url")
  const receiverPort = Number(new URL(receiverUrl).port)
  const logs = Array.from(
    { length: processes },
    (_, i) => path.join(logDir, `faults-${checkout.label}-${kind}-${i}.log`)
  )
  const env: Record<string, string> = {
    SVC_ALLOWED_TARGET_CIDRS: "127.0.0.0/8",
    SVC_EXTRA_CA_FILE: tls.caFile,
    // Every event to every endpoint, none refused as over capacity.
    SVC_WEBHOOK_QUEUE_CAPACITY: String(Math.max(10_000, options.events * 2)),
    ...(options.lease === undefined ? {} : { SVC_WEBHOOK_LEASE: options.lease })
  }
  const start = (slot: number) => startSvc(checkout, svcDatabase, env, logs[slot]!)
  const procs: Array<SvcProcess> = []
  /** Whether the process still runs (the harness reaps its children as they exit). */
  const alive = (proc: SvcProcess) => {
    try {
      process.kill(proc.pid, 0)
      return true
    } catch {
      return false
    }
  }
  /** One row, read through the database (server) or the running process's admin channel (embedded). */
  const query = async <A>(sql: string): Promise<A> => {
    if (kind === "pglite") {
      try {
        return (await procs[0]!.cli<{ rows: Array<A> }>("db", "query", sql)).rows[0]!
      } catch (error) {
        const e = error as { message?: string; stderr?: string; stdout?: string }
        throw new Error(`db query failed: ${e.message}\n${e.stderr ?? ""}${e.stdout ?? ""}`, { cause: error })
      }
    }
    const client = await database.connect()
    try {
      return (await client.query<A>(sql)).rows[0]!
    } finally {
      await client.end()
    }
  }
  try {
    procs.push(await start(0))
    procs.push(...await Promise.all(Array.from({ length: processes - 1 }, (_, i) => start(i + 1))))
    const { orgId, key } = await procs[0]!.provision()
    const endpoints = Array.from({ length: options.endpoints }, (_, i) => `/e${i}`)
    for (const route of endpoints) {
      await procs[0]!.api(key, "POST", "/v1/notification-endpoints", {
        url: `${receiverUrl}${route}`,
        events: ["approval.requested"]
      })
    }

    // The backlog, committed in one transaction (embedded: while svc is stopped, as the data folder has one owner).
    const events = Array.from({ length: options.events }, () => approvalEvent(orgId))
    if (database.offline) await procs[0]!.stop()
    const client = await database.connect()
    try {
      await client.query("BEGIN")
      for (let i = 0; i < events.length; i += 2_000) {
        const batch = events.slice(i, i + 2_000)
        await client.query(
          `INSERT INTO events (id, org_id, type, occurred_at, body)
           SELECT id, $2::uuid, 'approval.requested', now(), body FROM unnest($1::uuid[], $3::text[]) AS e (id, body)`,
          [batch.map((e) => e.id), orgId, batch.map((e) => e.body)]
        )
      }
      await client.query("COMMIT")
    } finally {
      await client.end()
    }
    if (database.offline) procs[0] = await start(0)
    const drainStart = now()
    const expected = options.events * options.endpoints
    console.log(
      `  ${expected} deliveries (${options.events} events × ${options.endpoints} endpoints) on ${processes} process${
        processes === 1 ? "" : "es"
      }`
    )

    // The faults: kinds in a random order, each at a share of the receipts spread over the drain.
    const kinds: Array<FaultKind> = [
      ...Array<FaultKind>(options.kills).fill("kill"),
      ...Array<FaultKind>(kind === "postgres" ? options.crashes : 0).fill("crash"),
      ...Array<FaultKind>(dropper === undefined ? 0 : options.lostReplies).fill("reply")
    ]
    for (let i = kinds.length - 1; i > 0; i--) {
      const j = Math.floor(random() * (i + 1))
      ;[kinds[i], kinds[j]] = [kinds[j]!, kinds[i]!]
    }
    const plan = kinds.map((k, j) => ({ kind: k, share: 0.05 + 0.85 * (j + 0.2 + 0.6 * random()) / kinds.length }))
    const faults: Array<FaultRecord> = []
    let quietFrom = now()
    let receivedAtQuiet = 0
    const deadline = drainStart + options.timeoutSeconds * 1_000
    let timedOut = false
    /** Tells the receiver which sender ports are whose, so that it counts receipts by process. */
    const label = (slot: number) => {
      const proc = procs[slot]!
      return receiver.call("label", {
        ports: portsTo(proc.pid, receiverPort),
        label: `process ${slot} (pid ${proc.pid})`
      })
    }
    const labelAll = () => Promise.all(procs.map((_, slot) => label(slot)))
    let labelledAt = 0
    const received = async () => {
      const progress = await receiver.call<Progress>("progress")
      return endpoints.reduce((n, route) => n + Math.min(options.events, progress[route]?.distinct ?? 0), 0)
    }

    const kill = async (index: number, receivedBefore: number) => {
      await labelAll()
      const senders = await Promise.all(
        procs.map((proc) => receiver.call<Senders>("senders", { ports: portsTo(proc.pid, receiverPort) }))
      )
      const sending = procs.map((_, slot) => slot).filter((slot) => sum(senders[slot]!.lastSecond) > 0)
      const among = options.victim === "sending" && sending.length > 0 ? sending : procs.map((_, slot) => slot)
      const victim = among[Math.floor(random() * among.length)]!
      const proc = procs[victim]!
      const at = now()
      process.kill(proc.pid, "SIGKILL")
      await proc.stop()
      const until = now()
      procs[victim] = await start(victim)
      const fault: FaultRecord = {
        index,
        kind: "kill",
        at,
        until,
        victim,
        pid: proc.pid,
        receivedBefore,
        answering: sum(senders[victim]!.answering),
        lastSecond: sum(senders[victim]!.lastSecond),
        restartMs: Math.round(now() - at)
      }
      console.log(
        `  ${fault.kind} #${index} of process ${victim} at ${
          round(receivedBefore / expected * 100)
        } %: it had ${fault.answering} requests being answered, ${fault.lastSecond} in the last second; ready again after ${fault.restartMs} ms`
      )
      return fault
    }

    const crash = async (index: number, receivedBefore: number) => {
      await labelAll()
      const ports = procs.flatMap((proc) => portsTo(proc.pid, receiverPort))
      const senders = await receiver.call<Senders>("senders", { ports })
      const at = now()
      await Effect.runPromise(owned!.server.crash)
      const downMs = between(options.downSeconds) * 1_000
      await sleep(Math.max(0, at + downMs - now()))
      await Effect.runPromise(owned!.server.start)
      const until = now()
      // Every process lived through it (a process that did not is restarted, and said).
      const gone: Array<number> = []
      for (let slot = 0; slot < procs.length; slot++) {
        if (!alive(procs[slot]!)) {
          gone.push(slot)
          await procs[slot]!.stop()
          procs[slot] = await start(slot)
        }
      }
      const readyBy = now() + 60_000
      for (const proc of procs) {
        while (now() < readyBy && !(await fetch(`${proc.baseUrl}/ready`).then((r) => r.ok, () => false))) {
          await sleep(100)
        }
      }
      const fault: FaultRecord = {
        index,
        kind: "crash",
        at,
        until,
        receivedBefore,
        answering: sum(senders.answering),
        lastSecond: sum(senders.lastSecond),
        downMs: Math.round(until - at),
        readyAgainMs: Math.round(now() - until),
        exited: gone
      }
      console.log(
        `  crash #${index} at ${
          round(receivedBefore / expected * 100)
        } %: ${fault.answering} requests being answered, ${fault.lastSecond} in the last second; down ${fault.downMs} ms, every process ready ${fault.readyAgainMs} ms after${
          gone.length > 0 ? `; process(es) ${gone.join(", ")} EXITED and were restarted` : ""
        }`
      )
      return fault
    }

    /** The answer of the next take (or settle) lost after it committed; the processes live on. */
    const loseReply = async (index: number, receivedBefore: number) => {
      const pattern = options.lostReply === "take" ? "leased AS (" : "INSERT INTO delivery_outcomes"
      const armedAt = now()
      const dropped = await Promise.race([dropper!.drop(pattern), sleep(10_000).then(() => undefined)])
      if (dropped === undefined) dropper!.disarm()
      const at = dropped?.at ?? armedAt
      const fault: FaultRecord = { index, kind: "reply", at, until: at, receivedBefore, answering: 0, lastSecond: 0 }
      console.log(
        `  lost reply #${index} at ${round(receivedBefore / expected * 100)} %: ${
          dropped === undefined
            ? "no such statement ran in 10 s"
            : `the answer to ${options.lostReply} withheld, its connection closed`
        }`
      )
      return fault
    }

    // The drain, with the faults at their shares of the receipts.
    for (;;) {
      const got = await received()
      if (got >= expected) break
      if (now() > deadline) {
        timedOut = true
        break
      }
      if (now() - labelledAt > 1_000) {
        await labelAll()
        labelledAt = now()
      }
      const next = plan[faults.length]
      if (
        next !== undefined && got >= next.share * expected && now() >= quietFrom + options.gapSeconds * 1_000 &&
        got > receivedAtQuiet
      ) {
        faults.push(
          next.kind === "kill"
            ? await kill(faults.length, got)
            : next.kind === "crash"
            ? await crash(faults.length, got)
            : await loseReply(faults.length, got)
        )
        quietFrom = now()
        receivedAtQuiet = await received()
        continue
      }
      await sleep(100)
    }
    // Every id has arrived; what a fault left unrecorded is sent again once its lease runs out: wait until nothing is left.
    const cursor = await query<{ v: boolean }>("SELECT to_regclass('undispatched_events') IS NOT NULL AS v").then(
      (row) => row.v,
      () => true
    )
    while (!timedOut) {
      const left = await query<{ left: number }>(undispatched(LEFT, cursor)).then((row) => row.left, (error) => {
        console.log(`  (${error instanceof Error ? error.message : String(error)}; asking again)`)
        return -1
      })
      if (left === 0) break
      if (now() > deadline) {
        timedOut = true
        break
      }
      await sleep(2_000)
    }
    const drainSeconds = (now() - drainStart) / 1_000
    // Late repeats, if any, arrive too.
    await sleep(2_000)
    await labelAll()
    const ids = events.map((e) => e.id)
    const { paths: report, byProcess } = await receiver.call<Report>("report", { paths: endpoints, ids })
    const repeats = Object.fromEntries(endpoints.map((route) => [route, report[route]!.repeated]))
    const t = tally(faults, repeats)
    for (const fault of faults) {
      const pauses = endpoints.flatMap((route) => report[route]!.pauses)
        .filter(([from]) => from >= fault.at - 1_000 && from <= fault.until)
      fault.pauseMs = Math.round(Math.max(0, ...pauses.map(([from, to]) => to - from)))
    }
    // The records (RECORDS): on the embedded database with svc stopped, as the data folder has one owner.
    let records: Records | undefined
    let recordsError: string | undefined
    try {
      if (database.offline) await procs[0]!.stop()
      const reader = await database.connect()
      try {
        records = (await reader.query<Records>(undispatched(RECORDS, cursor))).rows[0]!
        if (!database.offline) {
          await reader.query("SET enable_seqscan = off")
          records.view_delivered = (await reader.query<{ n: number }>(VIEW_DELIVERED)).rows[0]!.n
        }
      } finally {
        await reader.end()
      }
    } catch (error) {
      recordsError = error instanceof Error ? error.message : String(error)
    }
    const lost = endpoints.reduce((n, route) => n + report[route]!.missingCount, 0)
    return {
      checkout: checkout.label,
      database: kind,
      processes,
      events: options.events,
      endpoints: options.endpoints,
      expected,
      seconds: Math.round((now() - started) / 1_000),
      drainSeconds: Math.round(drainSeconds),
      faults: faults.map((f, i) => ({ ...f, ...t.faults[i]! })),
      plannedFaults: plan.length,
      receipts: endpoints.reduce((n, route) => n + report[route]!.receipts, 0),
      byProcess,
      lost,
      missing: Object.fromEntries(
        endpoints.filter((r) => report[r]!.missingCount > 0).map((r) => [r, report[r]!.missing])
      ),
      duplicates: t.total,
      outside: t.outside,
      kills: summarize("kill", faults, t, PER_ENDPOINT),
      crashes: summarize("crash", faults, t, PER_ENDPOINT),
      replies: summarize("reply", faults, t, PER_ENDPOINT),
      records,
      recordsError,
      timedOut,
      logs
    }
  } finally {
    await Promise.all(procs.map((proc) => proc.stop()))
    await receiver.stop()
    await dropper?.close()
    await database.drop()
  }
}

// Interrupted: exit, so that svc processes are killed (support/svc.ts) and the receiver sees its stdin close.
for (const signal of ["SIGINT", "SIGTERM"] as const) process.once(signal, () => process.exit(130))

const startedAt = new Date()
const checkouts = svcCheckouts()
const tls = await makeTestTls()
const logDir = mkdtempSync(path.join(tmpdir(), "svc-faults-logs-"))
const machine = {
  cpus: `${cpus().length} × ${cpus()[0]?.model ?? "?"}`,
  memoryGb: Math.round(totalmem() / 2 ** 30),
  node: process.version,
  postgres: postgresBin === undefined
    ? undefined
    : execFileSync(`${postgresBin}/postgres`, ["--version"], { encoding: "utf8" }).trim(),
  loadavgAtStart: loadavg().map((n) => n.toFixed(2)).join(" ")
}
const checkoutInfo = await Promise.all(checkouts.map(async (c) => ({ ...c, commit: await describeCheckout(c.dir) })))
console.log(
  `svc fault study on ${machine.cpus}, load ${machine.loadavgAtStart}; seed ${options.seed}; svc logs in ${logDir}`
)
for (const c of checkoutInfo) console.log(`  ${c.label}: ${c.dir} (${c.commit})`)

const studies: Array<Study | { checkout: string; database: Kind; error: string }> = []
for (const checkout of checkouts) {
  for (const kind of databases) {
    console.log(`\n== ${checkout.label} on ${kind === "pglite" ? "embedded PGlite" : "a PostgreSQL server of its own"}`)
    try {
      const study = await runStudy(checkout, kind, tls, logDir)
      studies.push(study)
      console.table(study.faults.map((f) => ({
        fault: `${f.kind} #${f.index}${f.victim === undefined ? "" : ` (process ${f.victim})`}`,
        "at %": round(f.receivedBefore / study.expected * 100),
        "being answered": f.answering,
        "last second": f.lastSecond,
        "down/restart ms": f.downMs ?? f.restartMs ?? "",
        "pause s": round((f.pauseMs ?? 0) / 1_000, 1),
        duplicates: f.duplicates,
        "worst endpoint": f.worstEndpoint,
        bound: boundPerEndpoint(f.kind, PER_ENDPOINT),
        "last repeat s": round(f.lastRepeatMs / 1_000, 1)
      })))
      const line = (name: string, s: KindSummary) =>
        `${name}: ${s.faults}, ${s.duplicates} duplicates; per fault worst ${s.worstPerFault}, mean ${
          round(s.meanPerFault, 1)
        }; per fault and endpoint worst ${s.worstPerEndpoint} (bound ${s.boundPerEndpoint}${
          s.overBound > 0 ? `, EXCEEDED by ${s.overBound} fault(s)` : ""
        })`
      console.log(
        `  ${study.expected} deliveries in ${study.drainSeconds} s, ${study.receipts} requests received; lost ${study.lost}; duplicates ${study.duplicates} (${
          round(study.duplicates / study.expected * 100, 3)
        } %)`
      )
      console.log(`  received by process: ${Object.entries(study.byProcess).map(([p, n]) => `${p} ${n}`).join(", ")}`)
      console.log(`  ${line("kills", study.kills)}`)
      if (kind === "postgres") console.log(`  ${line("crashes", study.crashes)}`)
      if (study.replies.faults > 0) console.log(`  ${line("lost replies", study.replies)}`)
      if (study.outside.length > 0) console.log(`  REPEATS WITH NO FAULT BEFORE THEM: ${study.outside.length}`)
      if (study.faults.length < study.plannedFaults) {
        console.log(`  ${study.plannedFaults - study.faults.length} planned fault(s) not made: the drain ended first`)
      }
      const r = study.records ?? ({ total: NaN, delivered: NaN } as unknown as Records)
      if (study.recordsError !== undefined) console.log(`  RECORDS NOT READ: ${study.recordsError}`)
      else {console.log(
          `  records: ${r.delivered} of ${r.total} delivered (${
            JSON.stringify(r.by_status)
          }), ${r.pairs} event × endpoint pairs, ${r.undispatched} events undispatched; attempts ${r.attempts} (${r.attempt_records} attempt records), ${r.rows_written} rows written; targets' counts undelivered ${r.undelivered}, pending ${r.log_pending}, in flight ${r.log_in_flight}; seqs in two outcome rows ${r.seqs_in_two_outcomes}${
            r.view_delivered === undefined ? "" : `; delivery_records says ${r.view_delivered} delivered`
          }`
        )}
      if (r.failed_attempts != null) {
        console.log(
          `  failed attempts: ${
            JSON.stringify(r.failed_attempts)
          }; endpoints' consecutive failures at the end ${r.consecutive_failures}`
        )
      }
      if (study.timedOut) console.log("  TIMED OUT before every delivery was recorded")
      if (
        study.lost > 0 ||
        (study.records !== undefined &&
          (r.delivered !== study.expected || r.total !== study.expected ||
            (r.view_delivered ?? r.delivered) !== study.expected))
      ) {
        console.log(
          `  LOSS: ${study.lost} never received; records delivered ${r.delivered} of ${study.expected}; missing, by endpoint, e.g. ${
            JSON.stringify(Object.fromEntries(Object.entries(study.missing).map(([e, ids]) => [e, ids.slice(0, 3)])))
          } (all in the JSON, at most 100 per endpoint)`
        )
      }
    } catch (error) {
      const message = error instanceof Error ? (error.stack ?? error.message) : String(error)
      studies.push({ checkout: checkout.label, database: kind, error: message })
      console.log(`  FAILED: ${message}`)
    }
  }
}

const finished = new Date()
const out = path.join(REPO, "bench-results")
mkdirSync(out, { recursive: true })
const file = path.join(out, `faults-${startedAt.toISOString().replace(/[:.]/g, "-")}.json`)
writeFileSync(
  file,
  JSON.stringify(
    {
      started: startedAt.toISOString(),
      seconds: Math.round((finished.getTime() - startedAt.getTime()) / 1000),
      options: { ...options, databases, perEndpoint: PER_ENDPOINT },
      machine: { ...machine, loadavgAtEnd: loadavg().map((n) => n.toFixed(2)).join(" ") },
      checkouts: checkoutInfo,
      studies
    },
    null,
    2
  )
)
console.log(
  `\nwritten ${path.relative(process.cwd(), file)}; load average at the end ${
    loadavg().map((n) => n.toFixed(2)).join(" ")
  }`
)
process.exit(0)
