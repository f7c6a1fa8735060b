/**
 * The settle batcher on its own, on `TestClock`: outcomes are written in
 * batches of at most 256, a batch the database does not answer is kept and
 * tried again on the backoff schedule (50 ms doubling, at most 1 s apart)
 * until it answers, and only a batch refused while the database answers is
 * given up, after three tries.
 */
import { assert, describe, it } from "@effect/vitest"
import { Cause, Clock, Duration, Effect, Fiber } from "effect"
import { TestClock } from "effect/testing"
import { type Claimed, Outcome, type Settled, type SettleItem } from "../../../src/deliveries/DeliveryQueue.ts"
import {
  makeSettler,
  type NotWritten,
  type Pending,
  SETTLE_BATCH,
  settleRetry
} from "../../../src/deliveries/worker/Settle.ts"

const pending = (n: number): Pending => ({
  item: {
    claimed: { id: `d${n}`, orgId: "org", targetId: "t", leaseOwner: "me" } as Claimed,
    outcome: Outcome.delivered(),
    attempt: { durationMs: 1 }
  } satisfies SettleItem,
  target: "t"
})

const written = (items: ReadonlyArray<SettleItem>): Settled => ({
  held: items.map(() => true),
  coolingFor: new Map(),
  failures: new Map()
})

/** A settler over a fake queue; `settled` remembers what the worker was told. */
const harness = (queue: {
  settleMany: (items: ReadonlyArray<SettleItem>) => Effect.Effect<Settled>
  reachable: Effect.Effect<boolean>
}) =>
  Effect.gen(function*() {
    const settled: Array<{ readonly size: number; readonly givenUp: boolean }> = []
    const settler = yield* makeSettler(queue, {
      kind: "email",
      settled: (batch, result) =>
        Effect.sync(() => settled.push({ size: batch.length, givenUp: Cause.isCause(result) })),
      mayLinger: () => false,
      changed: () => {}
    })
    return { settler, settled }
  })

describe("the settle batcher", () => {
  it.effect("its retries are one Schedule: never exhausted while the database does not answer, ended by the third refusal", () =>
    Effect.gen(function*() {
      const why = (tag: NotWritten["_tag"]): NotWritten => ({ _tag: tag, cause: Cause.fail(tag) })
      // Twelve unanswered tries (past the backoff's cap), a refusal, two more unanswered, then refusals.
      const script = [
        ...Array(12).fill("Unanswered"),
        "Refused",
        "Unanswered",
        "Unanswered",
        "Refused",
        "Refused",
        "Refused"
      ]
      const tries: Array<number> = []
      const fiber = yield* Effect.suspend(() => {
        tries.push(tries.length)
        return Effect.fail(why(script[tries.length - 1] as NotWritten["_tag"]))
      }).pipe(Effect.retry(settleRetry()), Effect.flip, Effect.forkChild)
      yield* TestClock.adjust("1 minute")
      const last = yield* Fiber.join(fiber)
      assert.strictEqual(tries.length, 17, "given up at the third refusal, not before")
      assert.strictEqual(last._tag, "Refused")
    }))

  it.effect("a batch the database does not answer is tried again at 50, 100, 200, 400, 800 ms, then every second, and written when it answers", () =>
    Effect.gen(function*() {
      const tries: Array<number> = []
      let down = true
      const { settled, settler } = yield* harness({
        settleMany: (items) =>
          Effect.flatMap(Clock.currentTimeMillis, (now) => {
            tries.push(now)
            return down ? Effect.die(new Error("database unreachable")) : Effect.succeed(written(items))
          }),
        reachable: Effect.sync(() => !down)
      })
      settler.push(pending(1))
      yield* TestClock.adjust(Duration.zero)
      assert.strictEqual(tries.length, 1)
      assert.isTrue(settler.failing(), "nothing more starts while outcomes cannot be recorded")
      yield* TestClock.adjust("3550 millis")
      const gaps = tries.slice(1).map((at, i) => at - tries[i]!)
      assert.deepStrictEqual(gaps, [50, 100, 200, 400, 800, 1000, 1000])
      assert.deepStrictEqual(settled, [], "kept, never dropped")
      assert.strictEqual(settler.pending(), 1)
      down = false
      yield* TestClock.adjust("1 second")
      assert.deepStrictEqual(settled, [{ size: 1, givenUp: false }])
      assert.isFalse(settler.failing())
      assert.strictEqual(settler.pending(), 0)
    }).pipe(Effect.scoped))

  it.effect("a batch refused while the database answers is given up after three tries", () =>
    Effect.gen(function*() {
      let tries = 0
      const { settled, settler } = yield* harness({
        settleMany: () =>
          Effect.suspend(() => {
            tries++
            return Effect.die(new Error("cannot succeed"))
          }),
        reachable: Effect.succeed(true)
      })
      settler.push(pending(1))
      settler.push(pending(2))
      yield* TestClock.adjust("1 second")
      assert.strictEqual(tries, 3)
      assert.deepStrictEqual(settled, [{ size: 2, givenUp: true }])
      assert.isFalse(settler.failing())
      assert.strictEqual(settler.pending(), 0)
    }).pipe(Effect.scoped))

  it.effect("outcomes go out at most 256 per statement", () =>
    Effect.gen(function*() {
      const sizes: Array<number> = []
      const { settled, settler } = yield* harness({
        settleMany: (items) => Effect.sync(() => (sizes.push(items.length), written(items))),
        reachable: Effect.succeed(true)
      })
      for (let n = 0; n < SETTLE_BATCH + 44; n++) settler.push(pending(n))
      yield* TestClock.adjust(Duration.zero)
      assert.deepStrictEqual(sizes, [SETTLE_BATCH, 44])
      assert.deepStrictEqual(settled.map((s) => s.size), [SETTLE_BATCH, 44])
    }).pipe(Effect.scoped))
})
