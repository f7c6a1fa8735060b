/**
 * The dispatcher's cursor (migration 0720): every event is fanned out once,
 * and none is passed over, even one whose transaction took its seq before
 * another event's and committed after it (two transactions at once need the
 * server: PGlite is one session); and an upgrade hands the previous
 * release's undispatched events to the cursor and keeps its dispatcher off
 * the new ones.
 */
import * as NodeServices from "@effect/platform-node/NodeServices"
import { PgMigrator } from "@effect/sql-pg"
import { assert, describe, layer } from "@effect/vitest"
import { Deferred, Effect, Fiber, Layer, Redacted } from "effect"
import { Migrator, SqlClient } from "effect/sql"
import pg from "pg"
import { Database } from "../../../src/database/Database.ts"
import { Migrations } from "../../../src/database/Migrations.ts"
import { migrationRecord } from "../../../src/database/migrations/index.ts"
import { WAKEUP_CHANNEL, Wakeups } from "../../../src/database/Wakeups.ts"
import { DeliveryQueue } from "../../../src/deliveries/DeliveryQueue.ts"
import { DISPATCH_LOCK, Dispatcher } from "../../../src/notifications/dispatch/Dispatcher.ts"
import { EventBodies } from "../../../src/notifications/dispatch/EventBodies.ts"
import { newId } from "../../../src/platform/Ids.ts"
import { SvcTest } from "../../../src/testing.ts"
import { emptyDatabase } from "../../support/databases.ts"
import { HttpsReceiver } from "../../support/HttpsReceiver.ts"
import { type EventBody, eventBody, insertEvents, webhookService } from "./support.ts"

const insertOne = (event: EventBody) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const [row] = yield* sql<{ seq: string }>`
      INSERT INTO events (id, org_id, type, occurred_at, body, label)
      VALUES (${event.id}, ${event.org_id}, ${event.type}, ${event.occurred_at}, ${
      JSON.stringify(event)
    }, ${event.type})
      RETURNING seq::text
    `
    return BigInt(row!.seq)
  }).pipe(Effect.orDie)

/** A dispatcher of the test's own, as another process's. */
const ownDispatcher = Effect.provide(
  Effect.service(Dispatcher),
  Dispatcher.layer.pipe(
    Layer.provide(Layer.mergeAll(DeliveryQueue.layer, EventBodies.layer)),
    Layer.provide(Wakeups.layer)
  )
)

/** A connection of the test's own to the service's database, closed with the test. */
const connection = Effect.gen(function*() {
  const svc = yield* SvcTest
  const [{ name }] = (yield* svc.sql<{ name: string }>`SELECT current_database() AS name`) as [{ name: string }]
  const url = new URL(process.env.TEST_DATABASE_URL!)
  url.pathname = `/${name}`
  return yield* Effect.acquireRelease(
    Effect.promise(async () => {
      const client = new pg.Client({ connectionString: url.toString() })
      await client.connect()
      return client
    }),
    (client) => Effect.promise(() => client.end())
  )
}).pipe(Effect.orDie)

