/**
 * What the in-process studies share: this process's CPU by thread role,
 * and the alternation of their arms (each arm's blocks in turn, the order
 * turned every round) with its table of medians.
 */
import { Effect } from "effect"
import { readdirSync, readFileSync } from "node:fs"
import { statFileMicros } from "../support/cpu.ts"

/** This process's CPU µs by role: the main thread, PGlite's worker, V8's helpers. */
export const ownThreads = () => {
  const out = { main: 0, worker: 0, helpers: 0 }
  for (const tid of readdirSync("/proc/self/task")) {
    let comm = ""
    try {
      comm = readFileSync(`/proc/self/task/${tid}/comm`, "utf8").trim()
    } catch {
      continue // the thread ended
    }
    const cpu = statFileMicros(`/proc/self/task/${tid}/stat`) ?? 0
    if (tid === String(process.pid)) out.main += cpu
    else if (comm === "WorkerThread") out.worker += cpu
    else if (comm.startsWith("V8")) out.helpers += cpu
  }
  return out
}

/** One block's CPU per statement, µs: the database's (PGlite's thread or a server's backends), the main thread's, V8's helpers'. */
export interface Measured {
  readonly database: number
  readonly main: number
  readonly helpers: number
}

export interface Arm<K> {
  readonly name: string
  readonly block: (kind: K) => Effect.Effect<Measured, unknown>
}

/**
 * Every arm's block of every kind once (warm-up), then `rounds` rounds of
 * them, the arms' order turned each round; prints the medians and, per
 * round, the `perRound` figure.
 */
export const alternate = <K extends string>(
  arms: ReadonlyArray<Arm<K>>,
  kinds: ReadonlyArray<K>,
  rounds: number,
  perRound: keyof Measured
) =>
  Effect.gen(function*() {
    for (const arm of arms) for (const kind of kinds) yield* arm.block(kind)
    const results = new Map<string, Array<Measured>>()
    for (let round = 0; round < rounds; round++) {
      const order = round % 2 === 0 ? arms : [...arms].reverse()
      for (const kind of kinds) {
        for (const arm of order) {
          const key = `${arm.name} ${kind}`
          results.set(key, [...(results.get(key) ?? []), yield* arm.block(kind)])
        }
      }
    }
    const median = (values: ReadonlyArray<number>) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!
    console.table([...results].map(([key, rows]) => ({
      statement: key,
      "database CPU µs": Math.round(median(rows.map((r) => r.database))),
      "main thread µs": Math.round(median(rows.map((r) => r.main))),
      "V8 helpers µs": Math.round(median(rows.map((r) => r.helpers))),
      [`${perRound}, rounds`]: rows.map((r) => Math.round(r[perRound])).join(" ")
    })))
  })
