import { assert, describe, it } from "@effect/vitest"
import { Clock, Deferred, Effect, Fiber, Stream } from "effect"
import { TestClock } from "effect/testing"
import { HELD_RETRY_MS, KEEP_ALIVE, sessionFrames, type StoredEvent } from "../../../src/streams/SessionEvents.ts"

/** An in-memory session: its events, a read counter and a versioned wake-up like `SessionHub`. */
const fakeSession = () => {
  const events: Array<StoredEvent> = []
  let reads = 0
  let version = 0
  let changed = Deferred.makeUnsafe<void>()
  return {
    events,
    reads: () => reads,
    append: (name: string, data: unknown) =>
      Effect.gen(function*() {
        events.push({ seq: String(events.length + 1), name, data: JSON.stringify(data) })
        version++
        const old = changed
        changed = Deferred.makeUnsafe<void>()
        yield* Deferred.succeed(old, undefined)
      }),
    source: {
      read: (after: string) =>
        Effect.sync(() => {
          reads++
          return { rows: events.filter((e) => Number(e.seq) > Number(after)), held: false }
        }),
      version: Effect.sync(() => version),
      wait: (seen: number, ms: number) =>
        seen !== version ? Effect.void : Effect.raceFirst(Deferred.await(changed), Effect.sleep(ms))
    }
  }
}

describe("session stream frames (TestClock)", () => {
  it.effect("an idle stream reads at most once per poll interval and sends a keep-alive after each silence", () =>
    Effect.gen(function*() {
      const session = fakeSession()
      const frames: Array<string> = []
      const fiber = yield* sessionFrames({
        after: "0",
        ...session.source,
        keepAliveMs: 15_000,
        pollMs: 10_000,
        batch: 100
      }).pipe(
        Stream.runForEach((frame) => Effect.sync(() => frames.push(frame))),
        Effect.forkChild
      )
      for (let second = 0; second < 60; second++) yield* TestClock.adjust("1 second")
      // One read at start, then at most one per 10 s poll and one per 15 s keep-alive: 60 s idle costs ~11 reads, not 60.
      assert.isAtMost(session.reads(), 11)
      assert.strictEqual(frames.filter((f) => f === KEEP_ALIVE).length, 4)
      assert.strictEqual(frames[0], ": connected\n\n")
      yield* Fiber.interrupt(fiber)
    }))

  it.effect("an appended event wakes the stream at once; ids resume exactly after `after`", () =>
    Effect.gen(function*() {
      const session = fakeSession()
      yield* session.append("step:governed", { step_id: "a" })
      yield* session.append("step:governed", { step_id: "b" })
      const frames: Array<string> = []
      const fiber = yield* sessionFrames({
        after: "1",
        ...session.source,
        keepAliveMs: 15_000,
        pollMs: 10_000,
        batch: 100
      }).pipe(
        Stream.runForEach((frame) => Effect.sync(() => frames.push(frame))),
        Effect.forkChild
      )
      yield* TestClock.adjust("1 millis")
      assert.deepStrictEqual(frames, [": connected\n\n", `id: 2\nevent: step:governed\ndata: {"step_id":"b"}\n\n`])
      const readsBefore = session.reads()
      yield* session.append("tool:succeeded", { step_id: "b" })
      yield* TestClock.adjust("1 millis")
      assert.strictEqual(frames.at(-1), `id: 3\nevent: tool:succeeded\ndata: {"step_id":"b"}\n\n`)
      assert.strictEqual(session.reads(), readsBefore + 1)
      yield* Fiber.interrupt(fiber)
    }))

  it.effect("events held back are read again after 250 ms, then at doubling waits, not at the next poll", () =>
    Effect.gen(function*() {
      const session = fakeSession()
      yield* session.append("approval.approved", { approval_id: "a" })
      // The event exists but is not final until the fourth read.
      const times: Array<number> = []
      let held = 3
      const frames: Array<string> = []
      const fiber = yield* sessionFrames({
        after: "0",
        ...session.source,
        read: (after) =>
          Effect.gen(function*() {
            times.push(Number(yield* Clock.currentTimeMillis))
            const read = yield* session.source.read(after)
            return held-- > 0 ? { rows: [], held: true } : read
          }),
        keepAliveMs: 15_000,
        pollMs: 10_000,
        batch: 100
      }).pipe(
        Stream.runForEach((frame) => Effect.sync(() => frames.push(frame))),
        Effect.forkChild
      )
      for (let ms = 0; ms < 2_000; ms += 50) yield* TestClock.adjust("50 millis")
      assert.deepStrictEqual(times, [0, HELD_RETRY_MS, 3 * HELD_RETRY_MS, 7 * HELD_RETRY_MS])
      assert.strictEqual(frames.at(-1), `id: 1\nevent: approval.approved\ndata: {"approval_id":"a"}\n\n`)
      yield* Fiber.interrupt(fiber)
    }))
})
