import { assert, describe, it } from "@effect/vitest"
import { Cause, Data, Effect, Exit } from "effect"
import { Stale, whileStale } from "../../../src/platform/Optimistic.ts"

class Refused extends Data.TaggedError("Refused")<{}> {}

/** An attempt that is stale its first `staleTimes` runs, then answers its run's number. */
const attempts = (staleTimes: number) => {
  let runs = 0
  const attempt = Effect.suspend(() => {
    runs++
    return runs <= staleTimes ? Effect.fail(new Stale({ what: "the policy" })) : Effect.succeed(runs)
  })
  return { attempt, runs: () => runs }
}

describe("optimistic attempts", () => {
  it.effect("a stale attempt runs again, up to the limit in all", () =>
    Effect.gen(function*() {
      const late = attempts(4)
      assert.strictEqual(yield* whileStale(5, late.attempt), 5)
      const never = attempts(Infinity)
      const exit = yield* Effect.exit(whileStale(5, never.attempt))
      assert.strictEqual(never.runs(), 5)
      assert.isTrue(Exit.isFailure(exit) && Cause.hasDies(exit.cause))
      if (Exit.isFailure(exit)) {
        assert.include(String(Cause.squash(exit.cause)), "the policy kept changing during 5 attempts")
      }
    }))

  it.effect("any other failure ends the attempts at once", () =>
    Effect.gen(function*() {
      let runs = 0
      const error = yield* whileStale(5, Effect.suspend(() => (runs++, Effect.fail(new Refused())))).pipe(Effect.flip)
      assert.strictEqual(error._tag, "Refused")
      assert.strictEqual(runs, 1)
    }))
})
