/**
 * Webhook fan-out of a burst: N approval events committed to svc's outbox
 * at once (one transaction, then one governed step through the API to wake
 * the dispatcher, as svc's own writes do), delivered by svc's engine
 * (dispatcher, delivery queue, signed sender, outbound check) to an HTTPS
 * receiver on loopback. Baselines, same receiver, same signed POST, same
 * concurrency (16, svc's per-endpoint limit):
 *
 * - the bare sender (`baselines/bare-sender.ts`): an undici pool, nothing
 *   recorded;
 * - graphile-worker (`baselines/graphile.ts`, server only): N jobs added in
 *   one transaction, a runner whose task makes the POST.
 *
 * Each arm first delivers a warm-up burst the same way. Reported: the
 * average rate (N over first commit → last receipt), the steady-state rate
 * (receipts between the 20th and the 80th percentile), the time to the first
 * receipt, and the CPU per delivery of each process. The dispatcher's
 * fan-out (events into deliveries) is included in svc's and PostgreSQL's
 * CPU on both databases (`support/webhooks.ts` says how).
 */
import { formatPerOp, perOp } from "../support/cpu.ts"
import {
  atLeast,
  atMost,
  type BenchContext,
  type ScenarioResult,
  SEND_CONCURRENCY,
  sizes
} from "../support/scenario.ts"
import { round } from "../support/stats.ts"
import {
  type ArmResult,
  bareArm,
  cpuPer,
  graphileArm,
  idleStartNote,
  ONE_ENDPOINT,
  rates,
  svcArm,
  withReceiver
} from "../support/webhooks.ts"
import { formatWorkPerOp, WORK_NOTE } from "../support/work.ts"

export default async (context: BenchContext): Promise<ScenarioResult> => {
  const size = sizes(context.quick).burst
  return withReceiver(context, async (receiver, receiverUrl) => {
    const arms: Array<ArmResult> = []
    for (const checkout of context.checkouts) {
      arms.push(
        await svcArm(context, checkout, receiver, receiverUrl, {
          name: "webhooks",
          arm: checkout.label,
          topology: ONE_ENDPOINT,
          warmup: size.warmup,
          deliveries: size.events
        })
      )
    }
    const bare = await bareArm(context, receiver, receiverUrl, {
      arm: "bare undici sender",
      warmup: size.warmup,
      count: size.events
    })
    arms.push(bare)
    const graphile = context.database === "postgres"
      ? await graphileArm(context, receiver, receiverUrl, {
        arm: "graphile-worker",
        warmup: size.warmup,
        count: size.events
      })
      : undefined
    if (graphile) arms.push(graphile)

    const rows = arms.map((r) => {
      const { average, steady, firstMs, firstQuarter, lastQuarter } = rates(r)
      return {
        arm: r.arm,
        delivered: `${r.receipts.count}/${r.deliveries}`,
        "steady /s": round(steady),
        "average /s": round(average),
        "first ¼ /s": round(firstQuarter),
        "last ¼ /s": round(lastQuarter),
        "first receipt ms": round(firstMs, 1),
        "CPU µs/delivery": formatPerOp(perOp(r.cpu, r.deliveries)),
        "work/delivery": r.work === undefined ? "" : formatWorkPerOp(r.work, r.deliveries)
      }
    })
    // The aims of the delivery engine's second design (docs/performance.md); 0.7x the bare sender stays the direction.
    const aims = context.checkouts.flatMap((c) => {
      const svc = arms.find((a) => a.arm === c.label)!
      const s = rates(svc)
      const b = rates(bare)
      return context.database === "postgres"
        ? [
          atMost(`${c.label}: PostgreSQL CPU per delivery, enqueue included`, cpuPer(svc, "postgres"), 100, " µs"),
          atMost(`${c.label}: svc's CPU per delivery`, cpuPer(svc, c.label), 100, " µs"),
          atLeast(`${c.label}: steady state / bare sender`, s.steady / b.steady, 0.5),
          ...(graphile
            ? [atLeast(`${c.label}: steady state / graphile-worker`, s.steady / rates(graphile).steady, 2.5)]
            : []),
          atMost(`${c.label}: first receipt of the burst`, s.firstMs, 50, " ms")
        ]
        : [
          atLeast(`${c.label}: steady state / bare sender`, s.steady / b.steady, 0.4),
          atMost(`${c.label}: first receipt of the burst`, s.firstMs, 50, " ms")
        ]
    })
    return {
      scenario: "webhooks",
      database: context.database,
      rows,
      aims,
      notes: [
        WORK_NOTE + " postgres includes the producer's INSERT of the backlog (its commit opens the window).",
        `Burst of ${size.events} events (svc: +1, the governed step that wakes the dispatcher) after a warm-up burst of ${size.warmup}; ${SEND_CONCURRENCY} concurrent sends; the receiver (its own process) answers 204 at once.`,
        "svc's and PostgreSQL's CPU include the dispatcher's fan-out of the events into deliveries; the producer's write of the events or jobs is not counted. 0.7x the bare sender stays the direction beyond the aims.",
        "steady = receipts between the 20th and 80th percentile over their time span; average = all receipts over first commit → last receipt; first/last ¼ = the first and last quarter of the receipts over their span (a rate that grows as the backlog shrinks shows a per-delivery cost that depends on the backlog).",
        ...(context.database === "pglite"
          ? [
            `Embedded: each burst is committed while svc is stopped (the data folder has one owner), then svc starts and its dispatcher starts on the burst before /ready; the clock starts at /ready (a first receipt below 0 ms arrived before it); svc's CPU is its process's whole CPU minus the mean of two idle starts' (${
              context.checkouts.map((c) => `${c.label}: ${idleStartNote(arms.find((a) => a.arm === c.label)!)}`).join(
                "; "
              )
            }).`,
            "graphile-worker needs a PostgreSQL server: set BENCH_DATABASE_URL for that baseline."
          ]
          : [
            "Server: the clock starts when the events (svc) or jobs (graphile-worker) commit; the CPU window opens just before that commit; the bare sender's clock starts when it starts sending."
          ])
      ]
    }
  })
}
