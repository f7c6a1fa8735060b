/**
 * The delivery engine's scale curves: does svc's cost per delivery stay
 * flat as the backlog grows and as the endpoints multiply?
 *
 * - Backlog: 16 endpoints of one organization, each event delivered to all
 *   16 (the queue study's shape, `bench/sql/queue-study.ts`), drained from
 *   a backlog of 1 024 and of 100 000 deliveries. The bare undici sender
 *   and, on the server, graphile-worker (jobs added in one transaction)
 *   drain the same numbers, so the machine's own curve is in the same run.
 * - Endpoints: 20 000 deliveries to one endpoint, and to 1 000 endpoints
 *   over 200 organizations (5 each, each subscribed to one approval event
 *   type, events taking the types in turn: one delivery per event in both
 *   arms, so the dispatcher's work per delivery is the same and what
 *   differs is the number of targets the claim and the sender work over).
 *   The 1 000 endpoints are hosts of their own (each organization's five at
 *   127.0.0.1-5, svc keeping a pool per organization and host), so svc
 *   opens connections and pays handshakes as it would to distinct
 *   receivers; the bare sender drains both points too, with a pool per
 *   endpoint at the same hosts, so it pays the same handshakes. The
 *   receiver closes a connection idle for 5 s (Node's default), and the
 *   table counts the connections it accepted in each measured drain: a
 *   sender that comes back to an endpoint later than that pays a handshake
 *   per delivery.
 *
 * Every svc arm is run as in `webhooks`: svc as its own process on a fresh
 * database, the HTTPS receiver its own process, a warm-up drain of the same
 * size for every arm, then the backlog committed to the outbox in one
 * transaction (on the embedded database while svc is stopped) and one
 * governed step through the API that wakes the dispatcher. The dispatcher's
 * fan-out (events into deliveries) is included in the measured CPU, svc's
 * and PostgreSQL's backends' (`support/webhooks.ts` says how). Checkouts
 * from `BENCH_SVC_DIR` alternate: at each point of a curve they run in turn,
 * in reverse order at every other point.
 *
 * Aims (the delivery engine's, docs/performance.md): CPU per delivery at the
 * 100k backlog within 1.2x of the 1k backlog's, and with 1 000 endpoints
 * within 2x of one endpoint's, for svc's process and for PostgreSQL (the
 * bare sender's own ratio, its handshakes, is in the notes).
 */
import { makeTestTls } from "../../test/support/tls.ts"
import { formatPerOp, perOp } from "../support/cpu.ts"
import {
  type Aim,
  atMost,
  type BenchContext,
  type ScenarioResult,
  SEND_CONCURRENCY,
  sizes
} from "../support/scenario.ts"
import { round } from "../support/stats.ts"
import type { SvcCheckout } from "../support/svc.ts"
import {
  type ArmResult,
  bareArm,
  cpuPer,
  graphileArm,
  idleStartNote,
  ONE_ENDPOINT,
  rates,
  RECEIVER_ADDRESSES,
  svcArm,
  type Topology,
  withReceiver
} from "../support/webhooks.ts"
import { formatWorkPerOp, WORK_NOTE } from "../support/work.ts"

const thousands = (n: number) => n >= 1_000 ? `${round(n / 1_000, n % 1_000 === 0 ? 0 : 1)}k` : String(n)

/** The checkouts in turn, reversed at every other point of a curve. */
const inTurn = (checkouts: ReadonlyArray<SvcCheckout>, point: number) =>
  point % 2 === 0 ? checkouts : [...checkouts].reverse()

