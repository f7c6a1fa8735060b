/**
 * The delivery worker's loop on `TestClock`, over a queue held in memory:
 * when it claims, what it settles, and what it gives back, without a
 * database and without waiting for real time to pass.
 */
import { assert, describe, it } from "@effect/vitest"
import { Duration, Effect, Exit, Fiber, Latch, Layer, Option, Scope } from "effect"
import { TestClock } from "effect/testing"
import { Topics, Wakeups } from "../../../src/database/Wakeups.ts"
import {
  type Claimed,
  type ClaimOptions,
  DeliveryQueue,
  Outcome,
  type SettleItem
} from "../../../src/deliveries/DeliveryQueue.ts"
import { runWorker } from "../../../src/deliveries/worker/DeliveryWorker.ts"

const delivery = (n: number, targetId = "t1"): Claimed => ({
  id: `d${n}`,
  seq: String(n),
  orgId: "org",
  kind: "email",
  targetId,
  status: "sending",
  label: null,
  eventId: null,
  payload: "{}",
  meta: {},
  attempts: 1,
  replays: 0,
  lastError: null,
  nextAttemptAt: new Date(0),
  createdAt: new Date(0),
  finishedAt: null,
  leaseOwner: "lease",
  targetFailures: 0,
  claimedFrom: "queued"
})

/**
 * A queue in memory: `due` is handed out by the next claim that asks the
 * log, `dueRows` by the next that runs the per-row statement; a per-row
 * statement that finds nothing answers `nextDue` with `next` (the statement
 * of the database's claim does); what the worker settles and releases is kept,
 * and how often it asks `nextDue` on its own. `statements` holds the
 * claim's statements in the order they ran: the log's take (`log`) and
 * the per-row statement (`rows`); a settle answers `logWaiting` and
 * `rowsChanged` as they are set.
 */
const memoryQueue = (next: Option.Option<Date> = Option.none()) => {
  const due: Array<Claimed> = []
  const dueRows: Array<Claimed> = []
  const statements: Array<"log" | "rows"> = []
  const settled: Array<SettleItem> = []
  const released: Array<Claimed> = []
  let asked = 0
  const queue = {
    claimOrNextDue: (_kind: unknown, options: ClaimOptions) =>
      Effect.sync(() => {
        const log = options.log !== false
        const ran = options.rows !== false
        if (log) statements.push("log")
        if (ran) statements.push("rows")
        const logged = log ? due.splice(0) : []
        const rows = ran ? dueRows.splice(0) : []
        const rowsNext = ran && rows.length === 0 ? next : undefined
        return {
          claimed: [...logged, ...rows],
          nextDue: logged.length === 0 ? rowsNext : undefined,
          rows: { ran, nextDue: rowsNext }
        }
      }),
    settleMany: (items: ReadonlyArray<SettleItem>) =>
      Effect.sync(() => {
        settled.push(...items)
        return {
          held: items.map(() => true),
          coolingFor: new Map<string, number>(),
          failures: new Map(),
          logWaiting: memory.logWaiting,
          rowsChanged: memory.rowsChanged
        }
      }),
    release: (items: ReadonlyArray<Claimed>) =>
      Effect.sync(() => {
        released.push(...items)
        return items.length
      }),
    nextDue: () =>
      Effect.sync(() => {
        asked++
        return next
      }),
    reachable: Effect.succeed(true)
  } as unknown as DeliveryQueue["Service"]
  const memory = {
    queue,
    due,
    dueRows,
    statements,
    /** Claims made: each asks the log first, unless a settle said it need not. */
    claims: () => statements.filter((s) => s === "log").length,
    settled,
    released,
    asked: () => asked,
    logWaiting: false,
    rowsChanged: false as boolean | undefined
  }
  return memory
}

/** A send that delivers at once. */
const deliveredAtOnce = () => Effect.succeed({ outcome: Outcome.delivered(), attempt: { durationMs: 1 } })

