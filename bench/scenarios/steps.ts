/**
 * Governed steps: `POST /v1/agent-sessions/:id/steps` answered `allow`,
 * `allow` by the last of ten rules on arguments (`BENCH_RULES`: each
 * evaluated, weighed against `allow` without rules, aimed at 1.2x),
 * `reject`, `pending` (an approval, its outbox event, the session's and the
 * organization's stream events) and `pending` with one subscribed webhook
 * endpoint (the fan-out and the delivery to a receiver on loopback, waited
 * for inside the measurement), beside the cheapest authenticated write
 * (`POST /v1/agent-sessions`) of the same process as the yardstick. Then
 * the same after 10 000 and 100 000 earlier steps (bulk-inserted history:
 * sessions, steps, decided approvals, their events and stream rows), to
 * show the cost does not grow with the data (`BENCH_STEPS_LEVELS=0,100000`
 * chooses the levels; the aims hold each level's allowed and pending step
 * to 1.2x their cost at the first). With the endpoint subscribed,
 * also the time from a lone pending step's request to its webhook's
 * receipt, one step at a time with nothing else running (the first receipt
 * of an event svc records while it runs, on both databases alike).
 *
 * Every checkout in `BENCH_SVC_DIR` runs at once, each on its own fresh
 * database, and the measurements alternate between them (A/B in one run,
 * under the same machine load). Each measurement: warm-up, then the
 * measured requests over 16 keep-alive connections spread over 16 sessions.
 *
 * The history is written while svc is stopped (on the embedded database
 * the data folder has one owner), so svc starts afresh at each level, on
 * both databases alike, and first serves a warm-up pass of every kind: the
 * figures are those of a process V8 has compiled, not of its first few
 * hundred requests. (Until this pass existed, the embedded svc was also
 * restarted after every measurement, to count the steps, and measured
 * after 300 requests of a fresh process, against a server svc that had
 * served thousands: see bench/notes/embedded.md, "The embedded database
 * against the server, per unit of work".)
 *
 * At each level, once svc's measurements are done, the Effect floor
 * (`baselines/effect-floor.ts`: Effect HttpApi and `@effect/sql-pg`, nothing
 * of svc) serves the first checkout's database while that svc is stopped:
 * the cheapest write and a step written as a pending one is (the step's
 * INSERT and its approval's, no policy, no events), with the same warm-up
 * pass and measurements, so svc's CPU per request reads as a ratio of the
 * floor's. The bare server has no step route and is not measured here.
 */
import * as path from "node:path"
import { cpuRatio, startBaseline } from "../support/baselines.ts"
import { spawnChild } from "../support/child.ts"
import { formatPerOp, measureCpu, meterOf, perOp, threadsMeterOf, v8HelpersOf } from "../support/cpu.ts"
import { type BenchClient, type BenchDatabase, freshDatabase } from "../support/db.ts"
import type { LoadResult, LoadSpec } from "../support/load.ts"
import type { Receipts } from "../support/receiver.ts"
import { type Aim, atMost, type BenchContext, type ScenarioResult } from "../support/scenario.ts"
import { percentile, round, sorted } from "../support/stats.ts"
import { apiOn, startSvc, type SvcProcess } from "../support/svc.ts"
import { formatWorkPerOp, type Work, WORK_NOTE } from "../support/work.ts"

const KINDS = ["session write", "allow", "allow by the 10th rule", "reject", "pending", "pending + endpoint"] as const
type Kind = (typeof KINDS)[number]
/** What the Effect floor serves: the cheapest write, and a step as a pending one is written. */
const FLOOR_KINDS = ["session write", "pending"] as const satisfies ReadonlyArray<Kind>

const CLASS: Record<Exclude<Kind, "session write">, string> = {
  allow: "bench.allow",
  "allow by the 10th rule": "bench.rules",
  reject: "bench.reject",
  pending: "bench.ask",
  "pending + endpoint": "bench.ask"
}

/**
 * A realistic rule list for the `allow by the 10th rule` kind: ten rules over the
 * step's tool and arguments, the first nine of which do not hold for the
 * measured step (`shell` in `/srv`), the tenth allows it. Every rule is
 * evaluated for it, so the kind weighs the rules against `allow` (no rules).
 */
