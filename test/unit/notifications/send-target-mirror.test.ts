/**
 * The send-target mirror (`sendTargetNow`): what a lookup found, as fresh
 * as the cache's entries unless a sweep confirms it; a change through this
 * process wins over a lookup that began before it; concurrent sends join
 * one lookup; nothing is kept for an endpoint once its lookups end.
 */
import { assert, describe, it } from "@effect/vitest"
import type { Clock } from "effect"
import type { SendTarget } from "../../../src/notifications/send/SendTargets.ts"
import { makeSendTargetMirror, SEND_TARGET_IDLE_MS } from "../../../src/notifications/send/TargetMirror.ts"

const target = (url: string): SendTarget => ({
  url,
  active: true,
  deactivatedReason: null,
  secrets: ["whsec"],
  headers: []
})

/** A clock the test moves. */
const testClock = () => {
  let now = 1_000
  return {
    clock: { currentTimeMillisUnsafe: () => now } as Clock.Clock,
    advance: (ms: number) => {
      now += ms
    }
  }
}

describe("send-target mirror", () => {
  it("answers what a lookup found until it is as old as the cache's entries", () => {
    const { advance, clock } = testClock()
    const mirror = makeSendTargetMirror<SendTarget>(clock, 1_000)
    const lookup = mirror.began("o:e")
    mirror.found("o:e", lookup, target("https://a.example/"), "s1")
    mirror.ended("o:e", lookup)
    assert.strictEqual(mirror.now("o:e")?.url, "https://a.example/")
    advance(999)
    assert.strictEqual(mirror.now("o:e")?.url, "https://a.example/")
    advance(1)
    assert.isUndefined(mirror.now("o:e"))
  })

  it("a lookup that began before a change leaves nothing; one that began after it does", () => {
    const mirror = makeSendTargetMirror<SendTarget>(testClock().clock, 1_000)
    const before = mirror.began("o:e")
    mirror.changed("o:e")
    const after = mirror.began("o:e")
    mirror.found("o:e", before, target("https://old.example/"), "s1")
    mirror.ended("o:e", before)
    assert.isUndefined(mirror.now("o:e"))
    mirror.found("o:e", after, target("https://new.example/"), "s2")
    mirror.ended("o:e", after)
    assert.strictEqual(mirror.now("o:e")?.url, "https://new.example/")
    mirror.changed("o:e")
    assert.isUndefined(mirror.now("o:e"))
  })

  it("a lookup in flight is there to join until it ends, or until a change makes it stale", () => {
    const mirror = makeSendTargetMirror<SendTarget>(testClock().clock, 1_000)
    assert.isUndefined(mirror.running("o:e"))
    const first = mirror.began("o:e")
    assert.strictEqual(mirror.running("o:e"), first)
    mirror.ended("o:e", first)
    assert.isUndefined(mirror.running("o:e"))
    const before = mirror.began("o:e")
    mirror.changed("o:e")
    assert.isUndefined(mirror.running("o:e"))
    const after = mirror.began("o:e")
    assert.strictEqual(mirror.running("o:e"), after)
    mirror.ended("o:e", before)
    assert.strictEqual(mirror.running("o:e"), after)
  })

  it("keeps nothing for an endpoint once its lookups have ended, whatever changed meanwhile", () => {
    const mirror = makeSendTargetMirror<SendTarget>(testClock().clock, 1_000)
    for (let i = 0; i < 100; i++) {
      const key = `o:e${i}`
      const lookup = mirror.began(key)
      if (i % 2 === 0) mirror.changed(key)
      mirror.changed(`o:other${i}`)
      mirror.ended(key, lookup)
    }
    assert.strictEqual(mirror.watched(), 0)
  })

  it("a sweep that reads the same stamp trusts the entry from its start; another stamp, or none, drops it", () => {
    const { advance, clock } = testClock()
    const mirror = makeSendTargetMirror<SendTarget>(clock, 1_000)
    for (const key of ["o:same", "o:other", "o:gone"]) {
      const lookup = mirror.began(key)
      mirror.found(key, lookup, target(`https://${key.slice(2)}.example/`), "s1")
      mirror.ended(key, lookup)
    }
    advance(800)
    const startedAt = clock.currentTimeMillisUnsafe()
    assert.deepStrictEqual(mirror.toCheck(), [["o:same", "s1"], ["o:other", "s1"], ["o:gone", "s1"]])
    assert.isTrue(mirror.confirm("o:same", "s1", startedAt))
    assert.isFalse(mirror.confirm("o:other", "s2", startedAt))
    assert.isFalse(mirror.confirm("o:gone", undefined, startedAt))
    advance(900)
    // 1 700 ms after its lookup, 900 after the sweep began.
    assert.strictEqual(mirror.now("o:same")?.url, "https://same.example/")
    assert.isUndefined(mirror.now("o:other"))
    assert.isUndefined(mirror.now("o:gone"))
    advance(100)
    assert.isUndefined(mirror.now("o:same"))
  })

  it("a sweep's changed stamp also voids what a lookup in flight would leave", () => {
    const mirror = makeSendTargetMirror<SendTarget>(testClock().clock, 1_000)
    const first = mirror.began("o:e")
    mirror.found("o:e", first, target("https://old.example/"), "s1")
    mirror.ended("o:e", first)
    const inFlight = mirror.began("o:e")
    mirror.toCheck()
    assert.isFalse(mirror.confirm("o:e", "s2", 0))
    mirror.found("o:e", inFlight, target("https://old.example/"), "s1")
    mirror.ended("o:e", inFlight)
    assert.isUndefined(mirror.now("o:e"))
  })

  it("an entry nobody read for the idle time is dropped, not checked; one read within it stays swept", () => {
    const { advance, clock } = testClock()
    const mirror = makeSendTargetMirror<SendTarget>(clock, 1_000)
    for (const key of ["o:read", "o:idle"]) {
      const lookup = mirror.began(key)
      mirror.found(key, lookup, target("https://a.example/"), "s1")
      mirror.ended(key, lookup)
    }
    // Read every 2 s, as one endpoint of many is: kept by each sweep in between.
    for (let at = 0; at <= 3 * SEND_TARGET_IDLE_MS; at += 500) {
      const startedAt = clock.currentTimeMillisUnsafe()
      for (const [key, stamp] of mirror.toCheck()) mirror.confirm(key, stamp, startedAt)
      if (at % 2_000 === 0) assert.isDefined(mirror.now("o:read"))
      advance(500)
    }
    assert.deepStrictEqual(mirror.toCheck().map(([key]) => key), ["o:read"])
    assert.isUndefined(mirror.now("o:idle"))
  })
})