/**
 * A worker over `memory` started with d1 waiting in the log, sending at
 * once, run until d1 is settled: the two claims' statements are then
 * what the rule under test says of a settle of the log's successes.
 */
const firstSettled = (memory: ReturnType<typeof memoryQueue>) =>
  Effect.gen(function*() {
    memory.due.push(delivery(1))
    yield* start(memory, deliveredAtOnce)
    yield* TestClock.adjust("100 millis")
    assert.strictEqual(memory.settled.length, 1)
  })

/** Wake-ups that never come: the worker runs on its own timers alone. */
const silent = Wakeups.of({
  signal: () => Effect.void,
  inStatement: () => ({ notify: undefined, local: Effect.void }),
  wait: (_topic, atMost) => Effect.sleep(atMost),
  subscribe: () => Effect.void
})

/** Wake-ups this process signals to itself alone, on the test's clock. */
const local = () => {
  const latches = new Map<string, Latch.Latch>()
  const latch = (topic: string) => {
    let found = latches.get(topic)
    if (found === undefined) latches.set(topic, found = Latch.makeUnsafe(false))
    return found
  }
  return Wakeups.of({
    signal: (...topics) => Effect.forEach(topics, (topic) => latch(topic).open, { discard: true }),
    inStatement: () => ({ notify: undefined, local: Effect.void }),
    wait: (topic, atMost) =>
      latch(topic).await.pipe(Effect.timeoutOption(atMost), Effect.andThen(latch(topic).close), Effect.asVoid),
    subscribe: () => Effect.void
  })
}

const start = (
  memory: ReturnType<typeof memoryQueue>,
  handle: (delivery: Claimed) => Effect.Effect<{ outcome: Outcome; attempt: { durationMs: number } }>,
  wakeups: Wakeups["Service"] = silent,
  concurrency = 4
) =>
  runWorker({
    kind: "webhook",
    concurrency,
    perTarget: 2,
    leaseFor: "30 seconds",
    pollEvery: "5 seconds",
    handle
  }).pipe(Effect.provide(Layer.mergeAll(Layer.succeed(DeliveryQueue, memory.queue), Layer.succeed(Wakeups, wakeups))))

