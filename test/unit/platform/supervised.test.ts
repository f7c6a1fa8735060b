import { assert, describe, it } from "@effect/vitest"
import { Effect, Fiber, Logger, Ref } from "effect"
import { TestClock } from "effect/testing"
import { makeJsonLogger } from "../../../src/platform/Logging.ts"
import { supervisedLoop } from "../../../src/platform/Supervised.ts"

describe("supervised background loops", () => {
  it.effect("a failing or dying round never ends the loop; one log line per outage and one when it runs again", () =>
    Effect.gen(function*() {
      const lines: Array<string> = []
      const rounds = yield* Ref.make(0)
      // Rounds 2-4 fail (a typed failure, then defects); the rest succeed.
      const round = Ref.updateAndGet(rounds, (n) => n + 1).pipe(
        Effect.flatMap((n) =>
          n === 2
            ? Effect.fail("database away")
            : n === 3 || n === 4
            ? Effect.die(new Error("boom"))
            : Effect.sleep("100 millis")
        )
      )
      const fiber = yield* supervisedLoop({ name: "the test loop", round }).pipe(
        Effect.provide(Logger.layer([makeJsonLogger((line) => lines.push(line))])),
        Effect.forkChild
      )
      yield* TestClock.adjust("100 millis") // round 1 done, round 2 fails at once
      assert.strictEqual(yield* Ref.get(rounds), 2)
      yield* TestClock.adjust("1 second") // round 3 (retry) dies
      yield* TestClock.adjust("1 second") // round 4 dies
      yield* TestClock.adjust("1 second") // round 5 succeeds after 100 ms
      yield* TestClock.adjust("100 millis")
      yield* TestClock.adjust("500 millis")
      assert.isAtLeast(yield* Ref.get(rounds), 7)
      const failed = lines.filter((line) => line.includes("the test loop failed"))
      const again = lines.filter((line) => line.includes("the test loop runs again"))
      assert.strictEqual(failed.length, 1)
      assert.strictEqual(again.length, 1)
      yield* Fiber.interrupt(fiber)
      const after = yield* Ref.get(rounds)
      yield* TestClock.adjust("10 seconds")
      assert.strictEqual(yield* Ref.get(rounds), after, "interruption ends the loop")
    }))
})
