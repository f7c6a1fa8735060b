/**
 * The embedded session's turns: one holder at a time, organizations served
 * in turn (not in the order they asked), each organization's own waiters
 * in order, and a waiter that is interrupted gives up its place without
 * holding anyone up.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Fiber } from "effect"
import { makeEmbeddedTurns } from "../../../src/database/embedded/EmbeddedTurns.ts"
import { RequestFacts } from "../../../src/platform/Logging.ts"

const as = (orgId: string | undefined) => <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  Effect.provideService(effect, RequestFacts, orgId === undefined ? undefined : { orgId })

/** Every fiber forked so far has run up to where it waits. */
const settle = Effect.gen(function*() {
  for (let i = 0; i < 10; i++) yield* Effect.yieldNow
})

describe("the embedded session's turns", () => {
  it.effect("organizations take turns; each one's waiters keep their order", () =>
    Effect.gen(function*() {
      const turns = makeEmbeddedTurns()
      const served: Array<string> = []
      let holders = 0
      yield* turns.take
      const fibers = []
      // Three of a, then one of b, then two of c and a background party's one.
      for (
        const [name, org] of [
          ["a1", "a"],
          ["a2", "a"],
          ["a3", "a"],
          ["b1", "b"],
          ["c1", "c"],
          ["c2", "c"],
          ["w1", undefined]
        ] as const
      ) {
        fibers.push(
          yield* Effect.forkChild(
            as(org)(turns.withTurn(Effect.gen(function*() {
              holders += 1
              assert.strictEqual(holders, 1, "one holder at a time")
              served.push(name)
              yield* Effect.yieldNow
              holders -= 1
            })))
          )
        )
        yield* settle
      }
      yield* turns.release
      for (const fiber of fibers) yield* Fiber.join(fiber)
      // First come, first served would be a1 a2 a3 b1 c1 c2 w1.
      assert.deepStrictEqual(served, ["a1", "b1", "c1", "w1", "a2", "c2", "a3"])
    }))

  it.effect("a waiter interrupted gives up its place; the next party's waiter has the turn", () =>
    Effect.gen(function*() {
      const turns = makeEmbeddedTurns()
      const served: Array<string> = []
      yield* turns.take
      const gone = yield* Effect.forkChild(as("a")(turns.withTurn(Effect.sync(() => served.push("a1")))))
      yield* settle
      const next = yield* Effect.forkChild(as("b")(turns.withTurn(Effect.sync(() => served.push("b1")))))
      yield* settle
      yield* Fiber.interrupt(gone)
      yield* turns.release
      yield* Fiber.join(next)
      assert.deepStrictEqual(served, ["b1"])
      // The turn is free again: a new taker has it at once.
      yield* turns.withTurn(Effect.sync(() => served.push("c1")))
      assert.deepStrictEqual(served, ["b1", "c1"])
    }))

  it.effect("a failure in a turn ends it", () =>
    Effect.gen(function*() {
      const turns = makeEmbeddedTurns()
      const failed = yield* Effect.flip(turns.withTurn(Effect.fail("no")))
      assert.strictEqual(failed, "no")
      yield* turns.withTurn(Effect.void)
    }))
})
