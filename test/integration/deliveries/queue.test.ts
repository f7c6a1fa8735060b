import { assert, describe, layer } from "@effect/vitest"
import { Deferred, Duration, Effect, Exit, Logger, Option, Scope } from "effect"
import { SqlClient } from "effect/sql"
import { DeliveryQueue, Outcome } from "../../../src/deliveries/DeliveryQueue.ts"
import { runWorker } from "../../../src/deliveries/worker/DeliveryWorker.ts"
import { newId } from "../../../src/platform/Ids.ts"
import { makeJsonLogger } from "../../../src/platform/Logging.ts"
import { eventually } from "../../support/http.ts"
import { newOrg, QueueLive } from "./support.ts"

const base = (orgId: string, targetId: string) => ({ orgId, kind: "webhook" as const, targetId, capacity: 100 })
const ok = { durationMs: 1 }

layer(QueueLive, { excludeTestServices: true })("the shared delivery queue", (it) => {
  describe("claiming with leases", () => {
    it.effect("a claimed delivery is sending under one lease; nobody else can claim it meanwhile", () =>
      Effect.gen(function*() {
        const queue = yield* DeliveryQueue
        const org = yield* newOrg
        const target = newId()
        const created = yield* queue.enqueue({ ...base(org, target), label: "approval.requested a1" })
        assert.strictEqual(created.status, "queued")
        const claimed = yield* queue.claim("webhook", { limit: 10, leaseFor: "1 minute", perTarget: 10 })
        const mine = claimed.filter((d) => d.targetId === target)
        assert.strictEqual(mine.length, 1)
        assert.strictEqual(mine[0]!.status, "sending")
        assert.strictEqual(mine[0]!.attempts, 1)
        const again = yield* queue.claim("webhook", { limit: 10, leaseFor: "1 minute", perTarget: 10 })
        assert.isFalse(again.some((d) => d.targetId === target))
        assert.isTrue(yield* queue.settle(mine[0]!, Outcome.delivered(), { statusCode: 204, durationMs: 12 }))
        const [record] = yield* queue.list({ orgId: org, kind: "webhook", targetId: target })
        assert.strictEqual(record!.status, "delivered")
        assert.isNotNull(record!.finishedAt)
        const attempts = yield* queue.attempts(created.id)
        assert.deepStrictEqual(attempts.map((a) => [a.attempt, a.statusCode]), [[1, 204]])
      }))

    for (const kind of ["webhook", "email"] as const) {
      it.effect(`a lease that runs out (the process died) lets another claim it; the old holder can no longer settle (${kind})`, () =>
        Effect.gen(function*() {
          const queue = yield* DeliveryQueue
          const org = yield* newOrg
          const target = newId()
          yield* queue.enqueue({ ...base(org, target), kind })
          const first = (yield* queue.claim(kind, { limit: 50, leaseFor: "150 millis", perTarget: 10 }))
            .find((d) => d.targetId === target)
          const second = yield* eventually(
            queue.claim(kind, { limit: 50, leaseFor: "1 minute", perTarget: 10 }).pipe(
              Effect.map((rows) => rows.find((d) => d.targetId === target))
            ),
            { what: "the expired lease to be claimable" }
          )
          assert.strictEqual(second.id, first!.id)
          // A row leased on its own counts every claim as an attempt; a
          // row of the log counts the attempts whose outcome was recorded
          // (the lost one never was).
          assert.strictEqual(second.attempts, kind === "webhook" ? 1 : 2)
          assert.isFalse(yield* queue.settle(first!, Outcome.delivered(), ok))
          assert.isTrue(yield* queue.settle(second, Outcome.delivered(), ok))
          const [record] = yield* queue.list({ orgId: org, kind, targetId: target })
          assert.strictEqual(record!.status, "delivered")
        }))
    }

    it.effect("a retry waits until its time, then is claimable again", () =>
      Effect.gen(function*() {
        const queue = yield* DeliveryQueue
        const org = yield* newOrg
        const target = newId()
        yield* queue.enqueue(base(org, target))
        const claimed = (yield* queue.claim("webhook", { limit: 50, leaseFor: "1 minute", perTarget: 10 }))
          .find((d) => d.targetId === target)
        const at = new Date(Date.now() + 1_000)
        yield* queue.settle(claimed!, Outcome.retry("1 second", "HTTP 503"), { statusCode: 503, durationMs: 3 })
        const [waiting] = yield* queue.list({ orgId: org, kind: "webhook", targetId: target })
        assert.strictEqual(waiting!.status, "retrying")
        assert.strictEqual(waiting!.lastError, "HTTP 503")
        const early = (yield* queue.claim("webhook", { limit: 50, leaseFor: "1 minute", perTarget: 10 }))
          .find((d) => d.targetId === target)
        // Only a machine too busy to claim within the second may see it claimed here, and then it was due.
        if (early !== undefined) assert.isAtLeast(Date.now(), at.getTime(), "claimed before its time")
        const later = early ?? (yield* eventually(
          queue.claim("webhook", { limit: 50, leaseFor: "1 minute", perTarget: 10 }).pipe(
            Effect.map((rows) => rows.find((d) => d.targetId === target))
          )
        ))
        assert.isAtLeast(Date.now(), at.getTime())
        assert.strictEqual(later.attempts, 2)
      }))

    it.effect("one busy target takes at most perTarget slots; other targets are claimed beside it", () =>
      Effect.gen(function*() {
        const queue = yield* DeliveryQueue
        const org = yield* newOrg
        const busy = newId()
        const other = newId()
        for (let i = 0; i < 5; i++) yield* queue.enqueue(base(org, busy))
        yield* queue.enqueue(base(org, other))
        const claimed = yield* queue.claim("webhook", { limit: 50, leaseFor: "1 minute", perTarget: 2 })
        assert.strictEqual(claimed.filter((d) => d.targetId === busy).length, 2)
        assert.strictEqual(claimed.filter((d) => d.targetId === other).length, 1)
        const more = yield* queue.claim("webhook", { limit: 50, leaseFor: "1 minute", perTarget: 2 })
        assert.strictEqual(more.filter((d) => d.targetId === busy).length, 0, "live leases count against perTarget")
      }))
    it.effect("a target whose latest attempt failed has at most perFailingTarget live leases, all claims together", () =>
      Effect.gen(function*() {
        const queue = yield* DeliveryQueue
        const sql = yield* SqlClient.SqlClient
        const org = yield* newOrg
        const failing = newId()
        const healthy = newId()
        for (let i = 0; i < 5; i++) yield* queue.enqueue(base(org, failing))
        for (let i = 0; i < 5; i++) yield* queue.enqueue(base(org, healthy))
        yield* sql`UPDATE delivery_targets SET consecutive_failures = 1 WHERE id = ${failing}`
        const options = { limit: 50, leaseFor: "1 minute", perTarget: 4, perFailingTarget: 1 } as const
        const claimed = yield* queue.claim("webhook", options)
        assert.strictEqual(claimed.filter((d) => d.targetId === failing).length, 1)
        assert.strictEqual(claimed.filter((d) => d.targetId === healthy).length, 4)
        // Another process's claim finds the probe's lease live: nothing more.
        const more = yield* queue.claim("webhook", options)
        assert.strictEqual(more.filter((d) => d.targetId === failing).length, 0)
        yield* queue.failUndelivered("webhook", failing, "test over")
        yield* queue.failUndelivered("webhook", healthy, "test over")
      }))
  })

  describe("bounded queues", () => {
    it.effect("a delivery past capacity is recorded as failed saying the queue was full, never dropped", () =>
      Effect.gen(function*() {
        const queue = yield* DeliveryQueue
        const org = yield* newOrg
        const target = newId()
        yield* queue.enqueue({ ...base(org, target), capacity: 2 })
        yield* queue.enqueue({ ...base(org, target), capacity: 2 })
        const third = yield* queue.enqueue({ ...base(org, target), capacity: 2, eventId: newId() })
        assert.strictEqual(third.status, "failed")
        assert.match(third.lastError ?? "", /queue full/)
        assert.strictEqual(yield* queue.undelivered("webhook", target), 2)
        assert.strictEqual((yield* queue.list({ orgId: org, kind: "webhook", targetId: target })).length, 3)
      }))
  })

  describe("replay", () => {
    it.effect("only a failed delivery is replayable; it keeps its id and event id and counts replays", () =>
      Effect.gen(function*() {
        const queue = yield* DeliveryQueue
        const org = yield* newOrg
        const target = newId()
        const eventId = newId()
        const created = yield* queue.enqueue({ ...base(org, target), eventId })
        const queued = yield* Effect.flip(queue.replay({ ...base(org, target), deliveryId: created.id }))
        assert.strictEqual(queued._tag, "DeliveryNotReplayable")
        const claimed = (yield* queue.claim("webhook", { limit: 50, leaseFor: "1 minute", perTarget: 10 }))
          .find((d) => d.targetId === target)
        yield* queue.settle(claimed!, Outcome.failed("HTTP 500 after the last retry"), {
          statusCode: 500,
          durationMs: 2
        })
        const replayed = yield* queue.replay({ ...base(org, target), deliveryId: created.id })
        assert.deepStrictEqual(replayed, { queued: true, id: created.id })
        const row = Option.getOrThrow(yield* queue.get({ orgId: org, kind: "webhook", deliveryId: created.id }))
        assert.strictEqual(row.status, "queued")
        assert.strictEqual(row.replays, 1)
        assert.strictEqual(row.eventId, eventId)
        assert.isNull(row.finishedAt)
      }))

    it.effect("a partial delivery, or one the caller says cannot be sent again, is not replayable", () =>
      Effect.gen(function*() {
        const queue = yield* DeliveryQueue
        const org = yield* newOrg
        const target = newId()
        const a = yield* queue.enqueue({ ...base(org, target), kind: "telemetry" })
        const b = yield* queue.enqueue({ ...base(org, target), kind: "telemetry" })
        const claimed = (yield* queue.claim("telemetry", { limit: 50, leaseFor: "1 minute", perTarget: 10 }))
          .filter((d) => d.targetId === target)
        yield* queue.settle(
          claimed.find((d) => d.id === a.id)!,
          Outcome.partial("2 spans rejected", { rejected_spans: 2 }),
          ok
        )
        yield* queue.settle(claimed.find((d) => d.id === b.id)!, Outcome.failed("HTTP 400"), ok)
        const partial = yield* Effect.flip(queue.replay({ ...base(org, target), kind: "telemetry", deliveryId: a.id }))
        assert.strictEqual(partial._tag, "DeliveryNotReplayable")
        const expired = yield* Effect.flip(
          queue.replay({
            ...base(org, target),
            kind: "telemetry",
            deliveryId: b.id,
            replayable: (d) => d.payload !== null
          })
        )
        assert.strictEqual(expired._tag, "DeliveryNotReplayable")
        const row = Option.getOrThrow(yield* queue.get({ orgId: org, kind: "telemetry", deliveryId: a.id }))
        assert.strictEqual(row.meta.rejected_spans, 2)
      }))

    it.effect("replay into a full queue is DeliveryQueueFull; another organization's delivery is DeliveryNotFound", () =>
      Effect.gen(function*() {
        const queue = yield* DeliveryQueue
        const org = yield* newOrg
        const stranger = yield* newOrg
        const target = newId()
        yield* queue.enqueue({ ...base(org, target), capacity: 1 })
        const overflow = yield* queue.enqueue({ ...base(org, target), capacity: 1 })
        assert.strictEqual(overflow.status, "failed")
        const full = yield* Effect.flip(queue.replay({ ...base(org, target), capacity: 1, deliveryId: overflow.id }))
        assert.strictEqual(full._tag, "DeliveryQueueFull")
        const foreign = yield* Effect.flip(queue.replay({ ...base(stranger, target), deliveryId: overflow.id }))
        assert.strictEqual(foreign._tag, "DeliveryNotFound")
        const wrongTarget = yield* Effect.flip(queue.replay({ ...base(org, newId()), deliveryId: overflow.id }))
        assert.strictEqual(wrongTarget._tag, "DeliveryNotFound")
      }))
  })

  describe("cooldown", () => {
    it.effect("consecutive failures cool the target down: nothing of it is claimed, a replay waits for the end; success resets", () =>
      Effect.gen(function*() {
        const queue = yield* DeliveryQueue
        const org = yield* newOrg
        const target = newId()
        // Long enough that a busy machine still reads the cooldown before it ends.
        const policy = { after: 1, base: "3 seconds", cap: "3 seconds" } as const
        const first = yield* queue.enqueue(base(org, target))
        yield* queue.enqueue(base(org, target))
        const claimed = (yield* queue.claim("webhook", { limit: 50, leaseFor: "1 minute", perTarget: 1 }))
          .find((d) => d.targetId === target)
        assert.strictEqual(claimed!.id, first.id)
        yield* queue.settle(claimed!, Outcome.failed("HTTP 500"), ok, policy)
        const until = Option.getOrThrow(yield* queue.cooldownUntil(target))
        const during = yield* queue.claim("webhook", { limit: 50, leaseFor: "1 minute", perTarget: 1 })
        assert.isFalse(during.some((d) => d.targetId === target), "nothing is claimed while cooling down")
        yield* queue.replay({ ...base(org, target), deliveryId: first.id })
        const replayed = Option.getOrThrow(yield* queue.get({ orgId: org, kind: "webhook", deliveryId: first.id }))
        assert.isAtLeast(replayed.nextAttemptAt.getTime(), until.getTime() - 1, "the replay waits for the cooldown")
        const after = yield* eventually(
          queue.claim("webhook", { limit: 50, leaseFor: "1 minute", perTarget: 1 }).pipe(
            Effect.map((rows) => rows.find((d) => d.targetId === target))
          ),
          { what: "the cooldown to end" }
        )
        assert.isAtLeast(Date.now(), until.getTime())
        assert.strictEqual(after.targetFailures, 1)
        yield* queue.settle(after, Outcome.delivered(), ok, policy)
        assert.isTrue(Option.isNone(yield* queue.cooldownUntil(target)))
      }))
  })

  describe("removing a target", () => {
    // Two waiting deliveries of a new target, one of them claimed (in flight).
    const targetWithOneInFlight = Effect.gen(function*() {
      const queue = yield* DeliveryQueue
      const org = yield* newOrg
      const target = newId()
      yield* queue.enqueue(base(org, target))
      yield* queue.enqueue(base(org, target))
      const inFlight = (yield* queue.claim("webhook", { limit: 50, leaseFor: "1 minute", perTarget: 1 }))
        .find((d) => d.targetId === target)
      return { queue, org, target, inFlight: inFlight! }
    })
    const allFailedWith = (org: string, target: string, reason: string) =>
      Effect.gen(function*() {
        const queue = yield* DeliveryQueue
        const rows = yield* queue.list({ orgId: org, kind: "webhook", targetId: target })
        assert.deepStrictEqual(rows.map((r) => [r.status, r.lastError]), [["failed", reason], ["failed", reason]])
      })

    it.effect("fails every undelivered delivery with the reason; an in-flight one can no longer settle", () =>
      Effect.gen(function*() {
        const { inFlight, org, queue, target } = yield* targetWithOneInFlight
        assert.strictEqual(yield* queue.failUndelivered("webhook", target, "endpoint deleted"), 2)
        assert.isFalse(yield* queue.settle(inFlight, Outcome.delivered(), ok))
        yield* allFailedWith(org, target, "endpoint deleted")
      }))

    it.effect("for good: also drops the target's health record, which stays gone", () =>
      Effect.gen(function*() {
        const { inFlight, org, queue, target } = yield* targetWithOneInFlight
        const sql = yield* SqlClient.SqlClient
        yield* queue.settle(inFlight, Outcome.retry(Duration.zero, "HTTP 500"), ok, {
          after: 5,
          base: "1 minute",
          cap: "1 minute"
        })
        assert.lengthOf(yield* sql`SELECT 1 FROM delivery_targets WHERE id = ${target}`, 1)
        assert.strictEqual(yield* queue.removeTarget("webhook", target, "endpoint deleted"), 2)
        assert.lengthOf(yield* sql`SELECT 1 FROM delivery_targets WHERE id = ${target}`, 0)
        yield* allFailedWith(org, target, "endpoint deleted")
      }))
  })

  describe("the worker loop", () => {
    it.effect("a target whose sends hang holds only its own slots; other targets' deliveries all go out", () =>
      Effect.gen(function*() {
        const queue = yield* DeliveryQueue
        const org = yield* newOrg
        const slow = newId()
        const fast = newId()
        const release = yield* Deferred.make<void>()
        for (let i = 0; i < 3; i++) yield* queue.enqueue({ ...base(org, slow), kind: "telemetry" })
        for (let i = 0; i < 10; i++) yield* queue.enqueue({ ...base(org, fast), kind: "telemetry" })
        const scope = yield* Scope.make()
        yield* runWorker({
          kind: "telemetry",
          concurrency: 4,
          perTarget: 1,
          leaseFor: "1 minute",
          pollEvery: "200 millis",
          handle: (delivery) =>
            Effect.as(
              delivery.targetId === slow ? Deferred.await(release) : Effect.void,
              { outcome: Outcome.delivered(), attempt: ok }
            )
        }).pipe(Scope.provide(scope))
        yield* eventually(
          Effect.map(queue.undelivered("telemetry", fast), (n) => n === 0 ? true : undefined),
          { what: "the fast target to drain" }
        )
        assert.strictEqual(yield* queue.undelivered("telemetry", slow), 3, "the hanging target is still held")
        yield* Deferred.succeed(release, undefined)
        yield* eventually(
          Effect.map(queue.undelivered("telemetry", slow), (n) => n === 0 ? true : undefined),
          { what: "the slow target to drain once released" }
        )
        yield* Scope.close(scope, Exit.void)
      }))

    it.effect("a settle that fails is logged, not lost silently; the delivery stays leased and is sent again later", () =>
      Effect.gen(function*() {
        const queue = yield* DeliveryQueue
        const org = yield* newOrg
        const target = newId()
        const delivery = yield* queue.enqueue({ ...base(org, target), kind: "email" })
        const lines: Array<string> = []
        const scope = yield* Scope.make()
        yield* runWorker({
          kind: "email",
          concurrency: 2,
          perTarget: 1,
          leaseFor: "1 minute",
          pollEvery: "200 millis",
          handle: () => Effect.succeed({ outcome: Outcome.delivered(), attempt: ok })
        }).pipe(
          Effect.provideService(DeliveryQueue, {
            ...queue,
            settleMany: () => Effect.die(new Error("database unreachable"))
          }),
          Effect.provide(Logger.layer([makeJsonLogger((line) => lines.push(line))])),
          Scope.provide(scope)
        )
        const logged = yield* eventually(
          Effect.sync(() => lines.find((line) => line.includes(delivery.id))),
          { what: "the failed settle to be logged" }
        )
        assert.include(logged, "ERROR")
        assert.include(logged, "database unreachable")
        yield* Scope.close(scope, Exit.void)
        const row = Option.getOrThrow(yield* queue.get({ orgId: org, kind: "email", deliveryId: delivery.id }))
        assert.strictEqual(row.status, "sending")
      }))
  })
})