describe.runIf(process.env.TEST_DATABASE_URL)("the dispatch cursor", () => {
  layer(webhookService(), { excludeTestServices: true })("on the server", (it) => {
    it.effect("an event whose transaction commits after a later event's is fanned out, once, as is every other; the later one does not wait for it", () =>
      Effect.gen(function*() {
        const svc = yield* SvcTest
        const receiver = yield* HttpsReceiver.make()
        const org = yield* SvcTest.org()
        yield* org.client.notifications.create({ payload: { url: receiver.url("/cursor") } })
        const early = eventBody(org.orgId, "approval.requested")
        const late = eventBody(org.orgId, "approval.approved")
        const written = yield* Deferred.make<bigint>()
        const commit = yield* Deferred.make<void>()
        // The early event takes its seq in a transaction that stays open...
        const straggler = yield* svc.sql.withTransaction(Effect.gen(function*() {
          yield* Deferred.succeed(written, yield* insertOne(early))
          yield* Deferred.await(commit)
        })).pipe(Effect.forkChild)
        const earlySeq = yield* Deferred.await(written)
        // ...while a later one is written and committed: held back a second
        // by the open transaction, then fanned out on its own, the cursor
        // left below the straggler.
        const lateSeq = yield* svc.sql.withTransaction(insertOne(late))
        assert.isTrue(earlySeq < lateSeq, "the straggler took the lower seq")
        const [first] = yield* receiver.waitForRequests(1, "10 seconds")
        assert.strictEqual(
          first!.headers["x-svc-event-id"],
          late.id,
          "the later event, while the straggler is still open"
        )
        const before = yield* svc.sql<
          { n: number }
        >`SELECT count(*)::int AS n FROM deliveries WHERE event_id = ${early.id}`
        assert.strictEqual(before[0]!.n, 0, "nothing of the open transaction is visible yet")
        yield* Deferred.succeed(commit, undefined)
        yield* Fiber.join(straggler)
        // Then more, through the usual path.
        const more = [eventBody(org.orgId, "approval.requested"), eventBody(org.orgId, "approval.rejected")]
        yield* insertEvents(more)
        const requests = yield* receiver.waitForRequests(4, "20 seconds")
        yield* Effect.sleep("500 millis")
        const ids = receiver.requests().map((r) => r.headers["x-svc-event-id"])
        assert.sameMembers(ids as Array<string>, [early.id, late.id, ...more.map((e) => e.id)], "each event once")
        assert.strictEqual(requests.length, 4)
        const undispatched = yield* svc.sql<
          { n: number }
        >`SELECT count(*)::int AS n FROM undispatched_events WHERE org_id = ${org.orgId}`
        assert.strictEqual(undispatched[0]!.n, 0)
      }))

    it.effect("a pass says whether committed events wait past where it leaves the cursor for an older transaction", () =>
      Effect.gen(function*() {
        const svc = yield* SvcTest
        const dispatcher = yield* ownDispatcher
        const org = yield* SvcTest.org()
        // An older transaction that holds the horizon, and a writer of events.
        const straggler = yield* connection
        const writer = yield* connection
        const query = (client: pg.Client, text: string) => Effect.promise(() => client.query(text))
        // `writtenAgo`: as if committed that long before (a pass inside a
        // transaction reads the transaction's start as now).
        const commitEvent = (writtenAgo = "0 seconds") =>
          Effect.suspend(() => {
            const event = eventBody(org.orgId, "approval.requested")
            return Effect.promise(() =>
              writer.query(
                `INSERT INTO events (id, org_id, type, occurred_at, body, label, dispatched_at)
                 VALUES ($1, $2, $3, $4, $5, $3, now() - $6::interval)`,
                [event.id, event.org_id, event.type, event.occurred_at, JSON.stringify(event), writtenAgo]
              )
            )
          })
        const holdHorizon = query(straggler, "BEGIN; SELECT pg_current_xact_id()")
        const endStraggler = query(straggler, "ROLLBACK")
        // Each case in a transaction holding the dispatch lock, so that the
        // service's own dispatcher takes nothing meanwhile; it ends with the
        // pass that takes something (a transaction with an id of its own
        // would hold the horizon itself).
        const alone = <A>(effect: Effect.Effect<A>) =>
          svc.sql.withTransaction(Effect.andThen(svc.sql`SELECT pg_advisory_xact_lock(${DISPATCH_LOCK})`, effect))
        // Any transaction of the cluster holds the horizon (other tests' too):
        // passes until one takes something.
        const untilTaken = Effect.gen(function*() {
          while (true) {
            const pass = yield* dispatcher.dispatchOnce(16)
            if (pass.taken > 0) return pass
            yield* Effect.sleep("20 millis")
          }
        }).pipe(Effect.timeout("10 seconds"), Effect.orDie)
        while ((yield* svc.sql<{ n: number }>`SELECT count(*)::int AS n FROM undispatched_events`)[0]!.n > 0) {
          yield* Effect.sleep("20 millis")
        }

        yield* alone(Effect.gen(function*() {
          yield* holdHorizon
          yield* commitEvent()
          assert.deepStrictEqual(yield* dispatcher.dispatchOnce(16), { taken: 0, held: true }, "behind the straggler")
          yield* endStraggler
          assert.deepStrictEqual(yield* untilTaken, { taken: 1, held: false }, "once it ended")
        }))
        yield* alone(Effect.gen(function*() {
          yield* commitEvent()
          yield* holdHorizon
          yield* commitEvent()
          assert.deepStrictEqual(
            yield* untilTaken,
            { taken: 1, held: true },
            "the event below the horizon taken, the one above it still waits"
          )
          yield* endStraggler
          assert.deepStrictEqual(yield* untilTaken, { taken: 1, held: false }, "then that one")
        }))
        yield* alone(Effect.gen(function*() {
          yield* holdHorizon
          // Held back past a second, it is fanned out on its own: no longer waiting.
          yield* commitEvent("2 seconds")
          assert.deepStrictEqual(
            yield* dispatcher.dispatchOnce(16),
            { taken: 1, held: false },
            "taken as held too long"
          )
          yield* endStraggler
        }))
      }).pipe(Effect.orDie))

    it.effect("a pass wakes other processes' senders in its own statement: when its deliveries commit, not when they roll back", () =>
      Effect.gen(function*() {
        const svc = yield* SvcTest
        const dispatcher = yield* ownDispatcher
        const receiver = yield* HttpsReceiver.make()
        const org = yield* SvcTest.org()
        yield* org.client.notifications.create({ payload: { url: receiver.url("/woken") } })
        // A connection of its own, listening as another process does.
        const heard: Array<string> = []
        const listener = yield* connection
        listener.on("notification", (n) => heard.push(n.payload ?? ""))
        yield* Effect.promise(() => listener.query(`LISTEN ${WAKEUP_CHANNEL}`))
        // Its one endpoint is concurrent: every row the pass queues is the log's.
        const wokeSenders = () => heard.some((payload) => payload.split(" ").includes("deliveries:webhook:log"))
        const event = eventBody(org.orgId, "approval.requested")
        const take = Effect.gen(function*() {
          while ((yield* dispatcher.dispatchOnce(16)).taken === 0) yield* Effect.sleep("20 millis")
        })
        yield* svc.sql.withTransaction(Effect.gen(function*() {
          // Held to the commit: the service's own dispatcher takes nothing meanwhile.
          yield* svc.sql`SELECT pg_advisory_xact_lock(${DISPATCH_LOCK})`
          // The event, committed on another connection.
          yield* Effect.promise(() =>
            listener.query(
              "INSERT INTO events (id, org_id, type, occurred_at, body, label) VALUES ($1, $2, $3, $4, $5, $3)",
              [event.id, event.org_id, event.type, event.occurred_at, JSON.stringify(event)]
            )
          )
          // A pass undone (a savepoint rolled back): its deliveries, its cursor and its wakeup.
          yield* svc.sql.withTransaction(Effect.andThen(take, Effect.fail("undone"))).pipe(Effect.ignore)
          yield* Effect.sleep("300 millis")
          assert.isFalse(wokeSenders(), `nothing sent before the commit: ${JSON.stringify(heard)}`)
          yield* take
        }))
        const [received] = yield* receiver.waitForRequests(1, "10 seconds")
        assert.strictEqual(received!.headers["x-svc-event-id"], event.id)
        assert.isTrue(wokeSenders(), `the committed pass woke the other processes: ${JSON.stringify(heard)}`)
        yield* Effect.sleep("300 millis")
        assert.strictEqual(receiver.requests().length, 1, "the event was fanned out once")
      }))

    it.effect("a pass whose webhooks are all the log's wakes senders for the log alone; one with a strict endpoint's, for both", () =>
      Effect.gen(function*() {
        const dispatcher = yield* ownDispatcher
        const receiver = yield* HttpsReceiver.make()
        const heard: Array<string> = []
        const listener = yield* connection
        listener.on("notification", (n) => heard.push(n.payload ?? ""))
        yield* Effect.promise(() => listener.query(`LISTEN ${WAKEUP_CHANNEL}`))
        const topicsOf = (payloads: ReadonlyArray<string>) =>
          payloads.flatMap((payload) => payload.split(" ")).filter((t) => t.startsWith("deliveries:webhook"))
        // The event's pass, by this test's dispatcher or the service's own
        // (whichever takes it first): what the other process heard of it.
        const pass = (orgId: string) =>
          Effect.gen(function*() {
            const before = heard.length
            yield* insertOne(eventBody(orgId, "approval.requested"))
            for (let i = 0; i < 200 && topicsOf(heard.slice(before)).length === 0; i++) {
              yield* dispatcher.dispatchOnce(16)
              yield* Effect.sleep("50 millis")
            }
            yield* Effect.sleep("200 millis")
            return topicsOf(heard.slice(before))
          })
        const concurrent = yield* SvcTest.org()
        yield* concurrent.client.notifications.create({ payload: { url: receiver.url("/c") } })
        assert.deepStrictEqual(yield* pass(concurrent.orgId), ["deliveries:webhook:log"])
        const mixed = yield* SvcTest.org()
        yield* mixed.client.notifications.create({ payload: { url: receiver.url("/m") } })
        yield* mixed.client.notifications.create({ payload: { url: receiver.url("/s"), ordering: "strict" } })
        assert.deepStrictEqual(yield* pass(mixed.orgId), ["deliveries:webhook"])
        yield* receiver.waitForRequests(3, "10 seconds")
      }))
  })
})

