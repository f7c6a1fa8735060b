/**
 * The delivery worker's admission rules (`src/deliveries/worker/Admission.ts`),
 * property-tested: random claims, send ends, recordings, cooldowns and the
 * passing of time (read from `TestClock`), after every step the model's
 * decisions keep every bound it promises.
 */
import { assert, describe, it } from "@effect/vitest"
import { Clock, Effect } from "effect"
import { TestClock } from "effect/testing"
import fc from "fast-check"
import {
  Admission,
  type AdmissionLimits,
  type Entry,
  UNSETTLED_PER_TARGET
} from "../../../src/deliveries/worker/Admission.ts"

const TARGETS = ["t0", "t1", "t2", "t3", "t4"]
/** t0..t2 share a host; t3 and t4 have none. */
const groupOf = (target: string) => (["t0", "t1", "t2"].includes(target) ? "org host" : undefined)

type Step =
  | { readonly _tag: "Claim"; readonly target: number; readonly n: number; readonly failing: boolean }
  | { readonly _tag: "End"; readonly pick: number; readonly failed: boolean | undefined }
  | { readonly _tag: "Record"; readonly pick: number }
  | { readonly _tag: "Cool"; readonly target: number; readonly forMs: number }
  | { readonly _tag: "Wait"; readonly ms: number }

const step: fc.Arbitrary<Step> = fc.oneof(
  fc.record({
    _tag: fc.constant("Claim" as const),
    target: fc.nat(TARGETS.length - 1),
    n: fc.integer({ min: 1, max: 12 }),
    failing: fc.boolean()
  }),
  fc.record({ _tag: fc.constant("End" as const), pick: fc.nat(), failed: fc.option(fc.boolean(), { nil: undefined }) }),
  fc.record({ _tag: fc.constant("Record" as const), pick: fc.nat() }),
  fc.record({
    _tag: fc.constant("Cool" as const),
    target: fc.nat(TARGETS.length - 1),
    forMs: fc.integer({ min: 1, max: 5_000 })
  }),
  fc.record({ _tag: fc.constant("Wait" as const), ms: fc.integer({ min: 0, max: 3_000 }) })
)

const limits: fc.Arbitrary<AdmissionLimits> = fc.record({
  concurrency: fc.integer({ min: 1, max: 20 }),
  perTarget: fc.integer({ min: 1, max: 6 }),
  perFailingTarget: fc.constant(1),
  perGroup: fc.integer({ min: 1, max: 8 }),
  maxWaitMs: fc.integer({ min: 500, max: 4_000 })
})

interface Item {
  readonly id: number
  readonly target: string
}

