/**
 * The request path's key cache keeps the rules of the cache it replaced:
 * only found keys, for at most the lifetime from the start of the read that
 * found them; invalidation at once, also of a read in flight; bounded.
 */
import { assert, describe, it } from "@effect/vitest"
import { Deferred, Effect, Fiber, Option } from "effect"
import type { Principal } from "../../../src/api/Security.ts"
import { makeKeyCache } from "../../../src/identity/KeyCache.ts"

const principal = (keyId: string): Principal => ({ orgId: "org", keyId, actor: keyId, scopes: new Set() })

const setup = (capacity = 10) => {
  let clock = 0
  const reads: Array<string> = []
  const known = new Set(["a", "b", "c"])
  const cache = makeKeyCache({
    lookup: (hash) =>
      Effect.sync(() => {
        reads.push(hash)
        return known.has(hash) ? Option.some(principal(hash)) : Option.none()
      }),
    ttlMs: 2000,
    capacity,
    now: () => clock
  })
  return { cache, reads, known, advance: (ms: number) => (clock += ms) }
}

describe("the key cache", () => {
  it.effect("a held principal is served without a read, whatever the clock, until it is invalidated", () =>
    Effect.gen(function*() {
      const { advance, cache, reads } = setup()
      cache.hold("held", principal("held"))
      advance(1_000_000)
      assert.strictEqual(Option.getOrThrow(yield* cache.get("held")).keyId, "held")
      assert.deepStrictEqual(reads, [])
      cache.invalidate("held")
      assert.isTrue(Option.isNone(yield* cache.get("held")))
      assert.deepStrictEqual(reads, ["held"])
    }))

  it.effect("a found key is served from memory until the lifetime runs out, then read again; an unknown key is never kept", () =>
    Effect.gen(function*() {
      const { cache, reads, known, advance } = setup()
      assert.isTrue(Option.isSome(yield* cache.get("a")))
      advance(1999)
      assert.isTrue(Option.isSome(yield* cache.get("a")))
      assert.deepStrictEqual(reads, ["a"])
      // Revoked by another process: refused once the lifetime has run out.
      known.delete("a")
      advance(1)
      assert.isTrue(Option.isNone(yield* cache.get("a")))
      assert.isTrue(Option.isNone(yield* cache.get("x")))
      assert.isTrue(Option.isNone(yield* cache.get("x")))
      assert.deepStrictEqual(reads, ["a", "a", "x", "x"])
    }))

  it.effect("invalidation drops a key at once, and a read in flight meanwhile stores nothing", () =>
    Effect.gen(function*() {
      const { cache, reads } = setup()
      yield* cache.get("b")
      cache.invalidate("b")
      yield* cache.get("b")
      assert.deepStrictEqual(reads, ["b", "b"])
      cache.invalidateAll()
      yield* cache.get("b")
      assert.deepStrictEqual(reads, ["b", "b", "b"])

      // A read that began before the revocation must not put the key back.
      const gate = yield* Deferred.make<void>()
      let slowReads = 0
      const slow = makeKeyCache({
        lookup: () =>
          Effect.andThen(Deferred.await(gate), Effect.sync(() => (slowReads++, Option.some(principal("c"))))),
        ttlMs: 2000,
        capacity: 10,
        now: () => 0
      })
      const inFlight = yield* Effect.forkChild(slow.get("c"))
      yield* Effect.yieldNow
      slow.invalidate("c")
      yield* Deferred.succeed(gate, undefined)
      yield* Fiber.join(inFlight)
      yield* slow.get("c")
      assert.strictEqual(slowReads, 2)
    }))

  it.effect("holds at most its capacity, dropping the oldest", () =>
    Effect.gen(function*() {
      const { cache, reads } = setup(2)
      yield* cache.get("a")
      yield* cache.get("b")
      yield* cache.get("c")
      yield* cache.get("b")
      yield* cache.get("a")
      assert.deepStrictEqual(reads, ["a", "b", "c", "a"])
    }))
})
