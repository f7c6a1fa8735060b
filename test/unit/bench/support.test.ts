/**
 * The benchmark's shared helpers (not the benchmark itself, which never runs
 * in `npm test`): percentiles, CPU per operation from /proc, and the child
 * process protocol every load generator, baseline and receiver speaks.
 */
import { describe, expect, it } from "vitest"
import { spawnChild } from "../../../bench/support/child.ts"
import { cpuMicros, measureCpu, meterOf, perOp, v8HelpersOf } from "../../../bench/support/cpu.ts"
import { percentile, sorted, spread } from "../../../bench/support/stats.ts"

describe("bench support", () => {
  it("takes nearest-rank percentiles", () => {
    const values = sorted(Array.from({ length: 1000 }, (_, i) => 1000 - i))
    expect(percentile(values, 0.5)).toBe(500)
    expect(percentile(values, 0.99)).toBe(990)
    expect(percentile(values, 0.999)).toBe(999)
    expect(percentile(values, 1)).toBe(1000)
    expect(percentile([], 0.5)).toBeNaN()
    expect(spread([3.14159, 1, 2])).toBe("1–3.14")
  })

  it("reads a process's CPU time from /proc and divides it per operation", async () => {
    const before = cpuMicros(process.pid)
    const { cpu } = await measureCpu([meterOf("self", process.pid)], async () => {
      // Busy until /proc shows 30 ms more (ticks are 10 ms; a loaded machine may deschedule us).
      const until = Date.now() + 5_000
      while (cpuMicros(process.pid) < before + 30_000 && Date.now() < until) for (let i = 0; i < 1e5; i++) Math.sqrt(i)
    })
    expect(cpuMicros(process.pid)).toBeGreaterThanOrEqual(before)
    expect(cpu.self).toBeGreaterThan(0)
    expect(perOp({ self: 1_000 }, 4)).toEqual({ self: 250 })
    expect(cpuMicros(2 ** 22 + 12_345)).toBe(0)
  })

  it("counts V8's helper threads apart: a part of the process, never more than it", async () => {
    const before = cpuMicros(process.pid)
    const { cpu } = await measureCpu([meterOf("self", process.pid), v8HelpersOf("helpers", process.pid)], async () => {
      // Busy on the main thread, allocating little, until /proc shows 50 ms more.
      const until = Date.now() + 5_000
      while (cpuMicros(process.pid) < before + 50_000 && Date.now() < until) for (let i = 0; i < 1e5; i++) Math.sqrt(i)
    })
    expect(cpu.self).toBeGreaterThan(0)
    // Read per thread: a thread's own /proc/<tid>/stat would report the whole process, once per helper.
    expect(cpu.helpers).toBeLessThan(cpu.self!)
  })

  it("drives a child process over JSON lines and measures it from outside", async () => {
    const load = await spawnChild("load", new URL("../../../bench/support/load.ts", import.meta.url))
    try {
      expect(load.pid).toBeGreaterThan(0)
      await expect(load.call("nope")).rejects.toThrow("unknown command nope")
      await expect(
        load.call("run", {
          url: "http://example.com/",
          method: "GET",
          headers: {},
          count: 1,
          concurrency: 1,
          expectStatus: 200
        })
      )
        .rejects.toThrow("loopback only")
    } finally {
      await load.stop()
    }
  })
})