/** Runs the steps, checking every decision; answers a description of the first broken rule, if any. */
const simulate = (rules: AdmissionLimits, steps: ReadonlyArray<Step>) =>
  Effect.gen(function*() {
    const model = new Admission<Item>(rules)
    const inFlight: Array<Entry<Item>> = []
    const unrecorded: Array<string> = []
    const failingNow = new Map<string, boolean>()
    const coolingUntil = new Map<string, number>()
    let nextId = 0
    const released = new Set<number>()
    const started = new Set<number>()

    const admit = Effect.gen(function*() {
      const now = yield* Clock.currentTimeMillis
      const decision = model.admit(now, false)
      for (const item of decision.giveBack) {
        if (started.has(item.id) || released.has(item.id)) return `item ${item.id} given back twice or after starting`
        released.add(item.id)
      }
      for (const entry of decision.start) {
        if (started.has(entry.item.id) || released.has(entry.item.id)) return `item ${entry.item.id} started twice`
        started.add(entry.item.id)
        const until = coolingUntil.get(entry.target)
        if (until !== undefined && until > now) return `started for ${entry.target} while it cools down`
        if (now - entry.claimedAt > rules.maxWaitMs) return `started after waiting ${now - entry.claimedAt} ms`
        inFlight.push(entry)
      }
      // The bounds, from the outside.
      if (inFlight.length > rules.concurrency) return `concurrency ${inFlight.length}`
      for (const target of TARGETS) {
        const sending = inFlight.filter((e) => e.target === target).length
        const unsettled = sending + unrecorded.filter((t) => t === target).length
        if (sending > rules.perTarget) return `${target}: ${sending} in flight`
        if (unsettled > UNSETTLED_PER_TARGET * rules.perTarget) return `${target}: ${unsettled} unsettled`
        if (failingNow.get(target) === true && decision.start.some((e) => e.target === target) && unsettled > 1) {
          return `failing ${target} got a request beside ${unsettled - 1} others`
        }
      }
      const hosts = inFlight.filter((e) => e.group !== undefined)
      const onHost = hosts.length
      const targetsOnHost = new Set(hosts.map((e) => e.target)).size
      if (onHost > Math.max(rules.perGroup, 0) + targetsOnHost - 1 && onHost > rules.perGroup) {
        return `host group: ${onHost} in flight over ${targetsOnHost} targets`
      }
      if (decision.start.some((e) => e.group !== undefined) && onHost > rules.perGroup) {
        // Beyond the bound only a target's first request may start.
        for (const entry of decision.start) {
          if (entry.group === undefined) continue
          if (
            inFlight.filter((e) => e.target === entry.target).length > 1
          ) return `host group over its bound for ${entry.target}'s second request`
        }
      }
      return undefined
    })

    for (const s of steps) {
      switch (s._tag) {
        case "Claim": {
          const target = TARGETS[s.target]!
          // A claim reflects what the database knows: recorded failures.
          if (!failingNow.has(target)) failingNow.set(target, s.failing)
          const now = yield* Clock.currentTimeMillis
          model.add(Array.from({ length: s.n }, () => ({
            item: { id: nextId++, target },
            target,
            group: groupOf(target),
            claimedAt: now,
            failing: s.failing
          })))
          // Claimable means it no longer cools down.
          coolingUntil.delete(target)
          break
        }
        case "End": {
          if (inFlight.length === 0) break
          const [entry] = inFlight.splice(s.pick % inFlight.length, 1)
          model.sendEnded(entry!, s.failed)
          if (s.failed !== undefined) {
            failingNow.set(entry!.target, s.failed)
            unrecorded.push(entry!.target)
          }
          break
        }
        case "Record": {
          if (unrecorded.length === 0) break
          const [target] = unrecorded.splice(s.pick % unrecorded.length, 1)
          model.recorded(target!)
          break
        }
        case "Cool": {
          const target = TARGETS[s.target]!
          const until = (yield* Clock.currentTimeMillis) + s.forMs
          coolingUntil.set(target, until)
          model.coolDown(new Map([[target, until]]), yield* Clock.currentTimeMillis)
          break
        }
        case "Wait":
          yield* TestClock.adjust(s.ms)
          break
      }
      const broken = yield* admit
      if (broken !== undefined) return broken
      if (model.inFlight !== inFlight.length) return `model counts ${model.inFlight} in flight, ${inFlight.length} are`
    }
    // Nothing is lost: every claimed item started, was given back, or still waits.
    if (started.size + released.size + model.waiting !== nextId) return "an item was lost"
    return undefined
  })

