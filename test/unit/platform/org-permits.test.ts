/**
 * Permits per organization (`OrgPermits.ts`): one organization's effects
 * run at most `permits` at a time however many wait, another organization's
 * run beside them, and an organization's entry goes once nothing of it runs
 * or waits.
 */
import { assert, describe, it } from "@effect/vitest"
import { Deferred, Effect, Fiber } from "effect"
import { makeOrgPermits } from "../../../src/platform/OrgPermits.ts"

describe("permits per organization", () => {
  it.effect("one organization's effects run one at a time with one permit; another's do not wait for them", () =>
    Effect.gen(function*() {
      const permits = makeOrgPermits(1)
      let running = 0
      let most = 0
      const gate = yield* Deferred.make<void>()
      const held = (orgId: string) =>
        permits.withPermit(
          orgId,
          Effect.gen(function*() {
            running += 1
            most = Math.max(most, running)
            yield* Deferred.await(gate)
            running -= 1
          })
        )
      const fibers = yield* Effect.forEach(Array.from({ length: 8 }), () => Effect.forkChild(held("org-a")))
      yield* Effect.yieldNow
      assert.strictEqual(running, 1)
      // Another organization is served while org-a's seven wait.
      const other = yield* permits.withPermit("org-b", Effect.succeed("served"))
      assert.strictEqual(other, "served")
      assert.strictEqual(permits.active(), 1)
      yield* Deferred.succeed(gate, undefined)
      yield* Fiber.joinAll(fibers)
      assert.strictEqual(most, 1)
      assert.strictEqual(permits.active(), 0)
    }))

  it.effect("two permits: at most two at once, and an interrupted waiter leaves no entry behind", () =>
    Effect.gen(function*() {
      const permits = makeOrgPermits(2)
      let running = 0
      let most = 0
      const gate = yield* Deferred.make<void>()
      const held = permits.withPermit(
        "org-a",
        Effect.gen(function*() {
          running += 1
          most = Math.max(most, running)
          yield* Deferred.await(gate)
          running -= 1
        })
      )
      const fibers = yield* Effect.forEach(Array.from({ length: 5 }), () => Effect.forkChild(held))
      yield* Effect.yieldNow
      assert.strictEqual(running, 2)
      yield* Fiber.interruptAll(fibers)
      assert.strictEqual(permits.active(), 0)
      assert.strictEqual(most, 2)
    }))
})
