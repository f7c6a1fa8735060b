/**
 * The MCP gateway's added cost: an allowed `tools/call` through svc's
 * `/mcp` against the same call made straight to the upstream server.
 * The upstream (`support/mcp-upstream.ts`: the official SDK's server,
 * stateless, HTTPS on loopback) and the client (`support/mcp-client.ts`:
 * the official SDK's client, one session, calls one after another) are
 * processes of their own; svc is registered with the upstream as server
 * `up`, its `echo` tool governed as an action class whose policy allows.
 * Arms: `direct` (the client to the upstream), `bare` (the client to
 * the bare gateway, `baselines/mcp-proxy.ts`: the official SDK's server
 * and client and nothing else, the floor of any gateway built on them) and
 * `svc` (the client to svc's `/mcp`, svc to the upstream), each with a
 * fresh client, the same warm-up calls, then the measured calls; two
 * rounds, the second in reverse order. Reported: latency per call (p50,
 * p95, mean) per arm, the added latency (the bare gateway's and svc's
 * percentiles minus direct's, over both rounds), CPU
 * per call of every process, svc's statements per call, and the TLS
 * connections the upstream accepted per arm. Aim: added p50 ≤ 2 ms.
 * Checkouts of `BENCH_SVC_DIR` run one after another, each with a direct
 * arm of its own.
 */
import * as path from "node:path"
import { spawnChild } from "../support/child.ts"
import { formatPerOp, measureCpu, type Meter, meterOf, perOp } from "../support/cpu.ts"
import { freshDatabase } from "../support/db.ts"
import { atMost, type BenchContext, type ScenarioResult } from "../support/scenario.ts"
import { percentile, round, sorted } from "../support/stats.ts"
import { startSvc, type SvcCheckout } from "../support/svc.ts"
import { formatWorkPerOp, sumWork, type Work } from "../support/work.ts"

const ACTION_CLASS = "mcp.bench"

type Arm = "direct" | "bare" | "svc"
const ARMS: ReadonlyArray<Arm> = ["direct", "bare", "svc"]

const sizesOf = (quick: boolean) =>
  quick ? { warmup: 50, calls: 200, rounds: 1 } : { warmup: 300, calls: 1_000, rounds: 2 }

interface Measured {
  readonly latencies: ReadonlyArray<number>
  readonly cpu: Record<string, number>
  readonly work: Record<string, Work | undefined>
  readonly connections: number
}