export default async (given: BenchContext): Promise<ScenarioResult> => {
  // The receiver's certificate names every loopback address it listens on.
  const ips = [...Array.from({ length: RECEIVER_ADDRESSES }, (_, k) => `127.0.0.${k + 1}`), "::1"]
  const context: BenchContext = { ...given, tls: await makeTestTls({ ips }) }
  const size = sizes(context.quick).scale
  const [small, large] = size.backlogs as unknown as [number, number]
  const sixteen: Topology = { orgs: 1, endpointsPerOrg: 16, fanOut: "all" }
  const many: Topology = {
    orgs: size.manyOrgs,
    endpointsPerOrg: size.endpointsPerOrg,
    fanOut: "one",
    hosts: size.endpointsPerOrg
  }
  const manyLabel = `${size.manyOrgs * size.endpointsPerOrg} endpoints / ${size.manyOrgs} orgs`
  // `BENCH_SCALE_CURVES=endpoints` (or `backlog`): one curve only, e.g. for an A/B of the endpoint costs.
  const curves = new Set((process.env.BENCH_SCALE_CURVES ?? "backlog,endpoints").split(","))
  const backlogPoints = curves.has("backlog") ? [small, large] : []
  const endpointPoints = curves.has("endpoints") ? ([["one", ONE_ENDPOINT], ["many", many]] as const) : []
  return withReceiver(context, async (receiver, receiverUrl) => {
    const backlog = new Map<string, ArmResult>()
    const endpoints = new Map<string, ArmResult>()
    const key = (label: string, point: string) => `${label} ${point}`

    for (const [point, deliveries] of backlogPoints.entries()) {
      for (const checkout of inTurn(context.checkouts, point)) {
        const arm = `${checkout.label} · backlog ${thousands(deliveries)} · 16 endpoints`
        backlog.set(
          key(checkout.label, String(deliveries)),
          await svcArm(context, checkout, receiver, receiverUrl, {
            name: `scale_backlog_${deliveries}`,
            arm,
            topology: sixteen,
            warmup: size.warmup,
            deliveries
          })
        )
      }
    }
    for (const deliveries of backlogPoints) {
      const options = { warmup: size.warmup, count: deliveries }
      backlog.set(
        key("bare", String(deliveries)),
        await bareArm(context, receiver, receiverUrl, {
          ...options,
          arm: `bare undici sender · ${thousands(deliveries)}`
        })
      )
      if (context.database === "postgres") {
        backlog.set(
          key("graphile", String(deliveries)),
          await graphileArm(context, receiver, receiverUrl, {
            ...options,
            arm: `graphile-worker · ${thousands(deliveries)}`
          })
        )
      }
    }
    for (const [point, [name, topology]] of endpointPoints.entries()) {
      for (const checkout of inTurn(context.checkouts, point)) {
        const arm = `${checkout.label} · ${thousands(size.deliveries)} · ${name === "one" ? "1 endpoint" : manyLabel}`
        endpoints.set(
          key(checkout.label, name),
          await svcArm(context, checkout, receiver, receiverUrl, {
            name: `scale_endpoints_${name}`,
            arm,
            topology,
            warmup: size.warmup,
            deliveries: size.deliveries
          })
        )
      }
    }

    for (const [name, topology] of endpointPoints) {
      endpoints.set(
        key("bare", name),
        await bareArm(context, receiver, receiverUrl, {
          arm: `bare undici sender · ${thousands(size.deliveries)} · ${name === "one" ? "1 endpoint" : manyLabel}`,
          warmup: size.warmup,
          count: size.deliveries,
          topology
        })
      )
    }

    const row = (r: ArmResult) => {
      const { steady, firstQuarter, lastQuarter } = rates(r)
      return {
        arm: r.arm,
        delivered: `${r.receipts.count}/${r.deliveries}`,
        "steady /s": round(steady),
        "first ¼ /s": round(firstQuarter),
        "last ¼ /s": round(lastQuarter),
        connections: r.receipts.connections,
        "CPU µs/delivery": formatPerOp(perOp(r.cpu, r.deliveries)),
        "work/delivery": r.work === undefined ? "" : formatWorkPerOp(r.work, r.deliveries)
      }
    }
    const rows = [...backlog.values(), ...endpoints.values()].map(row)

    // svc's process, and PostgreSQL's backends on the server: the two figures the aims hold flat.
    const processes = (label: string) => context.database === "postgres" ? [label, "postgres"] : [label]
    const ratio = (of: ArmResult, to: ArmResult, process: string) => cpuPer(of, process) / cpuPer(to, process)
    const steadyRatio = (of: ArmResult, to: ArmResult) => round(rates(of).steady / rates(to).steady, 2)
    const aims: Array<Aim> = []
    const notes: Array<string> = []
    for (const c of context.checkouts) {
      const lo = backlog.get(key(c.label, String(small)))
      const hi = backlog.get(key(c.label, String(large)))
      const one = endpoints.get(key(c.label, "one"))
      const wide = endpoints.get(key(c.label, "many"))
      for (const process of processes(c.label)) {
        const who = process === "postgres" ? "PostgreSQL" : "svc's process"
        if (lo && hi) {
          aims.push(
            atMost(
              `${c.label}: ${who} CPU per delivery, backlog ${thousands(large)} / ${thousands(small)}`,
              ratio(hi, lo, process),
              1.2
            )
          )
        }
        if (one && wide) {
          aims.push(
            atMost(`${c.label}: ${who} CPU per delivery, ${manyLabel} / 1 endpoint`, ratio(wide, one, process), 2)
          )
        }
      }
      if (lo && hi) {
        notes.push(
          `${c.label}: steady rate backlog ${thousands(large)} / ${thousands(small)} = ${steadyRatio(hi, lo)}x.`
        )
      }
      if (one && wide) notes.push(`${c.label}: steady rate ${manyLabel} / 1 endpoint = ${steadyRatio(wide, one)}x.`)
    }
    for (
      const baseline of backlogPoints.length > 0
        ? ["bare", ...(context.database === "postgres" ? ["graphile"] : [])]
        : []
    ) {
      const lo = backlog.get(key(baseline, String(small)))!
      const hi = backlog.get(key(baseline, String(large)))!
      notes.push(
        `${lo.arm.split(" · ")[0]}: steady rate ${thousands(large)} / ${thousands(small)} = ${steadyRatio(hi, lo)}x.`
      )
    }
    const bareOne = endpoints.get(key("bare", "one"))
    const bareMany = endpoints.get(key("bare", "many"))
    if (bareOne && bareMany) {
      notes.push(
        `bare undici sender: CPU per delivery ${manyLabel} / 1 endpoint = ${
          round(ratio(bareMany, bareOne, "bare sender"), 2)
        }x, `
          + `the receiver's ${round(ratio(bareMany, bareOne, "receiver"), 2)}x; steady rate ${
            steadyRatio(bareMany, bareOne)
          }x `
          + "(a pool per endpoint, each at its endpoint's host: the connections and handshakes svc pays)."
      )
    }
    return {
      scenario: "webhooks-scale",
      database: context.database,
      rows,
      aims,
      notes: [
        WORK_NOTE + " postgres includes the producer's INSERT of the backlog (its commit opens the window).",
        ...notes,
        `Every arm: a warm-up drain of ${size.warmup} deliveries the same way first. svc's figures count the wake-up step's deliveries too (16 in the backlog curve, 1 in the endpoints curve).`,
        `svc sends at most 16 at once per endpoint, 32 per organization and host, 256 in all: one endpoint is drained 16 at a time, ${manyLabel} up to 256 at a time. The baselines send ${SEND_CONCURRENCY} at a time.`,
        "svc's and PostgreSQL's CPU include the dispatcher's fan-out of the events into deliveries; the producer's write of the events or jobs is not counted.",
        ...(context.database === "pglite"
          ? [
            "Embedded: each backlog is committed while svc is stopped; svc's CPU is its process's whole CPU to the last receipt minus the mean of two idle starts' just before; "
            + `their spread is the figure's uncertainty (${
              [...backlog.values(), ...endpoints.values()].filter((r) => r.idleStarts !== undefined).map((r) =>
                `${r.arm}: ${idleStartNote(r)}`
              ).join("; ")
            }).`
          ]
          : [])
      ]
    }
  })
}
