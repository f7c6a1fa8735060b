/**
 * The log: webhook deliveries to a concurrent target are stored `logged`
 * and handed out under a lease of the whole target; a success writes no
 * delivery row (its batch's outcome row holds it), only failures and
 * retries are written, and the cursor moves past what was settled. Each
 * test here fails if the log's rule it names is broken.
 */
import * as NodeServices from "@effect/platform-node/NodeServices"
import { PgClient, PgMigrator } from "@effect/sql-pg"
import { assert, describe, layer } from "@effect/vitest"
import { Duration, Effect, Layer, Redacted } from "effect"
import { Migrator, SqlClient } from "effect/sql"
import { Database, DatabaseInfo } from "../../../src/database/Database.ts"
import { Migrations } from "../../../src/database/Migrations.ts"
import { migrationRecord } from "../../../src/database/migrations/index.ts"
import { Wakeups } from "../../../src/database/Wakeups.ts"
import { type Claimed, DeliveryQueue, make, Outcome } from "../../../src/deliveries/DeliveryQueue.ts"
import * as Leases from "../../../src/deliveries/Leases.ts"
import { makeLogLeases } from "../../../src/deliveries/log/HeldLeases.ts"
import * as Log from "../../../src/deliveries/log/Log.ts"
import { reconcile } from "../../../src/deliveries/log/Reconcile.ts"
import { newId } from "../../../src/platform/Ids.ts"
import { emptyDatabase } from "../../support/databases.ts"
import { eventually } from "../../support/http.ts"
import { boom, newOrg, ok, QueueLive, serverUrl } from "./support.ts"

const webhook = (orgId: string, targetId: string) => ({ orgId, kind: "webhook" as const, targetId, capacity: 1_000 })
const claimOf = (
  queue: DeliveryQueue["Service"],
  target: string,
  options?: { limit?: number; perTarget?: number; leaseFor?: Duration.Input }
) =>
  queue.claim("webhook", {
    limit: options?.limit ?? 100,
    leaseFor: options?.leaseFor ?? "1 minute",
    perTarget: options?.perTarget ?? 100
  }).pipe(Effect.map((rows) => rows.filter((d) => d.targetId === target)))
const deliver = (claimed: ReadonlyArray<Claimed>) =>
  claimed.map((c) => ({ claimed: c, outcome: Outcome.delivered(), attempt: ok }))

/** `count` webhook deliveries to `target`, enqueued by the queue of this test's process. */
const webhookRows = (org: string, target: string, count: number) =>
  DeliveryQueue.use((queue) => queue.enqueueMany(Array.from({ length: count }, () => webhook(org, target))))

/**
 * The real client, except that a statement whose text holds `marker` runs
 * (and commits) and its answer is lost: what a connection dropped between
 * the commit and its acknowledgement does.
 */
const losingAnswers = (pg: PgClient.PgClient, marker: string): PgClient.PgClient =>
  new Proxy(pg, {
    apply: (target, self, args: Array<unknown>) => {
      const statement = Reflect.apply(target, self, args) as Effect.Effect<unknown, unknown>
      const strings = args[0] as ReadonlyArray<string> | undefined
      return Array.isArray(strings) && strings.join("").includes(marker)
        ? Effect.andThen(statement, Effect.die(new Error("the connection closed before the answer came")))
        : statement
    }
  })

/** The real client, except that a statement whose text holds `marker` fails without running. */
const refusing = (pg: PgClient.PgClient, marker: string): PgClient.PgClient =>
  new Proxy(pg, {
    apply: (target, self, args: Array<unknown>) => {
      const strings = args[0] as ReadonlyArray<string> | undefined
      return Array.isArray(strings) && strings.join("").includes(marker)
        ? Effect.die(new Error("the database refused the statement"))
        : Reflect.apply(target, self, args)
    }
  })

/** A second process on the same database: a queue of its own (its own lease owner). */
const anotherProcess = Effect.gen(function*() {
  return make(yield* PgClient.PgClient, yield* Wakeups, yield* DatabaseInfo)
})

const stored = (target: string) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    return yield* sql<{ status: string; n: number }>`
      SELECT status, count(*)::int AS n FROM deliveries WHERE target_id = ${target} GROUP BY status ORDER BY status
    `
  }).pipe(Effect.orDie)