const measureCheckout = async (context: BenchContext, checkout: SvcCheckout) => {
  const size = sizesOf(context.quick)
  const database = await freshDatabase(context.database, `mcp_${checkout.label}`)
  const tlsEnv = { BENCH_TLS_CERT: context.tls.cert, BENCH_TLS_KEY: context.tls.key }
  const upstream = await spawnChild("upstream", new URL("../support/mcp-upstream.ts", import.meta.url), tlsEnv)
  const log = path.join(context.logDir, `mcp-${checkout.label}-${context.database}.log`)
  const svc = await startSvc(checkout, database, {
    SVC_ALLOWED_TARGET_CIDRS: "127.0.0.0/8",
    SVC_EXTRA_CA_FILE: context.tls.caFile
  }, log)
  const disposers: Array<() => Promise<unknown>> = []
  try {
    const upstreamUrl = await upstream.call<string>("url")
    const bare = await spawnChild("bare gateway", new URL("../baselines/mcp-proxy.ts", import.meta.url), {
      NODE_EXTRA_CA_CERTS: context.tls.caFile
    })
    disposers.push(() => bare.stop())
    const bareUrl = await bare.call<string>("start", { upstream: upstreamUrl })
    const { orgId, key } = await svc.provision()
    const mcpKey = (await svc.cli<{ key: string }>("keys", "create", "--org", orgId, "--scopes", "mcp.use")).key
    await svc.api(key, "POST", "/v1/mcp-servers", { name: "up", url: upstreamUrl, default_action_class: ACTION_CLASS })
    await svc.api(key, "PUT", `/v1/approval-policies/${ACTION_CLASS}`, {
      mode: "allow",
      review_seconds: 600,
      expiring_notice_seconds: 0,
      timeout_action: "reject"
    })
    // The server's backends' CPU only: PostgreSQL's own counts need 10.5 s waits around each
    // measurement; svc's statements per call come from its /metrics.
    const postgres: ReadonlyArray<Meter> = database.meter === undefined
      ? []
      : [{ name: "postgres", pids: database.meter.pids }]

    const arm = async (name: Arm): Promise<Measured> => {
      const client = await spawnChild(`client ${name}`, new URL("../support/mcp-client.ts", import.meta.url), {
        NODE_EXTRA_CA_CERTS: context.tls.caFile
      })
      try {
        await client.call(
          "connect",
          name === "svc"
            ? { url: `${svc.baseUrl}/mcp`, key: mcpKey }
            : { url: name === "bare" ? bareUrl : upstreamUrl }
        )
        const tool = name === "direct" ? "echo" : "up__echo"
        const warm = await client.call<{ errors: number; firstError?: string }>("run", { tool, count: size.warmup })
        if (warm.errors > 0) throw new Error(`${name}: ${warm.errors} calls failed: ${warm.firstError}`)
        const connectionsBefore = await upstream.call<number>("connections")
        const meters: Array<Meter> = [
          ...(name === "svc" ? [svc.meter, ...postgres] : []),
          ...(name === "bare" ? [meterOf("bare gateway", bare.pid)] : []),
          meterOf("upstream", upstream.pid),
          meterOf("client", client.pid)
        ]
        const { result, cpu, work } = await measureCpu(
          meters,
          () =>
            client.call<{ latencies: Array<number>; errors: number; firstError?: string }>("run", {
              tool,
              count: size.calls
            })
        )
        if (result.errors > 0) throw new Error(`${name}: ${result.errors} calls failed: ${result.firstError}`)
        const connections = (await upstream.call<number>("connections")) - connectionsBefore
        await client.call("close")
        return { latencies: result.latencies, cpu, work, connections }
      } finally {
        await client.stop()
      }
    }

    const rows: Array<Record<string, string | number>> = []
    const byArm: Record<Arm, Array<Measured>> = { direct: [], bare: [], svc: [] }
    for (let r = 0; r < size.rounds; r++) {
      const order = r % 2 === 0 ? ARMS : [...ARMS].reverse()
      for (const name of order) {
        const measured = await arm(name)
        byArm[name].push(measured)
        const ascending = sorted(measured.latencies)
        rows.push({
          svc: checkout.label,
          arm: name,
          round: r + 1,
          calls: measured.latencies.length,
          "p50 ms": round(percentile(ascending, 0.5), 2),
          "p95 ms": round(percentile(ascending, 0.95), 2),
          "mean ms": round(ascending.reduce((a, b) => a + b, 0) / ascending.length, 2),
          "CPU µs/call": formatPerOp(perOp(measured.cpu, measured.latencies.length)),
          "work/call": name === "svc" ? formatWorkPerOp(measured.work, measured.latencies.length) : "-",
          "upstream TLS conns": measured.connections
        })
      }
    }
    const pooled = (name: Arm) => sorted(byArm[name].flatMap((m) => m.latencies))
    const direct = pooled("direct")
    const through = pooled("svc")
    const bareThrough = pooled("bare")
    const added = (p: number, arm = through) => round(percentile(arm, p) - percentile(direct, p), 2)
    const mean = (xs: ReadonlyArray<number>) => xs.reduce((a, b) => a + b, 0) / xs.length
    const bareCpu = byArm.bare.reduce((sum, m) => sum + (m.cpu["bare gateway"] ?? 0), 0)
    rows.push({
      svc: checkout.label,
      arm: "added by the bare gateway",
      round: "all",
      calls: bareThrough.length,
      "p50 ms": added(0.5, bareThrough),
      "p95 ms": added(0.95, bareThrough),
      "mean ms": round(mean(bareThrough) - mean(direct), 2),
      "CPU µs/call": `bare gateway ${Math.round(bareCpu / Math.max(1, bareThrough.length))}`,
      "work/call": "-",
      "upstream TLS conns": byArm.bare.reduce((sum, m) => sum + m.connections, 0)
    })
    const svcCalls = through.length
    const svcCpu = byArm.svc.reduce((sum, m) => sum + (m.cpu[checkout.label] ?? 0), 0)
    rows.push({
      svc: checkout.label,
      arm: "added by svc",
      round: "all",
      calls: svcCalls,
      "p50 ms": added(0.5),
      "p95 ms": added(0.95),
      "mean ms": round(mean(through) - mean(direct), 2),
      "CPU µs/call": `${checkout.label} ${Math.round(svcCpu / Math.max(1, svcCalls))}`,
      "work/call": formatWorkPerOp(sumWork(byArm.svc.map((m) => m.work)), svcCalls),
      "upstream TLS conns": byArm.svc.reduce((sum, m) => sum + m.connections, 0)
    })
    return {
      rows,
      aim: atMost(`${checkout.label}: latency an allowed tools/call adds, p50`, added(0.5), 2, " ms")
    }
  } finally {
    await svc.stop()
    for (const dispose of disposers) await dispose()
    await upstream.stop()
    await database.drop()
  }
}

export default async (context: BenchContext): Promise<ScenarioResult> => {
  const size = sizesOf(context.quick)
  const rows: Array<Record<string, string | number>> = []
  const aims = []
  // Checkouts one after another, each on a database of its own, each with its own direct arm.
  for (const checkout of context.checkouts) {
    const measured = await measureCheckout(context, checkout)
    rows.push(...measured.rows)
    aims.push(measured.aim)
  }
  return {
    scenario: "mcp",
    database: context.database,
    rows,
    aims,
    notes: [
      `Per arm: a fresh client process, ${size.warmup} warm-up calls, then ${size.calls} calls one after another, timed in the client; ${size.rounds} round(s), the second in reverse order. Added = svc's percentile minus direct's over all rounds' calls.`,
      "CPU µs/call: user + system time of each process over the measured calls (svc's embedded database counts as svc's; postgres = the server's backends of the run's database). work/call: svc's own statement counts from its /metrics (PostgreSQL's counts are left out: they need 10.5 s waits).",
      "upstream TLS conns: TLS connections the upstream server accepted during the measured calls (the direct client keeps one alive)."
    ]
  }
}