/** What the previous release's dispatcher takes (0.1.0, `Dispatcher.ts` before migration 0720). */
const previousDispatcherTakes = (sql: SqlClient.SqlClient) =>
  sql<{ id: string }>`
    SELECT id FROM events WHERE (CASE WHEN dispatched_at IS NULL THEN seq END) > 0
    ORDER BY (CASE WHEN dispatched_at IS NULL THEN seq END)
  `

const previous = Object.fromEntries(Object.entries(migrationRecord).filter(([id]) => id < "0720"))
const seeded = { org: newId(), dispatched: newId(), waiting: newId() }
const PreviousRelease = Layer.effectDiscard(
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    yield* PgMigrator.run({ loader: Migrator.fromRecord(previous), table: "svc_migrations" }).pipe(
      Effect.provide(NodeServices.layer)
    )
    yield* sql`INSERT INTO orgs (id, name) VALUES (${seeded.org}, 'upgrade')`
    yield* sql`
    INSERT INTO events (id, org_id, type, occurred_at, body, dispatched_at)
    VALUES (${seeded.dispatched}, ${seeded.org}, 'approval.requested', now(), '{}', now()),
           (${seeded.waiting}, ${seeded.org}, 'approval.requested', now(), '{}', NULL)
  `
  }).pipe(Effect.orDie)
)

