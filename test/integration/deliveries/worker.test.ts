/**
 * The worker loop's rules beyond claiming and settling: deliveries claimed
 * ahead of their turn (prefetch) go back unsent when their target starts to
 * cool down, when they waited too long to finish within their lease, and at
 * shutdown; a failing target is probed one request at a time.
 *
 * No test waits a guessed time: a slow send is a `handle` held until the
 * test lets it go (after seeing how many are in flight), and "nothing more
 * happens" is checked after the worker has demonstrably had its chance (its
 * next claims, its refused settles).
 */
import { assert, layer } from "@effect/vitest"
import { Clock, Deferred, Duration, Effect, Exit, Latch, Option, Scope } from "effect"
import { SqlClient, SqlError } from "effect/sql"
import { type Claimed, DeliveryQueue, Outcome } from "../../../src/deliveries/DeliveryQueue.ts"
import { UNSETTLED_PER_TARGET } from "../../../src/deliveries/worker/Admission.ts"
import { runWorker } from "../../../src/deliveries/worker/DeliveryWorker.ts"
import { newId } from "../../../src/platform/Ids.ts"
import { eventually } from "../../support/http.ts"
import { boom, newOrg, ok, QueueLive } from "./support.ts"

/** Counts sends in flight per target and remembers the highest count. */
const concurrencyMeter = () => {
  const now = new Map<string, number>()
  const peak = new Map<string, number>()
  return {
    around: <A>(target: string, effect: Effect.Effect<A>) =>
      Effect.acquireUseRelease(
        Effect.sync(() => {
          const n = (now.get(target) ?? 0) + 1
          now.set(target, n)
          peak.set(target, Math.max(peak.get(target) ?? 0, n))
        }),
        () => effect,
        () => Effect.sync(() => now.set(target, (now.get(target) ?? 1) - 1))
      ),
    now: (target: string) => now.get(target) ?? 0,
    peak: (target: string) => peak.get(target) ?? 0
  }
}

/** Sends that take as long as the test says: each waits until `releaseAll`. */
const heldSends = () => {
  const held: Array<Deferred.Deferred<void>> = []
  return {
    hold: Effect.flatMap(
      Deferred.make<void>(),
      (done) => Effect.andThen(Effect.sync(() => held.push(done)), Deferred.await(done))
    ),
    count: () => held.length,
    releaseAll: Effect.suspend(() =>
      Effect.forEach(held.splice(0), (done) => Deferred.succeed(done, undefined), { discard: true })
    )
  }
}

/**
 * The live clock, moved forward when the test says: the worker's own timing
 * (how long a delivery waited here) without waiting for it.
 */
const shiftedClock = Clock.clockWith((live) =>
  Effect.sync(() => {
    let aheadMs = 0
    const nanos = () => BigInt(aheadMs) * 1_000_000n
    const clock: Clock.Clock = {
      currentTimeMillisUnsafe: () => live.currentTimeMillisUnsafe() + aheadMs,
      currentTimeMillis: Effect.sync(() => live.currentTimeMillisUnsafe() + aheadMs),
      currentTimeNanosUnsafe: () => live.currentTimeNanosUnsafe() + nanos(),
      currentTimeNanos: Effect.sync(() => live.currentTimeNanosUnsafe() + nanos()),
      monotonicTimeNanosUnsafe: () => live.monotonicTimeNanosUnsafe() + nanos(),
      monotonicTimeNanos: Effect.sync(() => live.monotonicTimeNanosUnsafe() + nanos()),
      sleep: (duration) => live.sleep(duration)
    }
    return {
      clock,
      advance: (ms: number) => {
        aheadMs += ms
      }
    }
  })
)

/** The queue with its completed claims counted: the worker's claim loop has run when the count moves. */
const countingClaims = (queue: DeliveryQueue["Service"]) => {
  let claims = 0
  return {
    queue: {
      ...queue,
      claimOrNextDue: (...args: Parameters<typeof queue.claimOrNextDue>) =>
        Effect.tap(queue.claimOrNextDue(...args), () => Effect.sync(() => claims++))
    },
    claims: () => claims
  }
}

