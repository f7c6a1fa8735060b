/**
 * The queue's updates of `delivery_targets` (each enqueue, lease and settle
 * writes a target's counts and lease) are HOT updates: no index of the
 * table has a key or predicate over a column they change, so PostgreSQL
 * writes no index entries for them and prunes the old versions on the
 * page, and the table does not grow with the deliveries it counted. On
 * either database.
 */
import { PgClient } from "@effect/sql-pg"
import { assert, layer } from "@effect/vitest"
import { Effect } from "effect"
import { SqlClient } from "effect/sql"
import * as fs from "node:fs"
import * as path from "node:path"
import { DatabaseInfo } from "../../../src/database/Database.ts"
import { Wakeups } from "../../../src/database/Wakeups.ts"
import { type Claimed, DeliveryQueue, make, Outcome } from "../../../src/deliveries/DeliveryQueue.ts"
import { newId } from "../../../src/platform/Ids.ts"
import { newOrg, ok, QueueLive } from "./support.ts"

/**
 * The files holding the statements run for every delivery. Writes of an
 * endpoint's settings (`Targets.ts`: strict, rate limit, share group,
 * failing since) are not among them.
 */
const HOT_FILES = [
  "src/deliveries/Enqueue.ts",
  "src/deliveries/log/Log.ts",
  "src/deliveries/log/SettleSuccesses.ts",
  "src/deliveries/log/Reconcile.ts",
  "src/deliveries/rows/Statements.ts"
]

/** The columns of `delivery_targets` the SET lists of `text`'s statements assign. */
const assignedColumns = (text: string): Set<string> => {
  const sets = [
    ...text.matchAll(/UPDATE delivery_targets(?: (?:AS )?\w+)?\s+SET\s([\s\S]*?)\n\s*(?:FROM|WHERE|RETURNING)\b/g),
    ...text.matchAll(/INSERT INTO delivery_targets[^`]*?DO UPDATE SET\s([\s\S]*?)\n\s*(?:WHERE|RETURNING)\b/g)
  ].map((match) => match[1]!)
  return new Set(sets.flatMap((set) => [...set.matchAll(/(?<![.\w])([a-z_]+)\s*=(?![=>])/g)].map((m) => m[1]!)))
}

const webhook = (orgId: string, targetId: string) => ({ orgId, kind: "webhook" as const, targetId, capacity: 1_000 })
const options = { limit: 10, leaseFor: "1 minute", perTarget: 10 } as const
const deliver = (claimed: ReadonlyArray<Claimed>) =>
  claimed.map((c) => ({ claimed: c, outcome: Outcome.delivered(), attempt: ok }))

layer(QueueLive, { excludeTestServices: true })("delivery_targets' updates", (it) => {
  it.effect("no index key or predicate names a column the statements of each delivery assign", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const hot = new Set(
        HOT_FILES.flatMap((file) => [...assignedColumns(fs.readFileSync(path.resolve(file), "utf8"))])
      )
      // The reading of the statements itself: the counts and the lease are found.
      for (const column of ["undelivered", "log_pending", "log_in_flight", "lease_id", "cursor", "log_recent"]) {
        assert.isTrue(hot.has(column), `${column} is assigned by the statements of each delivery`)
      }
      const indexes = yield* sql<{ name: string; definition: string }>`
        SELECT c.relname AS name, pg_get_indexdef(i.indexrelid) AS definition
        FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
        WHERE i.indrelid = 'delivery_targets'::regclass ORDER BY c.relname
      `
      assert.isAbove(indexes.length, 1)
      const clashes = indexes.flatMap(({ definition, name }) =>
        [...hot].filter((column) => new RegExp(`\\b${column}\\b`).test(definition.replace(/^.* USING /, "")))
          .map((column) => `${name}: ${column}`)
      )
      assert.deepStrictEqual(clashes, [])
    }).pipe(Effect.orDie))

  it.effect("deliveries one after another to an endpoint update its row HOT, start to end", () =>
    Effect.gen(function*() {
      const queue = yield* DeliveryQueue
      const sql = yield* SqlClient.SqlClient
      const org = yield* newOrg
      const target = newId()
      // One transaction: its own statistics are read before it ends (no wait for their flush).
      const counts = yield* sql.withTransaction(Effect.gen(function*() {
        for (let i = 0; i < 5; i++) {
          yield* queue.enqueueMany([webhook(org, target)])
          const claimed = yield* queue.claim("webhook", options)
          assert.deepStrictEqual(claimed.map((c) => c.targetId), [target])
          const { held } = yield* queue.settleMany(deliver(claimed))
          assert.deepStrictEqual(held, [true])
        }
        const [row] = yield* sql<{ updates: number; hot: number }>`
          SELECT n_tup_upd::int AS updates, n_tup_hot_upd::int AS hot
          FROM pg_stat_xact_user_tables WHERE relname = 'delivery_targets'
        `
        return row!
      }))
      // The enqueue, the lease and the settle of each (the first enqueue inserts the row).
      assert.isAtLeast(counts.updates, 14)
      // Only the first delivery's lease may list the endpoint in the log's index.
      assert.isAtLeast(counts.hot, counts.updates - 1, `${counts.hot} of ${counts.updates} updates HOT`)
    }).pipe(Effect.orDie))

  it.effect("an endpoint leaves the log's index once quiet, and its next delivery lists it again", () =>
    Effect.gen(function*() {
      const queue = yield* DeliveryQueue
      const sql = yield* SqlClient.SqlClient
      const org = yield* newOrg
      const target = newId()
      const listed = Effect.map(
        sql<{ listed: boolean }>`SELECT log_listed AS listed FROM delivery_targets WHERE id = ${target}`,
        (rows) => rows[0]!.listed
      )
      // A process's first take looks for quiet targets (then at most every UNLIST_EVERY_MS).
      const claimByNewProcess = Effect.gen(function*() {
        const other = make(yield* PgClient.PgClient, yield* Wakeups, yield* DatabaseInfo)
        return (yield* other.claim("webhook", options)).filter((c) => c.targetId === target)
      })
      yield* queue.enqueueMany([webhook(org, target)])
      const claimed = (yield* queue.claim("webhook", options)).filter((c) => c.targetId === target)
      yield* queue.settleMany(deliver(claimed))
      // Nothing left, its lease still live: listed, and it stays so.
      assert.deepStrictEqual(yield* claimByNewProcess, [])
      assert.isTrue(yield* listed)
      // Its last lease ran out: quiet, out of the index.
      yield* sql`UPDATE delivery_targets SET lease_until = now() - interval '1 second' WHERE id = ${target}`
      assert.deepStrictEqual(yield* claimByNewProcess, [])
      assert.isFalse(yield* listed)
      // A new delivery lists it again and is handed out.
      yield* queue.enqueueMany([webhook(org, target)])
      assert.isTrue(yield* listed)
      assert.strictEqual((yield* queue.claim("webhook", options)).filter((c) => c.targetId === target).length, 1)
    }).pipe(Effect.orDie))
})
