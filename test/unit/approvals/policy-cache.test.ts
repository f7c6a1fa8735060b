/**
 * The process's cache of approval rules: a rule is read once and kept for
 * POLICY_CACHE_MS, an announced change drops the organization's rules, a
 * read that raced a change is not kept, and the cache is bounded.
 */
import { assert, describe, it } from "@effect/vitest"
import { Deferred, Effect, Fiber } from "effect"
import { TestClock } from "effect/testing"
import { DEFAULT_POLICY } from "../../../src/approvals/Deadlines.ts"
import {
  type CachedRule,
  makePolicyCache,
  POLICY_CACHE_MS,
  POLICY_CACHE_ORGS,
  POLICY_CACHE_RULES_PER_ORG
} from "../../../src/approvals/PolicyCache.ts"

const allow: CachedRule = { rule: { ...DEFAULT_POLICY, mode: "allow" }, version: "1", conditions: [] }
const fallback: CachedRule = { rule: DEFAULT_POLICY, version: null, conditions: [] }

/** A loader answering from `stored`, counting its reads. */
const loader = (stored: Map<string, CachedRule>) => {
  const reads: Array<string> = []
  return {
    reads,
    load: (orgId: string, actionClass: string) =>
      Effect.sync(() => {
        reads.push(`${orgId}/${actionClass}`)
        return stored.get(`${orgId}/${actionClass}`) ?? fallback
      })
  }
}

describe("approval rule cache", () => {
  it.effect("a rule is read once, then kept until POLICY_CACHE_MS has passed", () =>
    Effect.gen(function*() {
      const stored = new Map([["o/a", allow]])
      const { load, reads } = loader(stored)
      const cache = makePolicyCache(load)
      assert.deepStrictEqual(yield* cache.get("o", "a"), allow)
      assert.deepStrictEqual(yield* cache.get("o", "b"), fallback)
      stored.set("o/a", fallback)
      yield* TestClock.adjust(POLICY_CACHE_MS - 1)
      assert.deepStrictEqual(yield* cache.get("o", "a"), allow, "within the bound: kept")
      assert.deepStrictEqual(reads, ["o/a", "o/b"])
      yield* TestClock.adjust(1)
      assert.deepStrictEqual(yield* cache.get("o", "a"), fallback, "after the bound: read again")
      assert.deepStrictEqual(reads, ["o/a", "o/b", "o/a"])
    }))

  it.effect("an announced change drops the organization's rules, not another's", () =>
    Effect.gen(function*() {
      const stored = new Map([["o/a", allow], ["p/a", allow]])
      const { load, reads } = loader(stored)
      const cache = makePolicyCache(load)
      yield* cache.get("o", "a")
      yield* cache.get("p", "a")
      stored.set("o/a", fallback)
      yield* cache.invalidate("o")
      assert.deepStrictEqual(yield* cache.get("o", "a"), fallback)
      assert.deepStrictEqual(yield* cache.get("p", "a"), allow)
      assert.deepStrictEqual(reads, ["o/a", "p/a", "o/a"])
    }))

  it.effect("a read that was under way when a change was announced is used once, not kept", () =>
    Effect.gen(function*() {
      const gate = yield* Deferred.make<void>()
      const started = yield* Deferred.make<void>()
      let reads = 0
      const cache = makePolicyCache(() =>
        Effect.gen(function*() {
          reads++
          if (reads === 1) {
            yield* Deferred.succeed(started, undefined)
            yield* Deferred.await(gate)
            return allow
          }
          return fallback
        })
      )
      const first = yield* Effect.forkChild(cache.get("o", "a"))
      yield* Deferred.await(started)
      yield* cache.invalidate("o")
      yield* Deferred.succeed(gate, undefined)
      assert.deepStrictEqual(yield* Fiber.join(first), allow)
      assert.deepStrictEqual(yield* cache.get("o", "a"), fallback, "the stale read was not kept")
      assert.strictEqual(reads, 2)
    }))

  it.effect("bounded: at most POLICY_CACHE_ORGS organizations and POLICY_CACHE_RULES_PER_ORG action classes each", () =>
    Effect.gen(function*() {
      const { load, reads } = loader(new Map())
      const cache = makePolicyCache(load)
      for (let i = 0; i <= POLICY_CACHE_ORGS; i++) yield* cache.get(`org-${i}`, "a")
      reads.length = 0
      yield* cache.get("org-0", "a")
      yield* cache.get(`org-${POLICY_CACHE_ORGS}`, "a")
      assert.deepStrictEqual(reads, ["org-0/a"], "the first organization made room for the last")
      for (let i = 0; i <= POLICY_CACHE_RULES_PER_ORG; i++) yield* cache.get("many", `class-${i}`)
      reads.length = 0
      yield* cache.get("many", `class-${POLICY_CACHE_RULES_PER_ORG}`)
      yield* cache.get("many", "class-0")
      assert.deepStrictEqual(reads, ["many/class-0"])
    }))
})