export const BENCH_RULES = [
  ["refund-huge", `tool == "stripe.refund" && arguments.amount > 5000.0`, {
    decision: "reject",
    reason: "Refunds above 5 000 go through finance."
  }],
  ["refund-small", `tool == "stripe.refund" && arguments.amount <= 100.0`, { decision: "allow" }],
  ["shell-rm", `tool == "shell" && arguments.command.startsWith("rm ")`, {
    decision: "reject",
    reason: "No deletions from the shell."
  }],
  ["shell-sudo", `tool == "shell" && arguments.command.contains("sudo")`, {
    decision: "require_approval",
    review_seconds: 600,
    expiring_notice_seconds: 60,
    timeout_action: "reject"
  }],
  ["shell-etc", `tool == "shell" && arguments.cwd.startsWith("/etc")`, {
    decision: "require_approval",
    review_seconds: 600,
    expiring_notice_seconds: 60,
    timeout_action: "reject",
    quorum: 2
  }],
  ["shell-pipe", `tool == "shell" && arguments.command.contains("| sh")`, {
    decision: "reject",
    reason: "No piping into a shell."
  }],
  ["mail-many", `tool in ["email.send", "slack.post"] && size(arguments.to) > 10`, {
    decision: "require_approval",
    review_seconds: 600,
    expiring_notice_seconds: 60,
    timeout_action: "reject"
  }],
  ["db-drop", `tool == "db.query" && arguments.sql.contains("DROP")`, {
    decision: "reject",
    reason: "No schema changes."
  }],
  ["blocked-session", `session.id == "00000000-0000-4000-8000-000000000001"`, {
    decision: "reject",
    reason: "This session is blocked."
  }],
  ["shell-srv", `tool == "shell" && arguments.cwd.startsWith("/srv")`, { decision: "allow" }]
].map(([name, condition, result]) => ({ name: name as string, condition: condition as string, result }))

const UNIQUE = "@STEP@"
const SESSIONS = 16
const TIMEOUT_MS = 300_000

/**
 * `BENCH_STEPS_LEVELS` (e.g. `0,100000`): the earlier steps to measure at,
 * instead of the size's own (so a quick run can weigh flatness at 100 000).
 */
const levelsOf = (own: ReadonlyArray<number>) => {
  const given = (process.env.BENCH_STEPS_LEVELS ?? "").split(",").filter((s) => s.trim() !== "").map(Number)
  if (given.some((n) => !Number.isInteger(n) || n < 0)) {
    throw new Error("BENCH_STEPS_LEVELS: earlier steps, whole numbers, comma-separated")
  }
  return given.length === 0 ? own : [...given].sort((a, b) => a - b)
}

const sizesOf = (quick: boolean) =>
  quick
    ? { warmPass: 200, warmup: 100, requests: 500, concurrency: 16, levels: levelsOf([0, 2_000]), lone: 10 }
    : {
      warmPass: 1_500,
      warmup: 500,
      requests: 2_000,
      concurrency: 16,
      levels: levelsOf([0, 10_000, 100_000]),
      lone: 40
    }

/** What a measurement needs of the server it drives: svc, or the Effect floor. */
type Served = Pick<SvcProcess, "pid" | "baseUrl" | "meter" | "api" | "stop">

interface Arm {
  readonly label: string
  svc: Served
  readonly start: () => Promise<Served>
  readonly database: BenchDatabase
  readonly key: string
  readonly orgId: string
  bulk: number
  /** Steps in the database: counted when the history grows, then the steps this arm sent since. */
  steps: number
}

/**
 * Runs `f` with a client of the arm's database while svc is stopped (the
 * embedded data folder has one owner; on a server svc is stopped too, so
 * that both databases' processes start afresh at the same points), then
 * starts svc again.
 */
const withClient = async <A>(arm: Arm, f: (client: BenchClient) => Promise<A>): Promise<A> => {
  await arm.svc.stop()
  const client = await arm.database.connect()
  try {
    return await f(client)
  } finally {
    await client.end()
    arm.svc = await arm.start()
  }
}

/**
 * Adds `count` earlier steps (10 per session, every other one with a
 * decided approval, its dispatched outbox event and its stream row) in a
 * few statements, on the schema of either checkout, and counts the steps.
 */