/** A new organization and target with `n` email deliveries waiting. */
const targetWith = (n: number) =>
  Effect.gen(function*() {
    const queue = yield* DeliveryQueue
    const org = yield* newOrg
    const target = newId()
    yield* queue.enqueueMany(
      Array.from({ length: n }, () => ({ orgId: org, kind: "email" as const, targetId: target, capacity: 50 }))
    )
    return { org, queue, target }
  })

layer(QueueLive, { excludeTestServices: true })("the delivery worker", (it) => {
  it.effect("a target that starts to cool down gets nothing more: what waited for it goes back unsent", () =>
    Effect.gen(function*() {
      const { org, queue, target } = yield* targetWith(10)
      const sent: Array<string> = []
      const counting = countingClaims(queue)
      // The first round's sends are under way together before either ends.
      const firstRound = yield* Latch.make(false)
      const scope = yield* Scope.make()
      yield* runWorker({
        kind: "email",
        concurrency: 8,
        perTarget: 2,
        prefetch: 20,
        leaseFor: "1 minute",
        handleTimeout: "1 second",
        pollEvery: "200 millis",
        cooldown: { after: 1, base: "1 minute", cap: "1 minute" },
        handle: (delivery) =>
          Effect.sync(() => sent.push(delivery.id)).pipe(
            Effect.andThen(firstRound.await),
            Effect.as({ outcome: Outcome.retry(Duration.zero, "HTTP 500"), attempt: boom })
          )
      }).pipe(Effect.provideService(DeliveryQueue, counting.queue), Scope.provide(scope))
      yield* eventually(Effect.sync(() => sent.length >= 2 ? true : undefined), { what: "the first round to start" })
      yield* firstRound.open
      yield* eventually(
        Effect.map(queue.cooldownUntil(target), Option.getOrUndefined),
        { what: "the target to cool down" }
      )
      const rows = yield* eventually(
        queue.list({ orgId: org, kind: "email", targetId: target }).pipe(
          Effect.map((rows) => rows.every((d) => d.status !== "sending") ? rows : undefined)
        ),
        { what: "the waiting deliveries to be given back" }
      )
      // Two more claims (and whatever they started) after the give-back:
      // the cooling target is not claimed again.
      const claimsThen = counting.claims()
      yield* eventually(Effect.sync(() => counting.claims() >= claimsThen + 2 ? true : undefined), {
        what: "two more claims"
      })
      yield* Scope.close(scope, Exit.void)
      assert.strictEqual(sent.length, 2, "only the first round (perTarget) was sent")
      const untouched = rows.filter((d) => !sent.includes(d.id))
      assert.strictEqual(untouched.length, 8)
      assert.isTrue(
        untouched.every((d) => d.status === "queued" && d.attempts === 0),
        "given back, attempt not counted"
      )
      yield* queue.failUndelivered("email", target, "test over")
    }))

  it.effect("a send that met an unavailable database is given back and sent again: its attempt not counted, its target not cooled down", () =>
    Effect.gen(function*() {
      const queue = yield* DeliveryQueue
      const org = yield* newOrg
      const target = newId()
      yield* queue.enqueueMany(
        Array.from({ length: 3 }, () => ({ orgId: org, kind: "webhook" as const, targetId: target, capacity: 50 }))
      )
      const tries = new Map<string, number>()
      const unreachable = new SqlError.SqlError({
        reason: new SqlError.ConnectionError({ cause: Object.assign(new Error("connect"), { code: "ECONNREFUSED" }) })
      })
      const scope = yield* Scope.make()
      yield* runWorker({
        kind: "webhook",
        concurrency: 8,
        perTarget: 4,
        prefetch: 4,
        leaseFor: "1 minute",
        handleTimeout: "1 second",
        pollEvery: "100 millis",
        // One failed attempt would cool the target down past the test's end.
        cooldown: { after: 1, base: "10 minutes", cap: "10 minutes" },
        handle: (delivery) =>
          Effect.suspend(() => {
            const n = (tries.get(delivery.id) ?? 0) + 1
            tries.set(delivery.id, n)
            return n === 1 ? Effect.die(unreachable) : Effect.succeed({ outcome: Outcome.delivered(), attempt: ok })
          })
      }).pipe(Scope.provide(scope))
      const rows = yield* eventually(
        queue.list({ orgId: org, kind: "webhook", targetId: target }).pipe(
          Effect.map((rows) => rows.every((d) => d.status === "delivered") ? rows : undefined)
        ),
        { what: "every delivery delivered on its second try" }
      )
      yield* Scope.close(scope, Exit.void)
      assert.deepStrictEqual([...tries.values()], [2, 2, 2])
      assert.isTrue(rows.every((d) => d.attempts === 1), "the try that met the outage is not an attempt")
      for (const row of rows) {
        assert.deepStrictEqual((yield* queue.attempts(row.id)).map((a) => a.statusCode), [204])
      }
      assert.isTrue(Option.isNone(yield* queue.cooldownUntil(target)), "the target is not blamed")
    }))

  it.effect("a failing target is probed one request at a time while a healthy one gets its full share", () =>
    Effect.gen(function*() {
      const queue = yield* DeliveryQueue
      const sql = yield* SqlClient.SqlClient
      const org = yield* newOrg
      const failing = newId()
      const healthy = newId()
      for (const target of [failing, healthy]) {
        yield* queue.enqueueMany(
          Array.from({ length: 6 }, () => ({ orgId: org, kind: "email" as const, targetId: target, capacity: 50 }))
        )
      }
      // Its latest attempts failed (no cooldown policy here, so it is still claimable).
      yield* sql`UPDATE delivery_targets SET consecutive_failures = 2 WHERE id = ${failing}`
      const meter = concurrencyMeter()
      // Sends are held until the first round is seen in flight.
      const gate = yield* Latch.make(false)
      const scope = yield* Scope.make()
      yield* runWorker({
        kind: "email",
        concurrency: 16,
        perTarget: 3,
        prefetch: 12,
        leaseFor: "1 minute",
        handleTimeout: "1 second",
        pollEvery: "200 millis",
        handle: (delivery) =>
          meter.around(delivery.targetId, gate.await).pipe(
            Effect.as(
              delivery.targetId === failing
                ? { outcome: Outcome.retry(Duration.zero, "HTTP 500"), attempt: boom }
                : { outcome: Outcome.delivered(), attempt: ok }
            )
          )
      }).pipe(Scope.provide(scope))
      yield* eventually(
        Effect.sync(() => meter.now(healthy) >= 3 && meter.now(failing) >= 1 ? true : undefined),
        { what: "the first round to be in flight" }
      )
      yield* gate.open
      yield* eventually(
        Effect.map(queue.undelivered("email", healthy), (n) => n === 0 ? true : undefined),
        { what: "the healthy target to drain" }
      )
      yield* eventually(
        queue.list({ orgId: org, kind: "email", targetId: failing }).pipe(
          Effect.map((rows) => rows.filter((d) => d.attempts >= 2).length >= 6 ? true : undefined)
        ),
        { what: "every delivery of the failing target to be tried twice" }
      )
      yield* Scope.close(scope, Exit.void)
      assert.strictEqual(meter.peak(failing), 1)
      assert.strictEqual(meter.peak(healthy), 3)
      yield* queue.failUndelivered("email", failing, "test over")
    }))

  it.effect("with a lease too short to prefetch (SVC_WEBHOOK_LEASE=10s beside a 5 s send) a failing target is still probed one request at a time", () =>
    Effect.gen(function*() {
      const queue = yield* DeliveryQueue
      const sql = yield* SqlClient.SqlClient
      const org = yield* newOrg
      const dead = newId()
      yield* queue.enqueueMany(
        Array.from({ length: 8 }, () => ({ orgId: org, kind: "email" as const, targetId: dead, capacity: 50 }))
      )
      yield* sql`UPDATE delivery_targets SET consecutive_failures = 5 WHERE id = ${dead}`
      const meter = concurrencyMeter()
      const sends = heldSends()
      let tries = 0
      const scope = yield* Scope.make()
      // The webhook worker's shape: 10 s lease, 5 s send deadline, prefetch
      // wanted but impossible (a waiting delivery could not finish in time).
      yield* runWorker({
        kind: "email",
        concurrency: 64,
        perTarget: 16,
        prefetch: 256,
        leaseFor: "10 seconds",
        handleTimeout: "5 seconds",
        pollEvery: "200 millis",
        handle: () =>
          meter.around(dead, sends.hold).pipe(
            Effect.andThen(Effect.sync(() => tries++)),
            Effect.as({ outcome: Outcome.retry(Duration.zero, "HTTP 500"), attempt: boom })
          )
      }).pipe(Scope.provide(scope))
      // Each probe is held until the test has looked: whatever the worker
      // started meanwhile is in flight beside it.
      while (tries < 12) {
        yield* eventually(Effect.sync(() => sends.count() > 0 ? true : undefined), { what: "the next probe" })
        const before = tries
        yield* sends.releaseAll
        yield* eventually(Effect.sync(() => tries > before ? true : undefined), { what: "the probe to end" })
      }
      yield* Scope.close(scope, Exit.void)
      assert.strictEqual(meter.peak(dead), 1, "never more than one request at a time to a failing target")
      yield* queue.failUndelivered("email", dead, "test over")
    }))

  it.effect("at shutdown the deliveries waiting here go back at once; the one in flight keeps its lease", () =>
    Effect.gen(function*() {
      const { org, queue, target } = yield* targetWith(5)
      const started = yield* Deferred.make<string>()
      const scope = yield* Scope.make()
      yield* runWorker({
        kind: "email",
        concurrency: 4,
        perTarget: 1,
        prefetch: 5,
        leaseFor: "1 minute",
        handleTimeout: "1 second",
        pollEvery: "200 millis",
        handle: (delivery) => Deferred.succeed(started, delivery.id).pipe(Effect.andThen(Effect.never))
      }).pipe(Scope.provide(scope))
      const inFlight = yield* Deferred.await(started)
      yield* eventually(
        queue.list({ orgId: org, kind: "email", targetId: target }).pipe(
          Effect.map((rows) => rows.every((d) => d.status === "sending") ? true : undefined)
        ),
        { what: "all five to be claimed" }
      )
      yield* Scope.close(scope, Exit.void)
      const rows = yield* queue.list({ orgId: org, kind: "email", targetId: target })
      const [sending, rest] = [rows.filter((d) => d.id === inFlight), rows.filter((d) => d.id !== inFlight)]
      assert.deepStrictEqual(sending.map((d) => d.status), ["sending"])
      assert.deepStrictEqual(rest.map((d) => [d.status, d.attempts]), Array.from({ length: 4 }, () => ["queued", 0]))
      yield* queue.failUndelivered("email", target, "test over")
    }))

  it.effect("while outcomes cannot be recorded nothing more is sent, to any target; what was claimed waits for the database", () =>
    Effect.gen(function*() {
      // Two targets: each alone stays within its unsettled bound
      // (UNSETTLED_PER_TARGET times perTarget), so only the worker's own
      // pause keeps the second target from sending more once recording fails.
      const { queue, target: quick } = yield* targetWith(10)
      const { target: slow } = yield* targetWith(10)
      const sent = new Map<string, number>()
      const slowSends = heldSends()
      let claims = 0
      let refused = 0
      const scope = yield* Scope.make()
      yield* runWorker({
        kind: "email",
        concurrency: 8,
        perTarget: 2,
        prefetch: 10,
        leaseFor: "1 minute",
        handleTimeout: "1 second",
        pollEvery: "100 millis",
        handle: (delivery) =>
          Effect.sync(() => sent.set(delivery.targetId, (sent.get(delivery.targetId) ?? 0) + 1)).pipe(
            // The slow target's sends last until the test lets them end.
            Effect.andThen(delivery.targetId === slow ? slowSends.hold : Effect.void),
            Effect.as({ outcome: Outcome.delivered(), attempt: ok })
          )
      }).pipe(
        // The database goes away after the first claim.
        Effect.provideService(DeliveryQueue, {
          ...queue,
          claimOrNextDue: (kind, options) =>
            claims++ === 0 ? queue.claimOrNextDue(kind, options) : Effect.die(new Error("database unreachable")),
          nextDue: () => Effect.die(new Error("database unreachable")),
          settleMany: () =>
            Effect.suspend(() => {
              refused++
              return Effect.die(new Error("database unreachable"))
            }),
          reachable: Effect.succeed(false)
        }),
        Scope.provide(scope)
      )
      // Both targets' first sends start together; the slow ones are held.
      yield* eventually(Effect.sync(() => slowSends.count() === 2 && (sent.get(quick) ?? 0) > 0 ? true : undefined), {
        what: "the first sends"
      })
      // The quick target's outcomes could not be recorded (twice: the
      // worker knows it cannot record).
      yield* eventually(Effect.sync(() => refused >= 2 ? true : undefined), { what: "settles to be refused twice" })
      // The slow target's sends end now: its unsettled bound (8) would let
      // it start more, but nothing may start while recording fails.
      yield* slowSends.releaseAll
      const refusedThen = refused
      yield* eventually(Effect.sync(() => refused >= refusedThen + 2 ? true : undefined), {
        what: "two more refused settles"
      })
      yield* Scope.close(scope, Exit.void)
      assert.strictEqual(sent.get(slow), 2, "the slow target started nothing more once recording failed")
      // Sent before the first failure to record came back: at most the
      // quick target's limit of sends not yet recorded.
      assert.isAtMost(sent.get(quick) ?? 0, UNSETTLED_PER_TARGET * 2, "nothing more went out once recording failed")
      yield* queue.failUndelivered("email", quick, "test over")
      yield* queue.failUndelivered("email", slow, "test over")
    }))

  it.effect("outcomes the database could not take are recorded as soon as it answers again: nothing is sent twice, nobody waits for the lease", () =>
    Effect.gen(function*() {
      const { org, queue, target } = yield* targetWith(10)
      const sent: Array<string> = []
      let down = true
      let refused = 0
      const unreachable = Effect.suspend(() => {
        refused++
        return Effect.die(new Error("database unreachable"))
      })
      const scope = yield* Scope.make()
      yield* runWorker({
        kind: "email",
        concurrency: 8,
        perTarget: 2,
        prefetch: 10,
        leaseFor: "1 minute",
        handleTimeout: "1 second",
        pollEvery: "100 millis",
        handle: (delivery) =>
          Effect.sync(() => sent.push(delivery.id)).pipe(Effect.as({ outcome: Outcome.delivered(), attempt: ok }))
      }).pipe(
        // Claims work; then the database stops answering until `down` is cleared.
        Effect.provideService(DeliveryQueue, {
          ...queue,
          settleMany: (items) => down ? unreachable : queue.settleMany(items),
          reachable: Effect.sync(() => !down)
        }),
        Scope.provide(scope)
      )
      yield* eventually(Effect.sync(() => refused >= 3 ? true : undefined), {
        what: "settles to be refused a few times"
      })
      const sentWhileDown = sent.length
      assert.isAtMost(
        sentWhileDown,
        UNSETTLED_PER_TARGET * 2,
        "nothing more went out while outcomes could not be recorded"
      )
      // Three more refusals later, still nothing more.
      const refusedThen = refused
      yield* eventually(Effect.sync(() => refused >= refusedThen + 3 ? true : undefined), {
        what: "three more refusals"
      })
      assert.strictEqual(sent.length, sentWhileDown, "nothing went out between the refusals")
      down = false
      // Well within the one-minute lease.
      yield* eventually(
        Effect.map(queue.undelivered("email", target), (n) => n === 0 ? true : undefined),
        { what: "all ten to be recorded delivered", timeoutMs: 10_000 }
      )
      yield* Scope.close(scope, Exit.void)
      assert.strictEqual(sent.length, 10)
      assert.strictEqual(new Set(sent).size, 10, "none was sent twice")
      const rows = yield* queue.list({ orgId: org, kind: "email", targetId: target })
      assert.isTrue(rows.every((d) => d.status === "delivered" && d.attempts === 1))
    }))

  it.effect("a delivery that waited too long to finish within its lease is given back and claimed afresh, not sent late", () =>
    Effect.gen(function*() {
      const { queue, target } = yield* targetWith(3)
      const seen: Array<Claimed> = []
      const firstSend = yield* Deferred.make<void>()
      const clock = yield* shiftedClock
      const scope = yield* Scope.make()
      // Lease 6 s, sends take at most 0.5 s: a delivery may wait here 3.5 s.
      yield* runWorker({
        kind: "email",
        concurrency: 4,
        perTarget: 1,
        prefetch: 3,
        leaseFor: "6 seconds",
        handleTimeout: "500 millis",
        pollEvery: "200 millis",
        handle: (delivery) =>
          Effect.suspend(() => {
            seen.push(delivery)
            // The first send holds the only slot until the test lets it end.
            return seen.length === 1 ? Deferred.await(firstSend) : Effect.void
          }).pipe(Effect.as({ outcome: Outcome.delivered(), attempt: ok }))
      }).pipe(Effect.provideService(Clock.Clock, clock.clock), Scope.provide(scope))
      yield* eventually(Effect.sync(() => seen.length === 1 ? true : undefined), { what: "the first send" })
      // It overstays its declared time: 4 s pass for the worker, beyond the 3.5 s the others may wait.
      clock.advance(4_000)
      yield* Deferred.succeed(firstSend, undefined)
      yield* eventually(
        Effect.map(queue.undelivered("email", target), (n) => n === 0 ? true : undefined),
        { what: "all three to be delivered" }
      )
      yield* Scope.close(scope, Exit.void)
      assert.strictEqual(seen.length, 3)
      const [first, ...later] = seen
      assert.isTrue(later.every((d) => d.leaseOwner !== first!.leaseOwner), "sent under a new claim, not the stale one")
      assert.isTrue(later.every((d) => d.attempts === 1), "giving back did not count an attempt")
    }))

  it.effect("a send the direct handle takes is settled from its callback, never handed to handle; one it declines goes to handle", () =>
    Effect.gen(function*() {
      const { org, queue, target } = yield* targetWith(12)
      const direct: Array<string> = []
      const inFibers: Array<string> = []
      const scope = yield* Scope.make()
      yield* runWorker({
        kind: "email",
        concurrency: 8,
        perTarget: 4,
        leaseFor: "1 minute",
        pollEvery: "200 millis",
        // Takes every other delivery; settles it later, from a timer, as an exchange's callback would.
        handleDirect: (delivery, done) => {
          if (Number(delivery.seq) % 2 === 0) return false
          direct.push(delivery.id)
          setTimeout(() => done({ outcome: Outcome.delivered(), attempt: ok }), 1)
          return true
        },
        handle: (delivery) =>
          Effect.sync(() => inFibers.push(delivery.id)).pipe(Effect.as({ outcome: Outcome.delivered(), attempt: ok }))
      }).pipe(Scope.provide(scope))
      const rows = yield* eventually(
        queue.list({ orgId: org, kind: "email", targetId: target }).pipe(
          Effect.map((rows) => rows.every((d) => d.status === "delivered") ? rows : undefined)
        ),
        { what: "every delivery delivered" }
      )
      yield* Scope.close(scope, Exit.void)
      assert.strictEqual(direct.length, 6)
      assert.strictEqual(inFibers.length, 6)
      assert.isTrue(direct.every((id) => !inFibers.includes(id)), "a delivery taken directly never reaches handle")
      assert.sameMembers([...direct, ...inFibers], rows.map((d) => d.id))
      assert.isTrue(rows.every((d) => d.attempts === 1), "each sent once")
    }))
})