layer(QueueLive, { excludeTestServices: true })("the delivery log", (it) => {
  it.effect("a webhook delivery is stored logged; a delivered batch writes one outcome row and no delivery row", () =>
    Effect.gen(function*() {
      const queue = yield* DeliveryQueue
      const sql = yield* SqlClient.SqlClient
      const org = yield* newOrg
      const target = newId()
      yield* queue.enqueueMany(Array.from({ length: 20 }, () => webhook(org, target)))
      assert.deepStrictEqual(yield* stored(target), [{ status: "logged", n: 20 }])
      const claimed = yield* claimOf(queue, target)
      assert.strictEqual(claimed.length, 20)
      assert.isTrue(claimed.every((c) => c.claimedFrom === "logged" && c.status === "sending" && c.attempts === 1))
      const { held } = yield* queue.settleMany(deliver(claimed))
      assert.isTrue(held.every(Boolean))
      // Never written again: still logged, no attempt rows, one outcome row.
      assert.deepStrictEqual(yield* stored(target), [{ status: "logged", n: 20 }])
      const [counts] = yield* sql<
        { attempts: number; outcomes: number; undelivered: number; pending: number; leased: boolean }
      >`
        SELECT (SELECT count(*)::int FROM delivery_attempts a JOIN deliveries d ON d.id = a.delivery_id WHERE d.target_id = ${target}) AS attempts,
               (SELECT count(*)::int FROM delivery_outcomes WHERE target_id = ${target}) AS outcomes,
               undelivered, log_pending AS pending, lease_id IS NOT NULL AS leased
        FROM delivery_targets WHERE id = ${target}
      `
      assert.deepStrictEqual(counts, { attempts: 0, outcomes: 1, undelivered: 0, pending: 0, leased: false })
      // The records read as delivered, with their one attempt.
      const list = yield* queue.list({ orgId: org, kind: "webhook", targetId: target })
      assert.strictEqual(list.length, 20)
      assert.isTrue(list.every((d) => d.status === "delivered" && d.attempts === 1 && d.finishedAt !== null))
      assert.deepStrictEqual((yield* queue.attempts(list[0]!.id)).map((a) => [a.attempt, a.statusCode]), [[1, 204]])
      assert.lengthOf(yield* claimOf(queue, target), 0)
    }))

  it.effect("a settle of successes says whether rows of the log still wait for its targets, not handed out", () =>
    Effect.gen(function*() {
      const queue = yield* DeliveryQueue
      const org = yield* newOrg
      const target = newId()
      yield* webhookRows(org, target, 3)
      const first = yield* claimOf(queue, target, { perTarget: 2 })
      assert.strictEqual(first.length, 2)
      assert.isTrue((yield* queue.settleMany(deliver(first))).logWaiting, "one row left behind by the bound")
      const second = yield* claimOf(queue, target, { perTarget: 2 })
      assert.strictEqual(second.length, 1)
      assert.isFalse((yield* queue.settleMany(deliver(second))).logWaiting, "nothing left")
    }))

  it.effect("a settle of successes says whether it ended a target's failures: only then may rows on their own be due sooner", () =>
    Effect.gen(function*() {
      const queue = yield* DeliveryQueue
      const sql = yield* SqlClient.SqlClient
      const org = yield* newOrg
      const target = newId()
      yield* webhookRows(org, target, 2)
      const first = yield* claimOf(queue, target, { perTarget: 1 })
      assert.isFalse((yield* queue.settleMany(deliver(first))).rowsChanged, "a healthy target's success")
      yield* sql`UPDATE delivery_targets SET consecutive_failures = 2 WHERE id = ${target}`
      const second = yield* claimOf(queue, target, { perTarget: 1 })
      assert.strictEqual(second.length, 1)
      assert.isTrue((yield* queue.settleMany(deliver(second))).rowsChanged, "a failing target's success")
    }))

  it.effect("sends that finish out of order: every row is settled once, and the next rows are handed out after them", () =>
    Effect.gen(function*() {
      const queue = yield* DeliveryQueue
      const sql = yield* SqlClient.SqlClient
      const org = yield* newOrg
      const target = newId()
      yield* queue.enqueueMany(Array.from({ length: 6 }, () => webhook(org, target)))
      const claimed = yield* claimOf(queue, target)
      assert.strictEqual(claimed.length, 6)
      // The later half first: the cursor may not pass the earlier, unsettled rows.
      yield* queue.settleMany(deliver(claimed.slice(3)))
      const [mid] = yield* sql<{ cursor: string }>`SELECT cursor::text FROM delivery_targets WHERE id = ${target}`
      assert.isTrue(BigInt(mid!.cursor) < BigInt(claimed[0]!.seq), "the cursor waits below the first unsettled row")
      const statuses = new Map(
        (yield* queue.list({ orgId: org, kind: "webhook", targetId: target })).map((d) => [d.id, d.status])
      )
      assert.deepStrictEqual(claimed.map((c) => statuses.get(c.id)), [
        "sending",
        "sending",
        "sending",
        "delivered",
        "delivered",
        "delivered"
      ])
      yield* queue.settleMany(deliver(claimed.slice(0, 3)))
      const [end] = yield* sql<{ cursor: string }>`SELECT cursor::text FROM delivery_targets WHERE id = ${target}`
      assert.strictEqual(end!.cursor, claimed[5]!.seq)
      yield* queue.enqueueMany(Array.from({ length: 2 }, () => webhook(org, target)))
      const next = yield* claimOf(queue, target)
      assert.strictEqual(next.length, 2)
      assert.isTrue(next.every((c) => BigInt(c.seq) > BigInt(claimed[5]!.seq)))
    }))

  it.effect("a failed attempt writes its row (retrying, with its attempt), claimed per row from then on; the rest stay logged", () =>
    Effect.gen(function*() {
      const queue = yield* DeliveryQueue
      const org = yield* newOrg
      const target = newId()
      yield* queue.enqueueMany(Array.from({ length: 3 }, () => webhook(org, target)))
      const claimed = yield* claimOf(queue, target)
      yield* queue.settleMany([
        { claimed: claimed[0]!, outcome: Outcome.retry(Duration.zero, "HTTP 500"), attempt: boom },
        ...deliver(claimed.slice(1))
      ])
      assert.deepStrictEqual(yield* stored(target), [{ status: "logged", n: 2 }, { status: "retrying", n: 1 }])
      const again = yield* eventually(Effect.map(claimOf(queue, target), (rows) => rows.length > 0 ? rows : undefined))
      assert.deepStrictEqual(again.map((c) => [c.id, c.claimedFrom, c.attempts]), [[claimed[0]!.id, "retrying", 2]])
      yield* queue.settleMany(deliver(again))
      const record = (yield* queue.list({ orgId: org, kind: "webhook", targetId: target })).find((d) =>
        d.id === claimed[0]!.id
      )!
      assert.strictEqual(record.status, "delivered")
      assert.deepStrictEqual((yield* queue.attempts(record.id)).map((a) => [a.attempt, a.statusCode]), [[1, 500], [
        2,
        204
      ]])
    }))

  it.effect("a released row waits again, claimed per row, its attempt not counted", () =>
    Effect.gen(function*() {
      const queue = yield* DeliveryQueue
      const org = yield* newOrg
      const target = newId()
      yield* queue.enqueueMany(Array.from({ length: 2 }, () => webhook(org, target)))
      const claimed = yield* claimOf(queue, target)
      assert.strictEqual(yield* queue.release(claimed.slice(0, 1)), 1)
      assert.deepStrictEqual(yield* stored(target), [{ status: "logged", n: 1 }, { status: "queued", n: 1 }])
      const again = yield* claimOf(queue, target)
      assert.deepStrictEqual(again.map((c) => [c.id, c.claimedFrom, c.attempts]), [[claimed[0]!.id, "queued", 1]])
      yield* queue.settleMany(deliver([...again, claimed[1]!]))
      const list = yield* queue.list({ orgId: org, kind: "webhook", targetId: target })
      assert.deepStrictEqual(list.map((d) => [d.status, d.attempts]), [["delivered", 1], ["delivered", 1]])
    }))

  it.effect("the per-target bound counts rows handed out of the log and rows leased on their own together", () =>
    Effect.gen(function*() {
      const queue = yield* DeliveryQueue
      const org = yield* newOrg
      const target = newId()
      yield* queue.enqueueMany(Array.from({ length: 5 }, () => webhook(org, target)))
      const first = yield* claimOf(queue, target, { perTarget: 2 })
      assert.strictEqual(first.length, 2)
      assert.lengthOf(yield* claimOf(queue, target, { perTarget: 2 }), 0, "at the bound")
      // One goes back per row: it and a log row share the bound.
      yield* queue.settleMany([{
        claimed: first[0]!,
        outcome: Outcome.retry(Duration.zero, "HTTP 500"),
        attempt: boom
      }])
      const second = yield* claimOf(queue, target, { perTarget: 2 })
      assert.strictEqual(second.length, 1)
      assert.lengthOf(yield* claimOf(queue, target, { perTarget: 2 }), 0, "at the bound again")
    }))

  it.effect("another process takes a lease that ran out: it gets exactly what was not settled; the old holder records nothing", () =>
    Effect.gen(function*() {
      const queue = yield* DeliveryQueue
      const other = yield* anotherProcess
      const org = yield* newOrg
      const target = newId()
      yield* queue.enqueueMany(Array.from({ length: 6 }, () => webhook(org, target)))
      const claimed = yield* claimOf(queue, target, { leaseFor: "300 millis" })
      assert.strictEqual(claimed.length, 6)
      // Two settled before the process stops.
      yield* queue.settleMany(deliver(claimed.slice(0, 2)))
      assert.lengthOf(yield* claimOf(other, target), 0, "not while the lease lives")
      const taken = yield* eventually(Effect.map(claimOf(other, target), (rows) => rows.length > 0 ? rows : undefined))
      assert.deepStrictEqual(taken.map((c) => c.id), claimed.slice(2).map((c) => c.id))
      const late = yield* queue.settleMany(deliver(claimed.slice(2)))
      assert.deepStrictEqual(late.held, [false, false, false, false])
      const { held } = yield* other.settleMany(deliver(taken))
      assert.isTrue(held.every(Boolean))
      const list = yield* queue.list({ orgId: org, kind: "webhook", targetId: target })
      assert.isTrue(list.every((d) => d.status === "delivered"))
      const sql = yield* SqlClient.SqlClient
      const [outcomes] = yield* sql<{ n: number; seqs: number }>`
        SELECT count(*)::int AS n, sum(cardinality(seqs))::int AS seqs FROM delivery_outcomes WHERE target_id = ${target}
      `
      assert.deepStrictEqual(outcomes, { n: 2, seqs: 6 }, "each row settled once")
    }))

  it.effect("two processes claiming at once never hand out the same row", () =>
    Effect.gen(function*() {
      const queue = yield* DeliveryQueue
      const other = yield* anotherProcess
      const org = yield* newOrg
      const targets = Array.from({ length: 4 }, () => newId())
      for (const target of targets) yield* queue.enqueueMany(Array.from({ length: 30 }, () => webhook(org, target)))
      const seen = new Set<string>()
      let duplicates = 0
      for (let round = 0; round < 10; round++) {
        const [a, b] = yield* Effect.all([
          queue.claim("webhook", { limit: 25, leaseFor: "1 minute", perTarget: 10 }),
          other.claim("webhook", { limit: 25, leaseFor: "1 minute", perTarget: 10 })
        ], { concurrency: 2 })
        for (const c of [...a, ...b].filter((c) => targets.includes(c.targetId))) {
          if (seen.has(c.id)) duplicates++
          seen.add(c.id)
        }
        yield* Effect.all([queue.settleMany(deliver(a)), other.settleMany(deliver(b))], { concurrency: 2 })
      }
      assert.strictEqual(duplicates, 0)
      assert.strictEqual(seen.size, 120)
    }))

  it.effect("a take whose answer was lost: its rows are handed out by the next take, a lease it started is ended, nothing is sent twice", () =>
    Effect.gen(function*() {
      const pg = yield* PgClient.PgClient
      const sql = yield* SqlClient.SqlClient
      const org = yield* newOrg
      const [known, unknown] = [newId(), newId()].sort()
      yield* webhookRows(org, known, 10)
      // This process (a queue's log context of its own) takes four rows of the first target.
      const ctx: Leases.LogContext = { sql: pg, leases: makeLogLeases() }
      const options = { limit: 4, leaseFor: Duration.minutes(1), perTarget: 100 }
      const first = (yield* Leases.claim(ctx, "webhook", options)).filter((c) => c.targetId === known)
      assert.strictEqual(first.length, 4)
      yield* webhookRows(org, unknown, 3)
      // The next take commits (the first target's mark moves past three more
      // rows, the second target is leased, each its half of the room) and
      // its answer is lost.
      const losing = { ...ctx, sql: losingAnswers(pg, "leased AS (") }
      const lost = yield* Effect.exit(Leases.claim(losing, "webhook", { ...options, limit: 6 }))
      assert.isTrue(lost._tag === "Failure")
      const [moved] = yield* sql<
        { leased_to: string }
      >`SELECT leased_to::text FROM delivery_targets WHERE id = ${known}`
      assert.strictEqual(moved!.leased_to, (BigInt(first[3]!.seq) + 3n).toString(), "the lost take committed")
      // The next take hands out what the lost one did, and the rest.
      const next = yield* Leases.claim(ctx, "webhook", { ...options, limit: 100 })
      assert.deepStrictEqual(
        next.filter((c) => c.targetId === known).map((c) => c.seq),
        Array.from({ length: 6 }, (_, i) => (BigInt(first[3]!.seq) + 1n + BigInt(i)).toString())
      )
      assert.strictEqual(next.filter((c) => c.targetId === unknown).length, 3)
      // What was in flight before settles under its lease, and every row once.
      const { held } = yield* Leases.settleMany(ctx, deliver([...first, ...next]))
      assert.isTrue(held.every(Boolean))
      for (const target of [known, unknown]) {
        const list = yield* DeliveryQueue.use((queue) => queue.list({ orgId: org, kind: "webhook", targetId: target }))
        assert.isTrue(list.every((d) => d.status === "delivered"), `every row of ${target} delivered`)
      }
      const rows = yield* sql<{ seqs: number; in_flight: number; leased: boolean }>`
        SELECT (SELECT coalesce(sum(cardinality(seqs)), 0)::int FROM delivery_outcomes x WHERE x.target_id = t.id) AS seqs,
               t.log_in_flight AS in_flight, t.lease_id IS NOT NULL AS leased
        FROM delivery_targets t WHERE t.id IN (${known}, ${unknown}) ORDER BY t.id
      `
      assert.deepStrictEqual(rows, [
        { seqs: 10, in_flight: 0, leased: false },
        { seqs: 3, in_flight: 0, leased: false }
      ])
    }))

  it.effect("a release the database refused holds the cursor back: a settle of later rows does not pass the rows still logged", () =>
    Effect.gen(function*() {
      const pg = yield* PgClient.PgClient
      const sql = yield* SqlClient.SqlClient
      const org = yield* newOrg
      const target = newId()
      yield* webhookRows(org, target, 4)
      const ctx: Leases.LogContext = { sql: pg, leases: makeLogLeases() }
      const claimed = (yield* Leases.claim(ctx, "webhook", { limit: 4, leaseFor: Duration.minutes(1), perTarget: 100 }))
        .filter((c) => c.targetId === target)
      assert.strictEqual(claimed.length, 4)
      const refused = yield* Effect.exit(
        Leases.release({ ...ctx, sql: refusing(pg, "SET status = 'queued', next_attempt_at") }, claimed.slice(0, 2))
      )
      assert.isTrue(refused._tag === "Failure")
      yield* Leases.settleMany(ctx, deliver(claimed.slice(2)))
      const [row] = yield* sql<{ cursor: string }>`SELECT cursor::text FROM delivery_targets WHERE id = ${target}`
      assert.isTrue(BigInt(row!.cursor) < BigInt(claimed[0]!.seq), "the cursor stays below the rows not yet released")
      // Released when the database answers again, and handed out again.
      assert.strictEqual(yield* Leases.release(ctx, claimed.slice(0, 2)), 2)
      const again = (yield* Leases.claim(ctx, "webhook", { limit: 4, leaseFor: Duration.minutes(1), perTarget: 100 }))
        .filter((c) => c.targetId === target)
      assert.sameMembers(again.map((c) => c.id), claimed.slice(0, 2).map((c) => c.id))
    }))

  it.effect("a lost take that commits only after the next take began: its lease is nobody's, runs out and is taken over from the cursor", () =>
    Effect.gen(function*() {
      const pg = yield* PgClient.PgClient
      const org = yield* newOrg
      const target = newId()
      yield* webhookRows(org, target, 6)
      const ctx: Leases.LogContext = { sql: pg, leases: makeLogLeases() }
      const options = { limit: 3, leaseFor: Duration.millis(300), perTarget: 100 }
      // The take fails on the client while its statement still runs on the server.
      const lostOwner = ctx.leases.owner()
      ctx.leases.doubt()
      yield* reconcile(pg, ctx.leases)
      // Then it commits: three rows handed out to nobody, under the owner id in doubt.
      const late = yield* Log.leaseAndTake(pg, "webhook", options, lostOwner)
      assert.strictEqual(late.filter((row) => row.target_id === target).length, 3)
      // The process's next take does not continue that lease past its mark.
      const next = (yield* Leases.claim(ctx, "webhook", { ...options, limit: 100 })).filter((c) =>
        c.targetId === target
      )
      assert.lengthOf(next, 0)
      // Once it runs out, the takeover starts at the cursor: all six.
      const taken = yield* eventually(
        Effect.map(Leases.claim(ctx, "webhook", { ...options, limit: 100 }), (rows) => {
          const mine = rows.filter((c) => c.targetId === target)
          return mine.length > 0 ? mine : undefined
        })
      )
      assert.strictEqual(taken.length, 6)
      const { held } = yield* Leases.settleMany(ctx, deliver(taken))
      assert.isTrue(held.every(Boolean))
      const list = yield* DeliveryQueue.use((queue) => queue.list({ orgId: org, kind: "webhook", targetId: target }))
      assert.deepStrictEqual(list.map((d) => d.status), Array(6).fill("delivered"))
    }))

  it.effect("failing a target's deliveries after the deciding attempt is recorded fails its waiting and in-flight log rows", () =>
    Effect.gen(function*() {
      const queue = yield* DeliveryQueue
      const sql = yield* SqlClient.SqlClient
      const org = yield* newOrg
      const target = newId()
      yield* queue.enqueueMany(Array.from({ length: 5 }, () => webhook(org, target)))
      const claimed = yield* claimOf(queue, target, { perTarget: 3 })
      assert.strictEqual(claimed.length, 3)
      yield* queue.settleMany(deliver(claimed.slice(0, 1)))
      const decided = claimed[1]!
      const { held } = yield* queue.settleMany([{
        claimed: decided,
        outcome: Outcome.failed("HTTP 410"),
        attempt: boom
      }])
      assert.deepStrictEqual(held, [true])
      assert.strictEqual(yield* queue.failUndelivered("webhook", target, "endpoint deactivated"), 3)
      assert.deepStrictEqual((yield* queue.settleMany(deliver(claimed.slice(2)))).held, [false])
      const statuses = (yield* queue.list({ orgId: org, kind: "webhook", targetId: target })).map((d) => d.status)
        .reverse()
      assert.deepStrictEqual(statuses, ["delivered", "failed", "failed", "failed", "failed"])
      const [row] = yield* sql<{ kept: number; counted: number }>`
        SELECT (SELECT undelivered FROM delivery_targets WHERE id = ${target}) AS kept,
               (SELECT count(*)::int FROM delivery_records WHERE target_id = ${target} AND status IN ('queued', 'sending', 'retrying')) AS counted
      `
      assert.deepStrictEqual(row, { kept: 0, counted: 0 })
    }))

  it.effect("a target made strict has its waiting log rows claimed per row, head first", () =>
    Effect.gen(function*() {
      const queue = yield* DeliveryQueue
      const org = yield* newOrg
      const target = newId()
      const created = yield* queue.enqueueMany(Array.from({ length: 3 }, () => webhook(org, target)))
      yield* queue.setStrict("webhook", org, target, true)
      assert.deepStrictEqual(yield* stored(target), [{ status: "queued", n: 3 }])
      for (const expected of created) {
        const [head, ...rest] = yield* claimOf(queue, target)
        assert.strictEqual(head!.id, expected.id)
        assert.lengthOf(rest, 0)
        yield* queue.settleMany(deliver([head!]))
      }
      // New deliveries of a strict target are stored per row.
      yield* queue.enqueue(webhook(org, target))
      assert.deepStrictEqual((yield* stored(target)).map((s) => s.status), ["delivered", "queued"])
    }))
  it.effect("a batch of the log's successes alone is settled by its own statement, which records what the general settle records", () =>
    Effect.gen(function*() {
      // A queue whose short settles are counted.
      let shortSettles = 0
      const pg = yield* PgClient.PgClient
      const counted = new Proxy(pg, {
        apply: (target, self, args: Array<unknown>) => {
          const strings = args[0] as ReadonlyArray<string> | undefined
          if (Array.isArray(strings) && strings.join("").includes("AS x(target_id, lease_id, org_id, log_cursor")) {
            shortSettles++
          }
          return Reflect.apply(target, self, args)
        }
      })
      const queue = make(counted, yield* Wakeups, yield* DatabaseInfo)
      const sql = yield* SqlClient.SqlClient
      const org = yield* newOrg
      // Two endpoints in the same state: one settled by batches of its
      // successes alone, the other by the same batches each joined by a
      // row leased on its own (a telemetry batch), which the general
      // settle takes.
      const [short, general, other] = [newId(), newId(), newId()]
      for (const target of [short, general]) {
        yield* queue.enqueueMany(Array.from({ length: 7 }, () => webhook(org, target)))
      }
      yield* queue.enqueueMany(
        Array.from({ length: 3 }, () => ({ ...webhook(org, other), kind: "telemetry" as const }))
      )
      const both = yield* queue.claim("webhook", { limit: 100, leaseFor: "1 minute", perTarget: 100 })
      const byShort = both.filter((c) => c.targetId === short)
      const byGeneral = both.filter((c) => c.targetId === general)
      assert.strictEqual(byShort.length, 7)
      assert.strictEqual(byGeneral.length, 7)
      const onTheirOwn = yield* queue.claim("telemetry", { limit: 10, leaseFor: "1 minute", perTarget: 10 })
      assert.strictEqual(onTheirOwn.length, 3)
      const attempt = (i: number) => ({ statusCode: 200 + i, durationMs: 10 * i })
      const delivered = (claimed: ReadonlyArray<Claimed>, order: ReadonlyArray<number>) =>
        order.map((i) => ({ claimed: claimed[i]!, outcome: Outcome.delivered(), attempt: attempt(i) }))
      // Out of order, in three batches; the last leaves nothing in flight (the lease ends).
      const batches = [[4, 2], [6, 0, 5], [1, 3]]
      for (const [k, order] of batches.entries()) {
        const a = yield* queue.settleMany(delivered(byShort, order))
        const b = yield* queue.settleMany([...delivered(byGeneral, order), {
          claimed: onTheirOwn[k]!,
          outcome: Outcome.delivered(),
          attempt: ok
        }])
        assert.deepStrictEqual(a.held, order.map(() => true))
        assert.deepStrictEqual(b.held, [...order.map(() => true), true])
        assert.strictEqual(
          shortSettles,
          k + 1,
          "the batch of successes alone took the short statement, the other did not"
        )
        const targets = yield* sql<
          {
            id: string
            undelivered: number
            log_pending: number
            log_in_flight: number
            cursor: string
            leased: boolean
            failures: number
            cooling: boolean
          }
        >`
          SELECT id, undelivered, log_pending, log_in_flight, cursor::text, lease_id IS NOT NULL AS leased,
                 consecutive_failures AS failures, cooldown_until IS NOT NULL AS cooling
          FROM delivery_targets WHERE id IN (${short}, ${general})
        `
        const of = (target: string, claimed: ReadonlyArray<Claimed>) => {
          const row = targets.find((t) => t.id === target)!
          // The cursor as a place in the claim: how many rows it has passed.
          return { ...row, id: undefined, cursor: claimed.filter((c) => BigInt(c.seq) <= BigInt(row.cursor)).length }
        }
        assert.deepStrictEqual(of(short, byShort), of(general, byGeneral), `after batch ${k + 1}`)
      }
      const outcomes = (target: string, claimed: ReadonlyArray<Claimed>) =>
        sql<
          {
            seqs: ReadonlyArray<string>
            status_codes: ReadonlyArray<number>
            durations_ms: ReadonlyArray<number>
            from_seq: string
            to_seq: string
          }
        >`
          SELECT seqs::text[] AS seqs, status_codes, durations_ms, from_seq::text, to_seq::text
          FROM delivery_outcomes WHERE target_id = ${target} ORDER BY to_seq
        `.pipe(Effect.map((rows) => {
          const place = (seq: string) => claimed.findIndex((c) => c.seq === seq)
          return rows.map((row) => ({
            places: row.seqs.map(place),
            codes: row.status_codes,
            durations: row.durations_ms,
            from: place(row.from_seq),
            to: place(row.to_seq)
          }))
        }))
      const shortOutcomes = yield* outcomes(short, byShort)
      assert.deepStrictEqual(shortOutcomes, yield* outcomes(general, byGeneral))
      // One outcome row per batch, its seqs in order with their status codes and durations.
      assert.deepStrictEqual(shortOutcomes, [
        { places: [1, 3], codes: [201, 203], durations: [10, 30], from: 1, to: 3 },
        { places: [2, 4], codes: [202, 204], durations: [20, 40], from: 2, to: 4 },
        { places: [0, 5, 6], codes: [200, 205, 206], durations: [0, 50, 60], from: 0, to: 6 }
      ])
      // And the records read the same.
      const records = (target: string) =>
        queue.list({ orgId: org, kind: "webhook", targetId: target }).pipe(
          Effect.map((list) => list.map((d) => [d.status, d.attempts]))
        )
      assert.deepStrictEqual(yield* records(short), yield* records(general))
    }))
})

