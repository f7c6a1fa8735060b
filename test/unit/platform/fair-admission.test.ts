/**
 * Fair admission to the worker pool: a lone organization may use the whole
 * queue and every worker; once the queue is full only an organization
 * holding at least its share is refused; free workers serve waiting
 * organizations in turns; under overload every worker stays busy. Counted,
 * not timed: the worker spins for the milliseconds it is given, and the
 * assertions read orders and counts.
 */
import { assert, describe, it } from "@effect/vitest"
import { Clock, Effect } from "effect"
import { TestClock } from "effect/testing"
import { makeWorkerPool, type Outcome, type WorkerPool } from "../../../src/platform/WorkerPool.ts"

type Steps = ReadonlyArray<readonly [phase: number, ms: number]>
type Reply = { id: number; _tag: "Done" }
type Pool = WorkerPool<{ steps: Steps }, Reply>
const WORKER = new URL("../../support/phase-worker.ts", import.meta.url)

const make = (workers: number, queueCapacity: number): Pool =>
  makeWorkerPool<{ steps: Steps }, Reply>(WORKER, {}, { workers, timeoutMs: 2000, heapMb: 64, queueCapacity })

const job = (pool: Pool, orgId: string, ms: number) =>
  new Promise<Outcome<Reply>>((resolve) => {
    pool.submit(orgId, { steps: [[0, ms]] }, resolve)
  })