describe("delivery admission (deterministic model)", () => {
  it.effect("every decision keeps the bounds: concurrency, per target, probing, unsettled, host group, cooldown, lease", () =>
    Effect.gen(function*() {
      const samples = fc.sample(fc.tuple(limits, fc.array(step, { minLength: 1, maxLength: 120 })), {
        numRuns: 300,
        seed: 4242
      })
      for (const [rules, steps] of samples) {
        const broken = yield* simulate(rules, steps)
        assert.isUndefined(broken, `${JSON.stringify(rules)}: ${broken}`)
      }
    }))

  it.effect("a failing target gets one request at a time; a healthy one its full share; targets take turns", () =>
    Effect.gen(function*() {
      const model = new Admission<number>({
        concurrency: 10,
        perTarget: 3,
        perFailingTarget: 1,
        perGroup: 100,
        maxWaitMs: 1_000
      })
      const now = yield* Clock.currentTimeMillis
      const entries = (target: string, failing: boolean, ids: Array<number>) =>
        ids.map((item) => ({ item, target, group: undefined, claimedAt: now, failing }))
      model.add([...entries("a", true, [1, 2, 3]), ...entries("b", false, [4, 5, 6, 7])])
      const first = model.admit(now, false)
      assert.deepStrictEqual(first.start.map((e) => e.item), [1, 4, 5, 6])
      // Paused (outcomes cannot be recorded): nothing starts.
      assert.deepStrictEqual(model.admit(now, true).start, [])
      // Its probe failed and is not recorded yet: still nothing for a.
      model.sendEnded(first.start[0]!, true)
      assert.deepStrictEqual(model.admit(now, false).start, [])
      model.recorded("a")
      assert.deepStrictEqual(model.admit(now, false).start.map((e) => e.item), [2])
    }))

  it.effect("what waited longer than the lease allows is given back, not started; so is everything of a target cooling down", () =>
    Effect.gen(function*() {
      const model = new Admission<number>({
        concurrency: 1,
        perTarget: 1,
        perFailingTarget: 1,
        perGroup: 100,
        maxWaitMs: 1_000
      })
      const t0 = yield* Clock.currentTimeMillis
      model.add([1, 2].map((item) => ({ item, target: "a", group: undefined, claimedAt: t0, failing: false })))
      model.add([3, 4].map((item) => ({ item, target: "b", group: undefined, claimedAt: t0, failing: false })))
      const first = model.admit(t0, false)
      assert.deepStrictEqual(first.start.map((e) => e.item), [1])
      model.coolDown(new Map([["b", t0 + 60_000]]), t0)
      yield* TestClock.adjust(1_500)
      const later = yield* Clock.currentTimeMillis
      model.sendEnded(first.start[0]!, false)
      const next = model.admit(later, false)
      assert.deepStrictEqual(next.start, [])
      assert.sameMembers([...next.giveBack], [2, 3, 4])
      assert.strictEqual(model.waiting, 0)
    }))

  it.effect("an organization's endpoints on one host share the group bound, but each may always have one request", () =>
    Effect.gen(function*() {
      const model = new Admission<string>({
        concurrency: 100,
        perTarget: 5,
        perFailingTarget: 1,
        perGroup: 4,
        maxWaitMs: 1_000
      })
      const now = yield* Clock.currentTimeMillis
      const add = (target: string, n: number) =>
        model.add(
          Array.from(
            { length: n },
            (_, i) => ({ item: `${target}${i}`, target, group: "org host", claimedAt: now, failing: false })
          )
        )
      add("a", 5)
      assert.strictEqual(model.admit(now, false).start.length, 4, "a fills the host's bound")
      assert.deepStrictEqual(model.saturatedTargets(), ["a"])
      add("b", 3)
      add("c", 3)
      const next = model.admit(now, false)
      assert.deepStrictEqual(next.start.map((e) => e.item), ["b0", "c0"], "one each, beyond the bound")
      assert.strictEqual(model.inFlightOfGroup("org host"), 6)
    }))

  it.effect("in flight plus unrecorded stays within four times perTarget; then a delivery waits only for recording (which should not linger)", () =>
    Effect.gen(function*() {
      const model = new Admission<number>({
        concurrency: 10,
        perTarget: 2,
        perFailingTarget: 1,
        perGroup: 100,
        maxWaitMs: 1_000
      })
      const now = yield* Clock.currentTimeMillis
      model.add(
        [1, 2, 3, 4, 5, 6, 7, 8, 9, 10].map((item) => ({
          item,
          target: "a",
          group: undefined,
          claimedAt: now,
          failing: false
        }))
      )
      const first = model.admit(now, false)
      assert.deepStrictEqual(first.start.map((e) => e.item), [1, 2])
      // At its bound of sends in flight, nothing unrecorded: sends hold it back, not recording.
      assert.isFalse(model.waitsForRecording())
      model.sendEnded(first.start[0]!, false)
      model.sendEnded(first.start[1]!, false)
      // Sends go on while outcomes wait to be recorded, up to eight unsettled (4 x perTarget).
      for (const expected of [[3, 4], [5, 6], [7, 8]]) {
        const next = model.admit(now, false)
        assert.deepStrictEqual(next.start.map((e) => e.item), expected)
        for (const entry of next.start) model.sendEnded(entry, false)
      }
      assert.strictEqual(UNSETTLED_PER_TARGET, 4)
      // Eight unrecorded, none in flight: only recording frees it.
      assert.deepStrictEqual(model.admit(now, false).start, [])
      assert.isTrue(model.waitsForRecording())
      model.recorded("a")
      assert.isFalse(model.waitsForRecording())
      assert.deepStrictEqual(model.admit(now, false).start.map((e) => e.item), [9])
    }))
})
