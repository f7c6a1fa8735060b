/**
 * A target's rate limit (`DeliveryQueue.setRateLimit`): the claims of two
 * queues (two processes' worth, each its own lease owner, on the same
 * database) hand out, together, at most the burst plus `rate` per second of
 * the target, from the log and from rows on their own (replays), while an
 * unlimited target beside it is handed out at once; `nextDue` says when the
 * bucket has a token again. The bucket lives in the database only.
 */
import { PgClient } from "@effect/sql-pg"
import { assert, layer } from "@effect/vitest"
import { Clock, Effect } from "effect"
import { DatabaseInfo } from "../../../src/database/Database.ts"
import { Wakeups } from "../../../src/database/Wakeups.ts"
import { type Claimed, DeliveryQueue, make, Outcome } from "../../../src/deliveries/DeliveryQueue.ts"
import { newId } from "../../../src/platform/Ids.ts"
import { boom, newOrg, ok, QueueLive } from "./support.ts"

const RATE = 10
const webhook = (orgId: string, targetId: string) => ({ orgId, kind: "webhook" as const, targetId, capacity: 1_000 })
const options = { limit: 25, leaseFor: "1 minute", perTarget: 100 } as const
const deliver = (claimed: ReadonlyArray<Claimed>) =>
  claimed.map((c) => ({ claimed: c, outcome: Outcome.delivered(), attempt: ok }))

const anotherProcess = Effect.gen(function*() {
  return make(yield* PgClient.PgClient, yield* Wakeups, yield* DatabaseInfo)
})

/**
 * Two queues claiming side by side for `ms`, settling what they get at
 * once: when each of the limited target's deliveries was handed out (ms
 * from the start) and when the last of the unlimited one's was.
 */
const drain = (limited: string, free: string | undefined, ms: number) =>
  Effect.gen(function*() {
    const queues = [yield* DeliveryQueue, yield* anotherProcess]
    const start = yield* Clock.currentTimeMillis
    const times: Array<number> = []
    let freeDoneAt = -1
    let freeSeen = 0
    for (;;) {
      const now = (yield* Clock.currentTimeMillis) - start
      if (now > ms) break
      const claims = yield* Effect.all(queues.map((queue) => queue.claim("webhook", options)), { concurrency: 2 })
      const at = (yield* Clock.currentTimeMillis) - start
      for (const claimed of claims) {
        for (const c of claimed) {
          if (c.targetId === limited) times.push(at)
          if (c.targetId === free && ++freeSeen === 60) freeDoneAt = at
        }
      }
      yield* Effect.all(claims.map((claimed, i) => queues[i]!.settleMany(deliver(claimed))), { concurrency: 2 })
      yield* Effect.sleep("20 millis")
    }
    return { times, freeDoneAt }
  })

/** At every instant, no more was handed out than the burst (one second's worth) and the rate since allow. */
const honoured = (times: ReadonlyArray<number>) => {
  for (const [i, at] of times.entries()) {
    assert.isAtMost(i + 1, RATE + Math.floor((at / 1000) * RATE) + 1, `${i + 1} handed out by ${at} ms`)
  }
}

layer(QueueLive, { excludeTestServices: true })("a target's rate limit", (it) => {
  it.effect("from the log: two processes together hand out at most the burst plus the rate; an unlimited target is not held back", () =>
    Effect.gen(function*() {
      const queue = yield* DeliveryQueue
      const org = yield* newOrg
      const [limited, free] = [newId(), newId()]
      yield* queue.setRateLimit("webhook", org, limited, RATE)
      yield* queue.enqueueMany(Array.from({ length: 60 }, () => webhook(org, limited)))
      yield* queue.enqueueMany(Array.from({ length: 60 }, () => webhook(org, free)))
      const { freeDoneAt, times } = yield* drain(limited, free, 2_500)
      honoured(times)
      // Not starved either: the bucket refills at the rate.
      assert.isAtLeast(times.length, RATE + 2 * RATE - 5)
      assert.isAtLeast(freeDoneAt, 0, "every delivery of the unlimited target was handed out")
      assert.isBelow(freeDoneAt, 1_000)
    }))

  it.effect("rows on their own (replays) take from the same bucket; nextDue is when it has a token again", () =>
    Effect.gen(function*() {
      const queue = yield* DeliveryQueue
      const org = yield* newOrg
      const limited = newId()
      yield* queue.enqueueMany(Array.from({ length: 40 }, () => webhook(org, limited)))
      // All fail for good while unlimited, then the limit is set and they are replayed.
      const first = (yield* queue.claim("webhook", { ...options, limit: 200 })).filter((c) => c.targetId === limited)
      assert.strictEqual(first.length, 40)
      yield* queue.settleMany(first.map((c) => ({ claimed: c, outcome: Outcome.failed("HTTP 500"), attempt: boom })))
      yield* queue.setRateLimit("webhook", org, limited, RATE)
      for (const c of first) yield* queue.replay({ orgId: org, kind: "webhook", deliveryId: c.id, capacity: 1_000 })
      const { times } = yield* drain(limited, undefined, 2_000)
      honoured(times)
      assert.isAtLeast(times.length, RATE + 1.5 * RATE)
      assert.isBelow(times.length, 40)

      // The bucket is empty now: the next token is due within 1 / RATE s, not at once.
      const due = yield* queue.nextDue("webhook")
      assert.strictEqual(due._tag, "Some")
      const sql = yield* PgClient.PgClient
      const [row] = yield* sql<{ ahead: number }>`SELECT extract(epoch FROM ${
        due._tag === "Some" ? due.value : null
      }::timestamptz - now()) * 1000 AS ahead`
      assert.isAbove(Number(row!.ahead), -150)
      assert.isAtMost(Number(row!.ahead), 1000 / RATE + 5)

      // Lifting the limit hands out the rest at once.
      yield* queue.setRateLimit("webhook", org, limited, null)
      let rest = 0
      for (let i = 0; i < 5 && rest < 40 - times.length; i++) {
        yield* Effect.sleep("110 millis") // the per-row claim's pacing beside the log
        rest += (yield* queue.claim("webhook", { ...options, limit: 100 })).filter((c) => c.targetId === limited).length
      }
      assert.strictEqual(rest, 40 - times.length)
    }))
})