// The previous release's rows: stored per row, some queued, one retrying,
// one whose process died while sending.
const previous = Object.fromEntries(Object.entries(migrationRecord).filter(([id]) => id < "0670"))
const seeded = { org: newId(), target: newId(), ids: [newId(), newId(), newId()] }
const PreviousRelease = Layer.effectDiscard(
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    yield* PgMigrator.run({ loader: Migrator.fromRecord(previous), table: "svc_migrations" }).pipe(
      Effect.provide(NodeServices.layer)
    )
    yield* sql`INSERT INTO orgs (id, name) VALUES (${seeded.org}, 'upgrade')`
    yield* sql`INSERT INTO delivery_targets (id, org_id, kind, undelivered) VALUES (${seeded.target}, ${seeded.org}, 'webhook', 3)`
    const [queued, retrying, sending] = seeded.ids
    yield* sql`
    INSERT INTO deliveries (id, org_id, kind, target_id, status, attempts, lease_owner, lease_until, next_attempt_at)
    VALUES (${queued!}, ${seeded.org}, 'webhook', ${seeded.target}, 'queued', 0, NULL, NULL, now()),
           (${retrying!}, ${seeded.org}, 'webhook', ${seeded.target}, 'retrying', 1, NULL, NULL, now()),
           (${sending!}, ${seeded.org}, 'webhook', ${seeded.target}, 'sending', 1, gen_random_uuid(), now() - interval '1 second', now())
  `
  }).pipe(Effect.orDie)
)