describe("the delivery worker on TestClock", () => {
  it.effect("with nothing due it claims again after the poll interval, not before", () =>
    Effect.gen(function*() {
      const memory = memoryQueue()
      yield* start(memory, deliveredAtOnce)
      yield* TestClock.adjust(Duration.zero)
      assert.strictEqual(memory.claims(), 1)
      yield* TestClock.adjust("4900 millis")
      assert.strictEqual(memory.claims(), 1, "no claim before the poll interval")
      yield* TestClock.adjust("200 millis")
      assert.strictEqual(memory.claims(), 2)
    }).pipe(Effect.scoped))

  it.effect("an empty claim's own answer is the wait: the next claim when it says the next delivery is due, nothing asked in between", () =>
    Effect.gen(function*() {
      const memory = memoryQueue(Option.some(new Date(2_000)))
      yield* start(memory, deliveredAtOnce)
      yield* TestClock.adjust(Duration.zero)
      assert.strictEqual(memory.claims(), 1)
      yield* TestClock.adjust("1900 millis")
      assert.strictEqual(memory.claims(), 1, "no claim before the instant answered")
      yield* TestClock.adjust("200 millis")
      assert.strictEqual(memory.claims(), 2)
      // After a send and its settle, the claim that follows answers too.
      memory.due.push(delivery(1))
      yield* TestClock.adjust("5 seconds")
      assert.strictEqual(memory.settled.length, 1)
      assert.strictEqual(memory.asked(), 0, "no statement of its own asked when the next delivery is due")
    }).pipe(Effect.scoped))

  it.effect("after a settle the log is asked again only when the settle saw rows of it waiting; a wakeup or recheck always asks it", () =>
    Effect.gen(function*() {
      const memory = memoryQueue()
      yield* firstSettled(memory)
      assert.deepStrictEqual(
        memory.statements,
        ["log", "rows"],
        "the first claim asks the log, then the per-row statement; the one after the settle asks neither"
      )
      memory.due.push(delivery(2))
      memory.logWaiting = true
      // The poll interval's recheck asks the log.
      yield* TestClock.adjust("5 seconds")
      assert.strictEqual(memory.settled.length, 2)
      assert.deepStrictEqual(
        memory.statements,
        ["log", "rows", "log", "rows", "log"],
        "after a settle that saw rows waiting, the log again"
      )
    }).pipe(Effect.scoped))

  it.effect("after a settle of the log's successes alone the per-row statement's last answer stands until its instant; any other settle runs it", () =>
    Effect.gen(function*() {
      const memory = memoryQueue(Option.some(new Date(60_000)))
      yield* firstSettled(memory)
      assert.deepStrictEqual(
        memory.statements,
        ["log", "rows"],
        "the first claim runs it (the log gives d1, it answers 60 s); the one after d1's settle does not"
      )
      // The poll interval's recheck runs it and it takes d2: after d2's
      // settle no answer stands, so the claim then runs it again.
      memory.dueRows.push(delivery(2))
      yield* TestClock.adjust("5 seconds")
      assert.strictEqual(memory.settled.length, 2)
      assert.deepStrictEqual(memory.statements.slice(2), ["log", "rows", "rows"])
      // A settle that is not the log's successes alone: the claim after it runs it.
      memory.rowsChanged = undefined
      memory.due.push(delivery(3))
      yield* TestClock.adjust("5 seconds")
      assert.strictEqual(memory.settled.length, 3)
      assert.deepStrictEqual(memory.statements.slice(5), ["log", "rows", "rows"])
    }).pipe(Effect.scoped))

  it.effect("an answer whose instant has come does not stand: the claim after the settle runs the per-row statement", () =>
    Effect.gen(function*() {
      const memory = memoryQueue(Option.some(new Date(50)))
      memory.due.push(delivery(1))
      yield* start(
        memory,
        () => Effect.as(Effect.sleep("100 millis"), { outcome: Outcome.delivered(), attempt: { durationMs: 100 } })
      )
      yield* TestClock.adjust("150 millis")
      assert.strictEqual(memory.settled.length, 1)
      assert.deepStrictEqual(memory.statements, ["log", "rows", "rows"])
    }).pipe(Effect.scoped))

  it.effect("a wakeup for rows of the log alone asks the log; a wakeup for any other asks both", () =>
    Effect.gen(function*() {
      const memory = memoryQueue(Option.some(new Date(60_000)))
      const wakeups = local()
      yield* start(memory, deliveredAtOnce, wakeups)
      yield* TestClock.adjust("10 millis")
      assert.deepStrictEqual(memory.statements, ["log", "rows"], "the first claim asks both")
      memory.due.push(delivery(1))
      yield* wakeups.signal(Topics.deliveryLog("webhook"))
      yield* TestClock.adjust("10 millis")
      assert.strictEqual(memory.settled.length, 1)
      assert.deepStrictEqual(memory.statements.slice(2), ["log"], "the log alone, and nothing after its settle")
      memory.dueRows.push(delivery(2))
      yield* wakeups.signal(Topics.deliveries("webhook"))
      yield* TestClock.adjust("10 millis")
      assert.strictEqual(memory.settled.length, 2)
      assert.deepStrictEqual(memory.statements.slice(3, 5), ["log", "rows"])
    }).pipe(Effect.scoped))

  it.effect("after a take that handed something out, the per-row statement runs at once while it finds something, else 100 ms after it last found nothing", () =>
    Effect.gen(function*() {
      const memory = memoryQueue(Option.some(new Date(60_000)))
      const wakeups = local()
      // Sends that outlast the test: no settle comes between the claims.
      yield* start(
        memory,
        () => Effect.as(Effect.sleep("10 seconds"), { outcome: Outcome.delivered(), attempt: { durationMs: 1 } }),
        wakeups,
        8
      )
      const claimAt = (millis: number, logged: ReadonlyArray<Claimed>, rows: ReadonlyArray<Claimed> = []) =>
        Effect.gen(function*() {
          yield* TestClock.setTime(millis)
          memory.due.push(...logged)
          memory.dueRows.push(...rows)
          const before = memory.statements.length
          yield* wakeups.signal(Topics.deliveries("webhook"))
          yield* TestClock.adjust(Duration.zero)
          return memory.statements.slice(before)
        })
      assert.deepStrictEqual(yield* claimAt(0, []), ["log", "rows"], "it found nothing at 0")
      assert.deepStrictEqual(yield* claimAt(10, [delivery(1)]), ["log"], "10 ms later, after a take of d1: not yet")
      assert.deepStrictEqual(
        yield* claimAt(100, [delivery(2, "t2")], [delivery(3, "t3")]),
        ["log", "rows"],
        "100 ms after it found nothing: it runs, and takes d3"
      )
      assert.deepStrictEqual(yield* claimAt(101, [delivery(4, "t4")]), ["log", "rows"], "it found something: at once")
      assert.strictEqual(memory.settled.length, 0)
      // The sends end before the worker's scope closes.
      yield* TestClock.adjust("11 seconds")
      assert.strictEqual(memory.settled.length, 4)
    }).pipe(Effect.scoped))

  it.effect("what the log hands out starts before the per-row statement runs", () =>
    Effect.gen(function*() {
      const memory = memoryQueue()
      memory.due.push(delivery(1))
      const started: Array<number> = []
      yield* start(memory, () =>
        Effect.sync(() => {
          started.push(memory.statements.length)
          return { outcome: Outcome.delivered(), attempt: { durationMs: 1 } }
        }))
      yield* TestClock.adjust("100 millis")
      assert.deepStrictEqual(started, [1], "d1 started after the log's take alone")
    }).pipe(Effect.scoped))

  it.effect("what a claim hands out is sent and its outcome settled: delivered, or a retry with its attempt", () =>
    Effect.gen(function*() {
      const memory = memoryQueue()
      memory.due.push(delivery(1), delivery(2, "t2"))
      yield* start(memory, (claimed) =>
        Effect.succeed(
          claimed.id === "d1"
            ? { outcome: Outcome.delivered(), attempt: { durationMs: 3 } }
            : { outcome: Outcome.retry("1 minute", "HTTP 503"), attempt: { durationMs: 5 } }
        ))
      yield* TestClock.adjust("1 second")
      const byId = new Map(memory.settled.map((item) => [item.claimed.id, item]))
      assert.strictEqual(byId.get("d1")?.outcome._tag, "Delivered")
      assert.strictEqual(byId.get("d2")?.outcome._tag, "Retry")
      assert.strictEqual(byId.get("d2")?.attempt.durationMs, 5)
      assert.deepStrictEqual(memory.released, [])
    }).pipe(Effect.scoped))

  it.effect("at shutdown what waited unsent is given back at once; a send still running gets its grace, then is left to its lease", () =>
    Effect.gen(function*() {
      const memory = memoryQueue()
      // Three to one target that may have two in flight: one waits.
      memory.due.push(delivery(1), delivery(2), delivery(3))
      const scope = yield* Scope.make()
      yield* start(memory, () => Effect.never).pipe(Scope.provide(scope))
      yield* TestClock.adjust("1 second")
      const closing = yield* Effect.forkChild(Scope.close(scope, Exit.void))
      yield* TestClock.adjust(Duration.zero)
      assert.deepStrictEqual(memory.released.map((claimed) => claimed.id), ["d3"], "given back at once")
      yield* TestClock.adjust("9 seconds")
      assert.isUndefined(closing.pollUnsafe(), "the sends under way still have their grace")
      yield* TestClock.adjust("30 seconds")
      yield* Fiber.join(closing)
      assert.deepStrictEqual(memory.settled, [], "nothing settled for a send that never ended")
    }))
})
