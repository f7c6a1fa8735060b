/**
 * The latency scenario's arithmetic (`bench/support/latency.ts`; the
 * benchmark itself never runs in `npm test`): an open-loop schedule whose
 * due times do not depend on answers, nearest-rank percentiles, the rates
 * knob, and receipts matched with what was offered, counting the missing
 * and the duplicates and timing from the due time, and a long run split
 * by the minute of each item's due time.
 */
import { describe, expect, it } from "vitest"
import { cell, match, parseRates, perMinute, schedule, summarize } from "../../../bench/support/latency.ts"

describe("the latency scenario's arithmetic", () => {
  it("schedules rate × seconds requests at i / rate", () => {
    expect(schedule(4, 1)).toEqual([0, 250, 500, 750])
    expect(schedule(200, 30)).toHaveLength(6_000)
    expect(schedule(200, 30)[5_999]).toBeCloseTo(29_995)
    expect(schedule(3, 0)).toEqual([])
  })

  it("summarizes by nearest rank, the maximum apart", () => {
    const values = Array.from({ length: 100 }, (_, i) => 100 - i) // 1..100, unordered
    expect(summarize(values)).toEqual({ n: 100, p50: 50, p95: 95, p99: 99, max: 100 })
    expect(summarize([7])).toEqual({ n: 1, p50: 7, p95: 7, p99: 7, max: 7 })
    // A single slow one shows in the maximum and, with few values, in p99.
    expect(summarize([...Array.from({ length: 99 }, () => 1), 500])).toMatchObject({ p95: 1, p99: 1, max: 500 })
    expect(summarize([1.26, 1.24])).toMatchObject({ p50: 1.2, max: 1.3 })
    expect(summarize([NaN]).n).toBe(0)
    expect(cell(summarize([]))).toBe("-")
    expect(cell(summarize([2, 4]))).toBe("2 / 4 / 4 / 4")
  })

  it("reads the rates knob: numbers and max, nothing else", () => {
    expect(parseRates("50,200,max")).toEqual([50, 200, "max"])
    expect(parseRates(" 1000 , ")).toEqual([1_000])
    expect(() => parseRates("50,fast")).toThrow(/fast/)
    expect(() => parseRates("0")).toThrow()
    expect(() => parseRates("-5")).toThrow()
  })

  it("times each offered item from its due time to its first receipt, counting missing and duplicates", () => {
    const offered = [{ key: "a", due: 1_000 }, { key: "b", due: 1_005 }, { key: "c", due: 1_010 }]
    const arrivals = new Map([["a", [1_012, 1_040]], ["b", [1_030]], ["x", [1_020]]])
    expect(match(offered, arrivals)).toEqual({ latencies: [12, 25], missing: 1, duplicates: 1 })
    // A later receipt recorded first still counts from the earliest one.
    expect(match([{ key: "a", due: 0 }], new Map([["a", [9, 4]]]))).toEqual({
      latencies: [4],
      missing: 0,
      duplicates: 1
    })
    expect(match([], arrivals)).toEqual({ latencies: [], missing: 0, duplicates: 0 })
  })

  it("splits a run by the minute of each item's due time, a short last minute left out", () => {
    // 151 items a second apart: minutes of 60, 60 and 31 items, received 1, 10 and 100 ms after their due time.
    const offered = Array.from({ length: 151 }, (_, i) => ({ key: String(i), due: 5_000 + i * 1_000 }))
    const arrivals = new Map(offered.map((o, i) => [o.key, [o.due + (i < 60 ? 1 : i < 120 ? 10 : 100)]]))
    const minutes = perMinute(offered, arrivals)
    expect(minutes.map((m) => [m.n, m.p95])).toEqual([[60, 1], [60, 10], [31, 100]])
    // Under 30 s in the last minute: too few to compare, left out.
    expect(perMinute(offered.slice(0, 140), arrivals).map((m) => m.n)).toEqual([60, 60])
    // A run under a minute is one minute, whatever its length.
    expect(perMinute(offered.slice(0, 10), arrivals).map((m) => m.n)).toEqual([10])
    expect(perMinute([], arrivals)).toEqual([])
  })
})