const Upgraded = DeliveryQueue.layer.pipe(
  Layer.provideMerge(Wakeups.layer),
  Layer.provideMerge(Migrations.layer),
  Layer.provideMerge(PreviousRelease),
  Layer.provideMerge(serverUrl ? Database.scratch(Redacted.make(serverUrl)) : emptyDatabase())
)

layer(Upgraded, { excludeTestServices: true })("upgrading to the log", (it) => {
  describe("rows of the previous release", () => {
    it.effect("are claimed and delivered per row; new ones go to the log behind them; the counts stay right", () =>
      Effect.gen(function*() {
        const queue = yield* DeliveryQueue
        const sql = yield* SqlClient.SqlClient
        const { ids, org, target } = seeded
        yield* queue.enqueue(webhook(org, target))
        assert.deepStrictEqual(yield* stored(target), [
          { status: "logged", n: 1 },
          { status: "queued", n: 1 },
          { status: "retrying", n: 1 },
          { status: "sending", n: 1 }
        ])
        const claimed = yield* claimOf(queue, target)
        assert.sameMembers(claimed.filter((c) => c.claimedFrom !== "logged").map((c) => c.id), ids)
        assert.strictEqual(claimed.filter((c) => c.claimedFrom === "logged").length, 1)
        const { held } = yield* queue.settleMany(deliver(claimed))
        assert.isTrue(held.every(Boolean))
        const list = yield* queue.list({ orgId: org, kind: "webhook", targetId: target })
        assert.deepStrictEqual(list.map((d) => d.status), ["delivered", "delivered", "delivered", "delivered"])
        const [row] = yield* sql<{ undelivered: number }>`SELECT undelivered FROM delivery_targets WHERE id = ${target}`
        assert.strictEqual(row!.undelivered, 0)
      }))
  })
})