const until = async (condition: () => boolean, what: string) => {
  const deadline = Date.now() + 10_000
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`)
    await new Promise((resolve) => setTimeout(resolve, 2))
  }
}

/** Runs cheap jobs of `orgId` until the pool knows it as cheap. */
const warm = async (pool: Pool, orgId: string) => {
  for (let i = 0; i < 3; i++) await job(pool, orgId, 0)
}

describe("workers start as requests need them", () => {
  it("one request at a time runs on one worker; a request that finds it busy starts the next; warming starts them all", async () => {
    const pool = make(3, 8)
    try {
      assert.strictEqual(pool.load().workers, 0)
      for (let i = 0; i < 3; i++) await job(pool, "one-at-a-time", 0)
      assert.strictEqual(pool.load().workers, 1)
      // The first takes the idle worker at once; the second finds none free and starts one.
      const both = [job(pool, "two-at-once", 300), job(pool, "two-at-once", 300)]
      assert.strictEqual(pool.load().workers, 2)
      await Promise.all(both)
      await pool.warm()
      assert.strictEqual(pool.load().workers, 3)
    } finally {
      pool.close()
    }
  })

  it("requests arriving together at a pool with no worker start one worker each, up to the pool's size", async () => {
    const pool = make(2, 8)
    try {
      const jobs = [0, 1, 2].map(() => job(pool, "burst", 0))
      assert.strictEqual(pool.load().workers, 2)
      await Promise.all(jobs)
    } finally {
      pool.close()
    }
  })
})

describe("fair admission: the queue is shared, refused only above a share", () => {
  it("a lone organization is admitted up to the whole queue, and refused only beyond it", () => {
    const pool = make(2, 8)
    try {
      const held = Array.from({ length: 8 }, () => pool.admit("alone"))
      assert.isTrue(held.every((release) => release !== undefined))
      assert.isUndefined(pool.admit("alone"))
      held[0]!()
      // Released twice counts once.
      held[0]!()
      assert.isDefined(pool.admit("alone"))
      assert.isUndefined(pool.admit("alone"))
    } finally {
      pool.close()
    }
  })

  it("once the queue is full, an organization under its share is admitted and one at its share refused", () => {
    const pool = make(2, 4)
    try {
      for (let i = 0; i < 4; i++) assert.isDefined(pool.admit("flood"))
      // Two organizations now: a share of 2 each.
      assert.isDefined(pool.admit("newcomer"))
      assert.isDefined(pool.admit("newcomer"))
      assert.isUndefined(pool.admit("newcomer"))
      assert.isUndefined(pool.admit("flood"))
      assert.strictEqual(pool.load().admitted, 6)
    } finally {
      pool.close()
    }
  })

  it("a lone organization whose checks are cheap gets every worker", async () => {
    const pool = make(2, 8)
    try {
      await warm(pool, "alone")
      const jobs = [0, 1, 2, 3].map(() => job(pool, "alone", 300))
      await until(() => pool.load().running === 2, "both workers to run the organization's jobs")
      await Promise.all(jobs)
    } finally {
      pool.close()
    }
  })

  it("an organization not yet known to be cheap holds every worker but one", async () => {
    const pool = make(2, 8)
    try {
      const jobs = [0, 1, 2].map(() => job(pool, "unknown", 200))
      await until(() => pool.load().running === 1, "the first job to start")
      assert.strictEqual(pool.load().running, 1)
      assert.strictEqual(pool.load().waiting, 2)
      await Promise.all(jobs)
    } finally {
      pool.close()
    }
  })

  it("no organization waits behind another's backlog: the next free worker serves the newcomer", async () => {
    const pool = make(1, 64)
    try {
      await warm(pool, "backlog")
      await warm(pool, "newcomer")
      const order: Array<string> = []
      const backlog = Array.from({ length: 10 }, () => job(pool, "backlog", 20).then(() => order.push("backlog")))
      await until(() => pool.load().running === 1, "the backlog to start")
      const endedBefore = order.length
      const newcomer = job(pool, "newcomer", 1).then(() => order.push("newcomer"))
      await Promise.all([...backlog, newcomer])
      // The backlog's job running when the newcomer arrived ends first, then
      // it is the newcomer's turn, though nine more of the backlog wait.
      assert.strictEqual(order.indexOf("newcomer"), endedBefore + 1)
    } finally {
      pool.close()
    }
  })

  it("under overload every worker stays busy: the accepted work does not collapse while the excess is refused", async () => {
    const workers = 2
    const capacity = 8
    const pool = make(workers, capacity)
    try {
      await warm(pool, "busy")
      const idleBefore = pool.load().idleWithWork
      const target = 400
      let completed = 0
      let refused = 0
      let mostAdmitted = 0
      let mostRunning = 0
      // A refused client retries once a check has ended (its Retry-After).
      let ended: Array<() => void> = []
      const checkEnded = () => new Promise<void>((resolve) => ended.push(resolve))
      const client = async () => {
        while (completed < target) {
          const release = pool.admit("busy")
          if (release === undefined) {
            refused += 1
            await checkEnded()
            continue
          }
          mostAdmitted = Math.max(mostAdmitted, pool.load().admitted)
          const done = job(pool, "busy", 1)
          mostRunning = Math.max(mostRunning, pool.load().running)
          await done
          release()
          completed += 1
          const waiting = ended
          ended = []
          for (const wake of waiting) wake()
        }
      }
      await Promise.all(Array.from({ length: 50 }, client))
      assert.isAtLeast(completed, target)
      assert.isAbove(refused, 0)
      assert.isAtMost(mostAdmitted, capacity)
      assert.strictEqual(mostRunning, workers)
      // No worker was ever left idle while an admitted check waited.
      assert.strictEqual(pool.load().idleWithWork, idleBefore)
    } finally {
      pool.close()
    }
  })
})

describe("a request's cost is timed by the pool's Clock", () => {
  it.effect("a request that takes 5 s by the Clock counts as slow, whatever the wall clock says: its organization then holds all workers but one", () =>
    Effect.gen(function*() {
      const clock = yield* Clock.Clock
      const pool = makeWorkerPool<{ steps: Steps }, Reply>(WORKER, {}, {
        workers: 2,
        timeoutMs: 10_000,
        heapMb: 64,
        queueCapacity: 8,
        clock
      })
      yield* Effect.addFinalizer(() => Effect.sync(pool.close))
      // Both workers up (each answers one request outside the queue).
      yield* Effect.promise(() => pool.broadcast({ steps: [] }))
      // 300 ms of wall time (cheap: under a tenth of the deadline), 5 s by the test's clock.
      const first = job(pool, "a", 300)
      yield* Effect.promise(() => until(() => pool.load().running === 1, "the request in a worker"))
      yield* TestClock.adjust("5 seconds")
      assert.strictEqual((yield* Effect.promise(() => first))._tag, "Reply")
      // Slow: of two requests, one waits while the other worker stays idle.
      const jobs = Promise.all([job(pool, "a", 100), job(pool, "a", 100)])
      assert.strictEqual(pool.load().running, 1)
      assert.strictEqual(pool.load().waiting, 1)
      assert.isAbove(pool.load().idleWithWork, 0)
      const outcomes = yield* Effect.promise(() => jobs)
      assert.deepStrictEqual(outcomes.map((outcome) => outcome._tag), ["Reply", "Reply"])
    }).pipe(Effect.scoped))
})
