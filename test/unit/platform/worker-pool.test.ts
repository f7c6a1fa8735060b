/**
 * The worker pool's deadlines per phase: a request that does several
 * things (check a correction, scrub it, check it again) in one round trip
 * gets each phase's own deadline, counted from that phase's start, and a
 * miss names the phase.
 */
import { assert, describe, it } from "@effect/vitest"
import { makeWorkerPool, type Outcome } from "../../../src/platform/WorkerPool.ts"

type Steps = ReadonlyArray<readonly [phase: number, ms: number]>
const WORKER = new URL("../../support/phase-worker.ts", import.meta.url)

const run = (
  pool: ReturnType<typeof makeWorkerPool<{ steps: Steps }, { id: number; _tag: "Done" }>>,
  steps: Steps,
  phase = 0
) =>
  new Promise<{ outcome: Outcome<{ id: number; _tag: "Done" }>; ms: number }>((resolve) => {
    const started = performance.now()
    pool.submit("org", { steps }, (outcome) => resolve({ outcome, ms: performance.now() - started }), phase)
  })

describe("worker pool phases: a deadline per phase, from its start, naming it", () => {
  const settings = { workers: 1, timeoutMs: 250, phaseTimeoutsMs: [250, 800], heapMb: 64, queueCapacity: 4 }

  it("a request within each phase's deadline completes though it runs longer than the first phase's", async () => {
    const pool = makeWorkerPool<{ steps: Steps }, { id: number; _tag: "Done" }>(WORKER, {}, settings)
    try {
      const { outcome } = await run(pool, [[0, 150], [1, 500]])
      assert.strictEqual(outcome._tag, "Reply")
      assert.strictEqual(pool.replacedWorkers(), 0)
    } finally {
      pool.close()
    }
  })

  it("a request over the second phase's deadline times out naming that phase, once that deadline has passed", async () => {
    const pool = makeWorkerPool<{ steps: Steps }, { id: number; _tag: "Done" }>(WORKER, {}, settings)
    try {
      await run(pool, [])
      const { outcome, ms } = await run(pool, [[0, 100], [1, 10_000]])
      assert.deepStrictEqual(outcome, { _tag: "Timeout", phase: 1 })
      assert.isAtLeast(ms, 100 + 800 - 20)
      assert.isBelow(ms, 100 + 800 + 1000)
      assert.strictEqual(pool.replacedWorkers(), 1)
    } finally {
      pool.close()
    }
  })

  it("a request over the first phase's deadline times out naming it, and a request may start in a later phase", async () => {
    const pool = makeWorkerPool<{ steps: Steps }, { id: number; _tag: "Done" }>(WORKER, {}, settings)
    try {
      await run(pool, [])
      const first = await run(pool, [[0, 10_000]])
      assert.deepStrictEqual(first.outcome, { _tag: "Timeout", phase: 0 })
      assert.isBelow(first.ms, 250 + 600)
      const later = await run(pool, [[1, 500]], 1)
      assert.strictEqual(later.outcome._tag, "Reply")
    } finally {
      pool.close()
    }
  })
})
