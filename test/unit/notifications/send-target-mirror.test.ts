/**
 * The send-target mirror (`sendTargetNow`): what a lookup found, as fresh
 * as the cache's entries; a change through this process wins over a lookup
 * that began before it; nothing is kept for an endpoint once its lookups end.
 */
import { assert, describe, it } from "@effect/vitest"
import type { Clock } from "effect"
import type { SendTarget } from "../../../src/notifications/SendTargets.ts"
import { makeSendTargetMirror } from "../../../src/notifications/SendTargets.ts"

const target = (url: string): SendTarget => ({ url, active: true, deactivatedReason: null, secrets: ["whsec"], headers: [] })

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
    const mirror = makeSendTargetMirror(clock, 1_000)
    const lookup = mirror.began("o:e")
    mirror.found("o:e", lookup, target("https://a.example/"))
    mirror.ended("o:e", lookup)
    assert.strictEqual(mirror.now("o:e")?.url, "https://a.example/")
    advance(999)
    assert.strictEqual(mirror.now("o:e")?.url, "https://a.example/")
    advance(1)
    assert.isUndefined(mirror.now("o:e"))
  })

  it("a lookup that began before a change leaves nothing; one that began after it does", () => {
    const mirror = makeSendTargetMirror(testClock().clock, 1_000)
    const before = mirror.began("o:e")
    mirror.changed("o:e")
    const after = mirror.began("o:e")
    mirror.found("o:e", before, target("https://old.example/"))
    mirror.ended("o:e", before)
    assert.isUndefined(mirror.now("o:e"))
    mirror.found("o:e", after, target("https://new.example/"))
    mirror.ended("o:e", after)
    assert.strictEqual(mirror.now("o:e")?.url, "https://new.example/")
    mirror.changed("o:e")
    assert.isUndefined(mirror.now("o:e"))
  })

  it("keeps nothing for an endpoint once its lookups have ended, whatever changed meanwhile", () => {
    const mirror = makeSendTargetMirror(testClock().clock, 1_000)
    for (let i = 0; i < 100; i++) {
      const key = `o:e${i}`
      const lookup = mirror.began(key)
      if (i % 2 === 0) mirror.changed(key)
      mirror.changed(`o:other${i}`)
      mirror.ended(key, lookup)
    }
    assert.strictEqual(mirror.watched(), 0)
  })
})