const Upgraded = Migrations.layer.pipe(
  Layer.provideMerge(PreviousRelease),
  Layer.provideMerge(
    process.env.TEST_DATABASE_URL ? Database.scratch(Redacted.make(process.env.TEST_DATABASE_URL)) : emptyDatabase()
  )
)

layer(Upgraded, { excludeTestServices: true })("upgrading to the dispatch cursor", (it) => {
  it.effect("the previous release's undispatched event goes to the cursor; its dispatcher leaves the new ones alone", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const waiting = () =>
        Effect.map(
          sql<{ id: string }>`SELECT id FROM undispatched_events ORDER BY writer, seq`,
          (rows) => rows.map((r) => r.id)
        )
      assert.deepStrictEqual(yield* waiting(), [seeded.waiting], "the undispatched one, not the dispatched one")
      assert.deepStrictEqual(
        yield* previousDispatcherTakes(sql),
        [],
        "handed over: the previous dispatcher no longer takes it"
      )
      // An event written as the previous release writes it (no writer named).
      const fresh = newId()
      yield* sql`INSERT INTO events (id, org_id, type, occurred_at, body) VALUES (${fresh}, ${seeded.org}, 'approval.requested', now(), '{}')`
      assert.deepStrictEqual(yield* waiting(), [seeded.waiting, fresh], "behind the handed-over one")
      assert.deepStrictEqual(
        yield* previousDispatcherTakes(sql),
        [],
        "never taken by the previous release's dispatcher"
      )
    }).pipe(Effect.orDie))
})