const grow = (arm: Arm, count: number) =>
  withClient(arm, async (c) => {
    if (count > 0) await growWith(arm, c, count)
    arm.steps = Number((await c.query<{ n: string }>("SELECT count(*)::text AS n FROM agent_steps")).rows[0]!.n)
  })

const growWith = async (arm: Arm, c: BenchClient, count: number) => {
  const sessions = Math.ceil(count / 10)
  await c.query("BEGIN")
  await c.query("CREATE TEMP TABLE IF NOT EXISTS bench_grow (id uuid, i int) ON COMMIT DROP")
  await c.query("INSERT INTO bench_grow SELECT gen_random_uuid(), g FROM generate_series(1, $1::int) g", [sessions])
  await c.query("INSERT INTO agent_sessions (id, org_id, event_seq) SELECT id, $1, 10 FROM bench_grow", [arm.orgId])
  await c.query(
    `
    INSERT INTO agent_steps (session_id, step_id, org_id, tool, action_class, arguments, decision, approval_id, resolution)
    SELECT g.id, 'h' || k, $1, 'bench', CASE WHEN k % 2 = 1 THEN 'bench.ask' ELSE 'bench.allow' END, '{"n":1}'::jsonb,
      CASE WHEN k % 2 = 1 THEN 'pending' ELSE 'allow' END,
      CASE WHEN k % 2 = 1 THEN md5(g.id::text || k)::uuid END, 'allow'
    FROM bench_grow g, generate_series(1, 10) k
  `,
    [arm.orgId]
  )
  await c.query(`
    INSERT INTO approvals (id, org_id, session_id, step_id, status, deadline_at, expires_at, timeout_action, decided_at, decided_by)
    SELECT approval_id, org_id, session_id, step_id, 'approved', now(), now(), 'reject', now(), 'bench'
    FROM agent_steps WHERE approval_id IS NOT NULL AND session_id IN (SELECT id FROM bench_grow)
  `)
  await c.query(`
    INSERT INTO events (id, org_id, type, occurred_at, body, label, dispatched_at)
    SELECT gen_random_uuid(), org_id, 'approval.approved', now(), '{}', 'approval.approved ' || approval_id, now()
    FROM agent_steps WHERE approval_id IS NOT NULL AND session_id IN (SELECT id FROM bench_grow)
  `)
  // Dispatched: where the schema has the dispatch cursor (migration 0720), moved past them.
  if (
    (await c.query<{ exists: boolean }>("SELECT to_regclass('event_dispatch') IS NOT NULL AS exists")).rows[0]!.exists
  ) {
    await c.query(
      "UPDATE event_dispatch SET (writer, seq) = (SELECT writer, seq FROM events WHERE writer IS NOT NULL ORDER BY writer DESC, seq DESC LIMIT 1)"
    )
  }
  await c.query(
    `
    INSERT INTO session_events (session_id, seq, org_id, name, data)
    SELECT g.id, k, $1, 'step:governed', '{}' FROM bench_grow g, generate_series(1, 10) k
  `,
    [arm.orgId]
  )
  // The stream rows: numbered after the counter where the schema keeps one, else below every transaction-numbered id.
  const counter =
    (await c.query<{ exists: boolean }>("SELECT to_regclass('approval_stream_counters') IS NOT NULL AS exists"))
      .rows[0]!.exists
  const base = counter
    ? Number(
      (await c.query<{ seq: string | null }>(
        "SELECT max(seq)::text AS seq FROM approval_stream_counters WHERE org_id = $1",
        [arm.orgId]
      )).rows[0]?.seq ?? 0
    )
    : arm.bulk
  await c.query(
    `
    INSERT INTO approval_stream_events (org_id, seq, name, data)
    SELECT $1, $2::bigint + row_number() OVER (), 'approval.approved', '{}'
    FROM agent_steps WHERE approval_id IS NOT NULL AND session_id IN (SELECT id FROM bench_grow)
  `,
    [arm.orgId, base]
  )
  const added = sessions * 5
  if (counter) {
    await c.query(
      `
      INSERT INTO approval_stream_counters (org_id, seq) VALUES ($1, $2)
      ON CONFLICT (org_id) DO UPDATE SET seq = EXCLUDED.seq
    `,
      [arm.orgId, base + added]
    )
  }
  arm.bulk += added
  await c.query("COMMIT")
  await c.query("ANALYZE")
}

