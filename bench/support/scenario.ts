/** What a scenario gets and answers; the sizes of quick and full runs. */
import type { DatabaseKind } from "./db.ts"
import type { SvcCheckout } from "./svc.ts"

export interface Tls {
  readonly cert: string
  readonly key: string
  readonly caCert: string
  readonly caFile: string
}

export interface BenchContext {
  readonly quick: boolean
  readonly database: DatabaseKind
  readonly checkouts: ReadonlyArray<SvcCheckout>
  readonly tls: Tls
  /** Where svc processes write their logs. */
  readonly logDir: string
}

/** One comparison against an aim (docs/performance.md, "Scenarios"). */
export interface Aim {
  readonly what: string
  readonly value: number
  /** e.g. ">= 0.7" */
  readonly aim: string
  readonly met: boolean
}

export interface ScenarioResult {
  readonly scenario: string
  readonly database: DatabaseKind
  readonly rows: ReadonlyArray<Record<string, string | number>>
  readonly aims: ReadonlyArray<Aim>
  readonly notes: ReadonlyArray<string>
}

export type Scenario = (context: BenchContext) => Promise<ScenarioResult>

export const atLeast = (what: string, value: number, min: number, unit = "x"): Aim => ({
  what,
  value: Math.round(value * 100) / 100,
  aim: `>= ${min}${unit}`,
  met: value >= min
})

export const atMost = (what: string, value: number, max: number, unit = "x"): Aim => ({
  what,
  value: Math.round(value * 100) / 100,
  aim: `<= ${max}${unit}`,
  met: value <= max
})

/** The per-endpoint concurrency of svc's sender (16): the bare sender and graphile-worker use it too. */
export const SEND_CONCURRENCY = Number(process.env.BENCH_SEND_CONCURRENCY ?? 16)

/** Sizes: `BENCH_QUICK=1` for smoke runs, else full. */
export const sizes = (quick: boolean) =>
  quick
    ? {
      writes: { warmup: 200, requests: 600, concurrency: 16, rounds: 1 },
      burst: { warmup: 300, events: 2_000 },
      scale: { warmup: 160, backlogs: [160, 1_600], manyOrgs: 20, endpointsPerOrg: 5, deliveries: 1_000 },
      latency: { warmup: 300, blocks: 2, perBlock: 500, concurrency: 8 },
      spans: { spans: 10_000, runs: 1 }
    }
    : {
      writes: { warmup: 1_000, requests: 4_000, concurrency: 16, rounds: 2 },
      burst: { warmup: 1_000, events: 20_000 },
      scale: { warmup: 1_024, backlogs: [1_024, 100_000], manyOrgs: 200, endpointsPerOrg: 5, deliveries: 20_000 },
      latency: { warmup: 1_000, blocks: 5, perBlock: 2_000, concurrency: 8 },
      spans: { spans: 40_000, runs: 2 }
    }
