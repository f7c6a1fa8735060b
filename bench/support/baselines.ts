/**
 * The request baselines svc's writes are measured against, each a child
 * process of its own on the run's database (on embedded PGlite, svc's data
 * directory while svc is stopped):
 *
 * - `bare`: `baselines/bare-http.ts`, `node:http` and the INSERT, the key
 *   checked in memory: what the work costs with no framework at all;
 * - `floor`: `baselines/effect-floor.ts`, an Effect HttpApi server with
 *   `@effect/sql-pg` and nothing of svc: what the same work costs on the
 *   framework svc is built on.
 *
 * svc's CPU per request is reported as a ratio of each (`cpuRatio`).
 */
import { type Child, spawnChild } from "./child.ts"
import type { BenchDatabase } from "./db.ts"

export const BASELINES = {
  bare: { title: "bare node:http + INSERT", script: "../baselines/bare-http.ts", env: "BENCH_BARE" },
  floor: { title: "Effect floor (HttpApi + sql-pg)", script: "../baselines/effect-floor.ts", env: "BENCH_FLOOR" }
} as const

export type BaselineName = keyof typeof BASELINES

/** Arm labels the baselines take: no svc checkout may use them. */
export const BASELINE_NAMES = Object.keys(BASELINES) as ReadonlyArray<BaselineName>

/** A row's arm column: a baseline's title, or the checkout's label. */
export const armTitle = (arm: string) => (arm in BASELINES ? BASELINES[arm as BaselineName].title : arm)

/**
 * Starts baseline `name` on `database`, with svc's key `key` (the bare
 * server loads it at start; the floor looks every key up as svc does).
 * Ask it for its `url`; `close` it, then `stop` it.
 */
export const startBaseline = (name: BaselineName, database: BenchDatabase, key: string): Promise<Child> =>
  spawnChild(name, new URL(BASELINES[name].script, import.meta.url), {
    [BASELINES[name].env]: JSON.stringify({ kind: database.kind, dataDir: database.dataDir, url: database.url, key })
  })

/** `svc`'s figure over a baseline's, e.g. `2.31x`; `n/a` when either is missing or the baseline's is zero. */
export const cpuRatio = (svc: number | undefined, baseline: number | undefined) =>
  svc === undefined || baseline === undefined || !Number.isFinite(svc) || !Number.isFinite(baseline) || baseline <= 0
    ? "n/a"
    : `${(svc / baseline).toFixed(2)}x`