interface Measured {
  readonly kind: Kind
  readonly arm: string
  readonly level: number
  readonly steps: number
  readonly requests: number
  readonly seconds: number
  readonly errors: number
  readonly firstError?: string | undefined
  readonly latencies: ReadonlyArray<number>
  readonly cpu: Record<string, number>
  readonly work: Record<string, Work | undefined>
}

/** Lone pending steps: ms from each step's request to its webhook's receipt. */
interface Lone {
  readonly arm: string
  readonly level: number
  readonly ms: ReadonlyArray<number>
}

export default async (context: BenchContext): Promise<ScenarioResult> => {
  const size = sizesOf(context.quick)
  const receiver = await spawnChild("receiver", new URL("../support/receiver.ts", import.meta.url), {
    BENCH_TLS_CERT: context.tls.cert,
    BENCH_TLS_KEY: context.tls.key
  })
  const load = await spawnChild("load", new URL("../support/load.ts", import.meta.url))
  const arms: Array<Arm> = []
  const results: Array<Measured> = []
  const lones: Array<Lone> = []
  try {
    const receiverUrl = await receiver.call<string>("url")
    for (const checkout of context.checkouts) {
      const database = await freshDatabase(context.database, `steps_${checkout.label}`)
      const start = () =>
        startSvc(checkout, database, {
          SVC_ALLOWED_TARGET_CIDRS: "127.0.0.0/8",
          SVC_EXTRA_CA_FILE: context.tls.caFile
        }, path.join(context.logDir, `steps-${checkout.label}-${context.database}.log`))
      const svc = await start()
      const { orgId, key } = await svc.provision()
      const policy = (mode: string) => ({
        mode,
        review_seconds: 3600,
        expiring_notice_seconds: 60,
        timeout_action: "reject"
      })
      await svc.api(key, "PUT", "/v1/approval-policies/bench.allow", policy("allow"))
      // The class's own settings would ask a person: only the last rule allows the measured step.
      await svc.api(key, "PUT", "/v1/approval-policies/bench.rules", {
        ...policy("require_approval"),
        rules: BENCH_RULES
      })
      await svc.api(key, "PUT", "/v1/approval-policies/bench.reject", policy("reject"))
      await svc.api(key, "PUT", "/v1/approval-policies/bench.ask", policy("require_approval"))
      arms.push({ label: checkout.label, svc, start, database, key, orgId, bulk: 0, steps: 0 })
    }

    /** Runs `count` requests of `kind` on `arm` (steps spread over `sessions`), counting the steps it adds. */
    const run = async (arm: Arm, kind: Kind, sessions: ReadonlyArray<string>, count: number) => {
      const ran = await load.call<LoadResult>("run", specOf(arm, kind, sessions, count))
      if (kind !== "session write") arm.steps += count - ran.errors
      return ran
    }

    const newSessions = async (arm: Arm) => {
      const sessions: Array<string> = []
      for (let i = 0; i < SESSIONS; i++) {
        sessions.push((await arm.svc.api<{ id: string }>(arm.key, "POST", "/v1/agent-sessions", {})).id)
      }
      return sessions
    }

    /** After a start: every kind but the webhook one (which warms itself), so the first kind measured is as warm as the last. */
    const warm = async (arm: Arm) => {
      const sessions = await newSessions(arm)
      for (const kind of KINDS) if (kind !== "pending + endpoint") await run(arm, kind, sessions, size.warmPass)
    }

    const specOf = (arm: Arm, kind: Kind, sessions: ReadonlyArray<string>, count: number): LoadSpec => {
      const headers = { authorization: `Bearer ${arm.key}`, "content-type": "application/json" }
      return kind === "session write"
        ? {
          url: `${arm.svc.baseUrl}/v1/agent-sessions`,
          method: "POST",
          headers,
          bodies: ["{}"],
          count,
          concurrency: size.concurrency,
          expectStatus: 201
        }
        : {
          url: "",
          urls: sessions.map((id) => `${arm.svc.baseUrl}/v1/agent-sessions/${id}/steps`),
          method: "POST",
          headers,
          bodies: [
            JSON.stringify({
              step_id: UNIQUE,
              tool: "shell",
              action_class: CLASS[kind],
              arguments: { command: "ls -la /srv/app", cwd: "/srv" }
            })
          ],
          unique: UNIQUE,
          count,
          concurrency: size.concurrency,
          expectStatus: 200
        }
    }

    const measure = async (arm: Arm, kind: Kind, level: number) => {
      const sessions = await newSessions(arm)
      const route = `/steps-${arm.label}-${context.database}-${level}`
      let endpoint: string | undefined
      if (kind === "pending + endpoint") {
        endpoint = (await arm.svc.api<{ endpoint: { id: string } }>(arm.key, "POST", "/v1/notification-endpoints", {
          url: `${receiverUrl}${route}`,
          events: ["approval.requested"]
        })).endpoint.id
      }
      try {
        await receiver.call("reset", { path: route })
        await run(arm, kind, sessions, size.warmup)
        if (endpoint !== undefined) {
          await receiver.call<Receipts>("wait", { path: route, count: size.warmup, timeoutMs: TIMEOUT_MS })
        }
        await receiver.call("reset", { path: route })
        // On the embedded database, svc's worker threads (PGlite; steps use no validation worker) are shown apart as well,
        // and on both V8's helper threads (garbage collection mostly), so the main thread's share can be read.
        const meters = [
          arm.svc.meter,
          ...(arm.database.kind === "pglite"
            ? [threadsMeterOf("of which db thread", arm.svc.pid, "WorkerThread")]
            : []),
          v8HelpersOf("of which v8 helpers", arm.svc.pid),
          meterOf("load", load.pid),
          ...(arm.database.meter ? [arm.database.meter] : [])
        ]
        const { result, cpu, work } = await measureCpu(meters, async () => {
          const ran = await run(arm, kind, sessions, size.requests)
          // The webhook deliveries of the measured steps belong to their cost.
          if (endpoint !== undefined) {
            await receiver.call<Receipts>("wait", { path: route, count: size.requests, timeoutMs: TIMEOUT_MS })
          }
          return ran
        })
        results.push({
          kind,
          arm: arm.label,
          level,
          steps: arm.steps,
          requests: size.requests,
          seconds: result.seconds,
          errors: result.errors,
          firstError: result.firstError,
          latencies: result.latencies,
          cpu,
          work
        })
        if (endpoint !== undefined) lones.push({ arm: arm.label, level, ms: await loneSteps(arm, sessions[0]!, route) })
      } finally {
        if (endpoint !== undefined) await arm.svc.api(arm.key, "DELETE", `/v1/notification-endpoints/${endpoint}`)
      }
    }

    /** One pending step at a time: from its request to its webhook's receipt (epoch ms on both sides, one machine). */
    const loneSteps = async (arm: Arm, session: string, route: string) => {
      const ms: Array<number> = []
      for (let i = 0; i < size.lone; i++) {
        await receiver.call("reset", { path: route })
        const sent = performance.timeOrigin + performance.now()
        await arm.svc.api(arm.key, "POST", `/v1/agent-sessions/${session}/steps`, {
          step_id: `lone-${route}-${i}`,
          tool: "shell",
          action_class: CLASS.pending,
          arguments: { command: "ls -la /srv/app", cwd: "/srv" }
        })
        const receipts = await receiver.call<Receipts>("wait", { path: route, count: 1, timeoutMs: TIMEOUT_MS })
        ms.push(receipts.first - sent)
      }
      return ms
    }

    /**
     * The Effect floor on the first arm's database at `level` (that svc
     * stopped meanwhile): the warm-up pass of its kinds, then each measured
     * twice, the second round in the reverse order, as svc's are.
     */
    const measureFloor = async (level: number) => {
      const arm = arms[0]!
      await arm.svc.stop()
      const child = await startBaseline("floor", arm.database, arm.key)
      try {
        const baseUrl = await child.call<string>("url")
        const floor: Arm = {
          label: "floor",
          svc: {
            pid: child.pid,
            baseUrl,
            meter: meterOf("floor", child.pid),
            api: apiOn(baseUrl),
            stop: () => child.call("close")
          },
          start: () => Promise.reject(new Error("the floor is started by measureFloor")),
          database: arm.database,
          key: arm.key,
          orgId: arm.orgId,
          bulk: arm.bulk,
          steps: arm.steps
        }
        const sessions = await newSessions(floor)
        for (const kind of FLOOR_KINDS) await run(floor, kind, sessions, size.warmPass)
        for (const order of [FLOOR_KINDS, [...FLOOR_KINDS].reverse()]) {
          for (const kind of order) await measure(floor, kind, level)
        }
        arm.steps = floor.steps
        await floor.svc.stop()
      } finally {
        await child.stop()
        arm.svc = await arm.start()
      }
    }

    let grown = 0
    for (const level of size.levels) {
      for (const arm of arms) await grow(arm, level - grown)
      for (const arm of arms) await warm(arm)
      grown = level
      // Two rounds, the second in the reverse order: the kind measured
      // first after a kind of another shape pays V8's recompiling of the
      // request path for it (its helper threads' CPU about doubles: allow
      // measured right after the cheapest write cost 1.6-2.2x it, right
      // after reject 1.2-1.4x), so each kind's figure is the mean of both
      // rounds, and the yardstick pays that once as the aimed kinds do.
      for (const order of [KINDS, [...KINDS].reverse()]) {
        for (const kind of order) {
          for (const arm of arms) await measure(arm, kind, level)
        }
      }
      await measureFloor(level)
    }
  } finally {
    for (const arm of arms) {
      await arm.svc.stop()
      await arm.database.drop()
    }
    await load.stop()
    await receiver.stop()
  }

  const rows = results.map((r) => {
    const latencies = sorted(r.latencies)
    return {
      "earlier steps (bulk)": r.level,
      "steps in db": r.steps,
      kind: r.kind,
      arm: r.arm,
      "req/s": round(r.requests / r.seconds),
      "p50 ms": round(percentile(latencies, 0.5), 2),
      "p99 ms": round(percentile(latencies, 0.99), 2),
      "CPU µs/req": formatPerOp(perOp(r.cpu, r.requests)),
      "work/req": formatWorkPerOp(r.work, r.requests),
      errors: r.errors === 0 ? 0 : `${r.errors} (${r.firstError})`
    }
  })
  const loneRows = lones.map((l) => {
    const ms = sorted(l.ms)
    return {
      "earlier steps (bulk)": l.level,
      kind: "lone pending step → its webhook received",
      arm: l.arm,
      "p50 ms": round(percentile(ms, 0.5), 1),
      "p95 ms": round(percentile(ms, 0.95), 1),
      "max ms": round(ms[ms.length - 1] ?? Number.NaN, 1)
    }
  })
  /** svc's CPU per request without the db thread, the mean of the two rounds. */
  const svcCpu = (arm: string, kind: Kind, level: number) => {
    const rounds = results.filter((m) => m.arm === arm && m.kind === kind && m.level === level)
    if (rounds.length === 0) return Number.NaN
    const per = rounds.map((r) => ((r.cpu[arm] ?? Number.NaN) - (r.cpu["of which db thread"] ?? 0)) / r.requests)
    return per.reduce((a, b) => a + b, 0) / per.length
  }
  /** The server process's CPU per request (all its threads, or without its database thread), the mean of the two rounds. */
  const serverCpu = (arm: string, kind: Kind, level: number, withoutDb = false) => {
    const rounds = results.filter((m) => m.arm === arm && m.kind === kind && m.level === level)
    const per = (r: Measured) =>
      ((r.cpu[arm] ?? Number.NaN) - (withoutDb ? (r.cpu["of which db thread"] ?? 0) : 0)) / r.requests
    return rounds.length === 0 ? Number.NaN : rounds.reduce((sum, r) => sum + per(r), 0) / rounds.length
  }
  const overFloor = (arm: string, kind: Kind, floorKind: Kind, level: number) => {
    const all = cpuRatio(serverCpu(arm, kind, level), serverCpu("floor", floorKind, level))
    return context.database === "pglite"
      ? `${all} (${
        cpuRatio(serverCpu(arm, kind, level, true), serverCpu("floor", floorKind, level, true))
      } without the db thread)`
      : all
  }
  const floorRatios = context.checkouts.flatMap((c) =>
    size.levels.map((level) =>
      `${c.label} (${level} earlier): CPU per request over the Effect floor's, the server process with its threads: cheapest write ${
        overFloor(c.label, "session write", "session write", level)
      }, pending step ${overFloor(c.label, "pending", "pending", level)}, allowed step over the floor's pending one ${
        overFloor(c.label, "allow", "pending", level)
      }.`
    )
  )
  const aims: Array<Aim> = context.checkouts.flatMap((c) =>
    size.levels.flatMap((level) => [
      atMost(
        `${c.label} (${level} earlier): allow step / cheapest authenticated write, svc CPU`,
        round(svcCpu(c.label, "allow", level) / svcCpu(c.label, "session write", level), 2),
        1.5
      ),
      atMost(
        `${c.label} (${level} earlier): step allowed by the 10th of 10 rules / allowed without rules, svc CPU`,
        round(svcCpu(c.label, "allow by the 10th rule", level) / svcCpu(c.label, "allow", level), 2),
        1.2
      ),
      atMost(
        `${c.label} (${level} earlier): pending step, svc CPU`,
        round(svcCpu(c.label, "pending", level)),
        1000,
        "µs"
      ),
      // On PGlite the database is svc's own thread: the step's whole cost is svc's process.
      ...(context.database === "pglite"
        ? [
          atMost(
            `${c.label} (${level} earlier): pending step, svc CPU with the db thread`,
            round(serverCpu(c.label, "pending", level)),
            1000,
            "µs"
          )
        ]
        : []),
      // Flat: a step after the level's earlier steps costs what one with none did (the whole process, the mean of both rounds).
      ...(level === size.levels[0]
        ? []
        : (["allow", "pending"] as const).map((kind) =>
          atMost(
            `${c.label} (${level} earlier): ${kind} step's CPU over the same at ${
              size.levels[0]
            } earlier, svc's process with its threads`,
            round(serverCpu(c.label, kind, level) / serverCpu(c.label, kind, size.levels[0]!), 2),
            1.2
          )
        )),
      atMost(
        `${c.label} (${level} earlier): a lone pending step's webhook received, p50`,
        round(
          percentile(sorted(lones.filter((l) => l.arm === c.label && l.level === level).flatMap((l) => l.ms)), 0.5),
          1
        ),
        50,
        " ms"
      )
    ])
  )
  return {
    scenario: "steps",
    database: context.database,
    rows: [...rows, ...loneRows],
    aims,
    notes: [
      ...floorRatios,
      WORK_NOTE,
      "floor: the Effect floor (baselines/effect-floor.ts) on the first checkout's database, that svc stopped: the cheapest write, and as `pending` a step's INSERT and its approval's in one statement (no policy, no session, outbox or stream events, no webhook), after the same warm-up pass and warm-ups. On PGlite its database thread runs each statement through PGlite's `query` (the bare baseline's worker), svc's through its own prepared statements, so the ratio without the db thread compares the request paths.",
      `${size.requests} requests per measurement after ${size.warmup} warm-up, ${size.concurrency} connections over ${SESSIONS} sessions; each kind measured twice per level, the second round in the reverse order (the first kind after a kind of another shape pays V8's recompiling), the aims on the mean of both; the checkouts run at once and the measurements alternate between them. svc starts afresh at each level on both databases (the history is written while it is stopped) and first serves ${size.warmPass} requests of every kind but the webhook one.`,
      "pending + endpoint: the measurement waits for every webhook of the measured steps to reach the receiver, so svc's CPU includes the fan-out, the signing and the HTTPS POST.",
      `lone pending step: after that measurement, ${size.lone} steps one at a time, each timed from its request to its webhook's receipt at the receiver (the first receipt of an event svc records while it runs: the step's commit, the dispatcher's wakeup and fan-out, the worker's wakeup, claim and send).`,
      "CPU µs/req: each process's user+system CPU over the measured requests (/proc), divided by the requests; postgres = the server backends of the run's database; on PGlite, 'of which db thread' is the part of svc's figure spent in its worker threads (the embedded database); 'of which v8 helpers' is V8's helper threads (garbage collection and optimizing compilation, of the worker's isolate too). The aims compare svc's CPU without the db thread."
    ]
  }
}
