/**
 * The latency scenario's arithmetic (`scenarios/latency.ts`), pure so that
 * it is tested (`test/unit/bench/latency.test.ts`): the open-loop
 * schedule, a distribution's summary, the rates a knob asks for, and the
 * receipts matched with what was offered (latency, missing, duplicates).
 */
import { percentile, round, sorted } from "./stats.ts"

/** Due times (ms after the start) of an open-loop load of `rate` per second for `seconds`: i / rate, whatever the answers. */
export const schedule = (rate: number, seconds: number): Array<number> =>
  Array.from({ length: Math.max(0, Math.floor(rate * seconds)) }, (_, i) => (i * 1000) / rate)

export interface Summary {
  readonly n: number
  readonly p50: number
  readonly p95: number
  readonly p99: number
  readonly max: number
}

/** Nearest-rank p50/p95/p99 and the maximum, rounded to 0.1 (NaN for no values). */
export const summarize = (values: ReadonlyArray<number>): Summary => {
  const s = sorted(values.filter((v) => Number.isFinite(v)))
  return {
    n: s.length,
    p50: round(percentile(s, 0.5), 1),
    p95: round(percentile(s, 0.95), 1),
    p99: round(percentile(s, 0.99), 1),
    max: s.length === 0 ? NaN : round(s[s.length - 1]!, 1)
  }
}

/** `p50 / p95 / p99 / max` for a table cell. */
export const cell = (s: Summary) => s.n === 0 ? "-" : `${s.p50} / ${s.p95} / ${s.p99} / ${s.max}`

/**
 * The offered rates of a knob such as `50,200,max` or `50,200,1000`:
 * positive numbers, and `max` (the highest the machine offers, found by
 * the scenario) kept as a word; anything else is refused.
 */
export const parseRates = (raw: string): Array<number | "max"> =>
  raw.split(",").map((s) => s.trim()).filter((s) => s !== "").map((s) => {
    if (s === "max") return "max" as const
    const n = Number(s)
    if (!Number.isFinite(n) || n <= 0) throw new Error(`not a rate: ${s} (positive numbers or "max")`)
    return n
  })

export interface Offered {
  /** The key the receipt carries back (e.g. the event id of the step's approval). */
  readonly key: string
  /** When it was due (epoch ms): latency counts from here, as an open-loop load's does. */
  readonly due: number
}

export interface Matched {
  /** Due → first receipt (ms), of every offered item received. */
  readonly latencies: Array<number>
  /** Offered items never received. */
  readonly missing: number
  /** Receipts of an offered item beyond its first. */
  readonly duplicates: number
}

/** Matches the offered items with their receipts (`arrivals`: key → receipt times, epoch ms). */
export const match = (
  offered: ReadonlyArray<Offered>,
  arrivals: ReadonlyMap<string, ReadonlyArray<number>>
): Matched => {
  const latencies: Array<number> = []
  let missing = 0
  let duplicates = 0
  for (const o of offered) {
    const times = arrivals.get(o.key)
    if (times === undefined || times.length === 0) {
      missing++
      continue
    }
    latencies.push(Math.min(...times) - o.due)
    duplicates += times.length - 1
  }
  return { latencies, missing, duplicates }
}

/**
 * The latencies of `offered` split by the minute of their due time (counted
 * from the first due time), each minute summarized; a last minute shorter
 * than `minSeconds` is left out (too few items to compare).
 */
export const perMinute = (
  offered: ReadonlyArray<Offered>,
  arrivals: ReadonlyMap<string, ReadonlyArray<number>>,
  minSeconds = 30
): Array<Summary> => {
  if (offered.length === 0) return []
  const start = Math.min(...offered.map((o) => o.due))
  const end = Math.max(...offered.map((o) => o.due))
  const minutes: Array<Array<Offered>> = []
  for (const o of offered) (minutes[Math.floor((o.due - start) / 60_000)] ??= []).push(o)
  const full = (end - start) % 60_000 >= minSeconds * 1000 ? minutes.length : Math.max(1, minutes.length - 1)
  return Array.from(
    { length: Math.min(full, minutes.length) },
    (_, i) => summarize(match(minutes[i] ?? [], arrivals).latencies)
  )
}
