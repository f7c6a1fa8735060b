/**
 * The queue's hot statements are index-driven whatever the planner's
 * statistics say: on a PostgreSQL server, with a large
 * backlog and a long history inserted after the last (auto)analyze, neither
 * the claim, the next-due query nor the settle reads `deliveries` sequentially or sorts
 * the queue. The plans are printed for the record (`PRINT_PLANS=1`).
 */
import { assert, describe, layer } from "@effect/vitest"
import { Effect } from "effect"
import { SqlClient } from "effect/sql"
import { PgClient } from "@effect/sql-pg"
import { leaseAndTake, leaseTargets, takeRows } from "../../../src/deliveries/Log.ts"
import { claimStatement, nextDueStatement, settleStatement } from "../../../src/deliveries/Statements.ts"
import { newId } from "../../../src/platform/Ids.ts"
import { undispatchedEvents } from "../../../src/notifications/Dispatcher.ts"
import { newOrg, QueueLive, serverUrl } from "./support.ts"

const BACKLOG = 60_000
const HISTORY = 120_000
const TARGETS = 40
/** A burst to one endpoint, as the webhooks benchmark sends it. */
const BURST = 20_000

interface PlanNode {
  readonly "Node Type": string
  readonly "Relation Name"?: string
  readonly "Index Name"?: string
  readonly "Plan Rows"?: number
  readonly Plans?: ReadonlyArray<PlanNode>
}

const nodes = (plan: PlanNode): Array<PlanNode> => [plan, ...(plan.Plans ?? []).flatMap(nodes)]

const explain = (statement: { readonly compile: () => readonly [string, ReadonlyArray<unknown>] }) =>
  Effect.gen(function*() {
    const sql = (yield* PgClient.PgClient) as SqlClient.SqlClient
    const [text, params] = statement.compile()
    const rows = yield* sql.unsafe<{ "QUERY PLAN": ReadonlyArray<{ Plan: PlanNode }> }>(
      `EXPLAIN (FORMAT JSON) ${text}`,
      params as Array<unknown>
    )
    const textPlan = yield* sql.unsafe<{ "QUERY PLAN": string }>(`EXPLAIN ${text}`, params as Array<unknown>)
    if (process.env.PRINT_PLANS) console.log(textPlan.map((row) => row["QUERY PLAN"]).join("\n"))
    return nodes(rows[0]!["QUERY PLAN"][0]!.Plan)
  }).pipe(Effect.orDie)

/** A sort of `deliveries` rows: the log's take must read each target's rows in seq order from the index. */
const sortsTheQueue = (plan: ReadonlyArray<PlanNode>) =>
  plan.filter((node) =>
    (node["Node Type"] === "Sort" || node["Node Type"] === "Incremental Sort") &&
    (node.Plans ?? []).flatMap(nodes).some((child) => child["Relation Name"] === "deliveries")
  )

/** What must not appear: a sequential scan of the queue, or a sort/bitmap over all of its rows. */
const readsTheWholeQueue = (plan: ReadonlyArray<PlanNode>) =>
  plan.filter((node) =>
    node["Relation Name"] === "deliveries" && (node["Node Type"] === "Seq Scan" || node["Node Type"] === "Bitmap Heap Scan")
  )

describe.skipIf(!serverUrl)("queue statement plans on a PostgreSQL server without statistics", () => {
  layer(QueueLive, { excludeTestServices: true, timeout: 120_000 })("a large backlog inserted after the last analyze", (it) => {
    it.effect("claim, next-due and settle read deliveries through indexes only", () =>
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        // No autovacuum analyze meanwhile: the planner keeps what it knew
        // when the table was empty.
        yield* sql`ALTER TABLE deliveries SET (autovacuum_enabled = false)`
        yield* sql`ALTER TABLE delivery_targets SET (autovacuum_enabled = false)`
        const org = yield* newOrg
        const targets = Array.from({ length: TARGETS }, () => newId())
        // A long history of finished deliveries, then a burst still to send.
        yield* sql`
          INSERT INTO deliveries (id, org_id, kind, target_id, status, finished_at)
          SELECT gen_random_uuid(), ${org}, 'webhook', (${targets} ::uuid[])[1 + i % ${TARGETS}], 'delivered', now()
          FROM generate_series(1, ${HISTORY}) AS i
        `
        yield* sql`
          INSERT INTO deliveries (id, org_id, kind, target_id, status)
          SELECT gen_random_uuid(), ${org}, 'webhook', (${targets} ::uuid[])[1 + i % ${TARGETS}], 'queued'
          FROM generate_series(1, ${BACKLOG}) AS i
        `
        const [analysed] = yield* sql<{ n: number }>`
          SELECT count(*)::int AS n FROM pg_stat_user_tables
          WHERE relname = 'deliveries' AND (last_analyze IS NOT NULL OR last_autoanalyze IS NOT NULL)
        `
        assert.strictEqual(analysed!.n, 0, "the table was never analysed")
        const pg = yield* PgClient.PgClient

        const claim = yield* explain(
          claimStatement(pg, "webhook", { limit: 512, leaseFor: "30 seconds", perTarget: 256, perFailingTarget: 1 }, newId())
        )
        assert.deepStrictEqual(readsTheWholeQueue(claim), [], "claim")
        const due = yield* explain(nextDueStatement(pg, "webhook", newId()))
        assert.deepStrictEqual(readsTheWholeQueue(due), [], "next due")

        // The same once statistics exist.
        yield* sql`ANALYZE deliveries`
        yield* sql`ANALYZE delivery_targets`
        const claimAnalysed = yield* explain(
          claimStatement(pg, "webhook", { limit: 512, leaseFor: "30 seconds", perTarget: 256, perFailingTarget: 1 }, newId())
        )
        assert.deepStrictEqual(readsTheWholeQueue(claimAnalysed), [], "claim, analysed")
        assert.deepStrictEqual(readsTheWholeQueue(yield* explain(nextDueStatement(pg, "webhook", newId()))), [], "next due, analysed")

        // And it does what it says on that backlog.
        const taken = yield* claimStatement(pg, "webhook", { limit: 512, leaseFor: "30 seconds", perTarget: 256 }, newId())
        assert.strictEqual(taken.length, 512)

        // The settle of a batch of them reaches its rows by key, its targets' rows locked first.
        const batch = taken.slice(0, 32).map((row, ord) => ({
          ord, id: row.id, lease_owner: row.lease_owner, target_id: row.target_id, status: "delivered", last_error: null,
          meta: {}, next_attempt_at: null, finished: true, failed_attempt: false, cooldown_after: 5, cooldown_base: 1,
          cooldown_cap: 60, status_code: 204, error: null, snippet: "", duration_ms: 1
        }))
        const settle = settleStatement(pg, JSON.stringify(batch), [...new Set(batch.map((row) => row.target_id))].sort())
        const settlePlan = yield* explain(settle)
        assert.deepStrictEqual(readsTheWholeQueue(settlePlan), [], "settle")
        assert.isTrue(settlePlan.some((node) => node["Node Type"] === "LockRows"), "the targets are locked in the statement")
        const recorded = yield* settle
        assert.strictEqual(recorded.length, 32)
      }))

    it.effect("the log's lease, take and settle read deliveries through indexes only, each target's rows in seq order", () =>
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        const org = yield* newOrg
        const targets = Array.from({ length: TARGETS }, () => newId())
        yield* sql`
          INSERT INTO delivery_targets (id, org_id, kind, undelivered, log_pending)
          SELECT t, ${org}, 'webhook', ${BACKLOG / TARGETS}, ${BACKLOG / TARGETS} FROM unnest(${targets} ::uuid[]) AS t
        `
        // A history already delivered through the log, then a backlog still logged.
        yield* sql`
          INSERT INTO deliveries (id, org_id, kind, target_id, status)
          SELECT gen_random_uuid(), ${org}, 'webhook', (${targets} ::uuid[])[1 + i % ${TARGETS}], 'logged'
          FROM generate_series(1, ${HISTORY + BACKLOG}) AS i
        `
        yield* sql`
          UPDATE delivery_targets t SET cursor = h.seq, leased_to = h.seq
          FROM (SELECT target_id, (array_agg(seq ORDER BY seq))[${HISTORY / TARGETS}] AS seq FROM deliveries
                WHERE target_id IN ${sql.in(targets)} GROUP BY target_id) h
          WHERE t.id = h.target_id
        `
        const pg = yield* PgClient.PgClient
        const options = { limit: 512, leaseFor: "30 seconds", perTarget: 64 } as const
        const owner = newId()
        const lease = yield* explain(leaseAndTake(pg, "webhook", options, owner))
        assert.deepStrictEqual(readsTheWholeQueue(lease), [], "lease and take")
        assert.deepStrictEqual(sortsTheQueue(lease), [], "lease and take: the ordered index scan, not a sort")
        const taken = (yield* leaseAndTake(pg, "webhook", options, owner)).filter((row) => row.id !== null)
        assert.strictEqual(taken.length, 512)
        // Each target its share of the claim's room (512 over 40 targets: 13), the last what is left.
        const perTarget = new Map<string, number>()
        for (const row of taken) perTarget.set(row.target_id, (perTarget.get(row.target_id) ?? 0) + 1)
        assert.strictEqual(perTarget.size, TARGETS)
        assert.sameMembers([...new Set(perTarget.values())], [13, 5])
        // A takeover's two statements.
        assert.deepStrictEqual(readsTheWholeQueue(yield* explain(leaseTargets(pg, "webhook", options, owner))), [], "takeover lease")
        const leased = [...new Set(taken.map((row) => row.target_id))].map((id) => ({
          id, lease_id: taken.find((row) => row.target_id === id)!.lease_id, want: 13
        }))
        const take = yield* explain(takeRows(pg, leased, options))
        assert.deepStrictEqual(readsTheWholeQueue(take), [], "takeover take")
        assert.deepStrictEqual(sortsTheQueue(take), [], "takeover take: the ordered index scan, not a sort")
        const batch = taken.slice(0, 64).map((row, ord) => ({
          ord, id: row.id, lease_owner: row.lease_id, target_id: row.target_id, status: "delivered", last_error: null,
          meta: {}, next_attempt_at: null, finished: true, failed_attempt: false, status_code: 204, error: null,
          duration_ms: 1, logged: true, seq: Number(row.seq), org_id: org, log_cursor: null, lease_secs: 30
        }))
        const settle = settleStatement(pg, JSON.stringify(batch), [...new Set(batch.map((row) => row.target_id))].sort())
        assert.deepStrictEqual(readsTheWholeQueue(yield* explain(settle)), [], "settle")
        assert.strictEqual((yield* settle).length, 64)
      }))
  })

  layer(QueueLive, { excludeTestServices: true, timeout: 120_000 })("a burst to one endpoint on a fresh database", (it) => {
    it.effect("the dispatcher's next events and the log's take read in order: neither reads the whole burst", () =>
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        const pg = yield* PgClient.PgClient
        const org = yield* newOrg
        // What a planner without statistics takes for a handful of rows:
        // a burst of 20 000 events, and as many logged deliveries to one
        // endpoint (the webhooks benchmark's shape).
        yield* sql`
          INSERT INTO events (id, org_id, type, occurred_at, body, label)
          SELECT gen_random_uuid(), ${org}, 'approval.requested', now(), repeat('x', 400), 'approval.requested x'
          FROM generate_series(1, ${BURST})
        `
        const events = yield* explain(pg`WITH lock AS (SELECT true AS locked) ${undispatchedEvents(pg, 200)}`)
        assert.deepStrictEqual(
          events.filter((node) =>
            node["Relation Name"] === "events" && (node["Node Type"] === "Seq Scan" || node["Node Type"] === "Bitmap Heap Scan")
          ),
          [],
          "the dispatcher's events"
        )
        assert.deepStrictEqual(events.filter((node) => node["Node Type"] === "Sort"), [], "the dispatcher's events: in index order")

        const target = newId()
        yield* sql`
          INSERT INTO delivery_targets (id, org_id, kind, undelivered, log_pending)
          VALUES (${target}, ${org}, 'webhook', ${BURST}, ${BURST})
        `
        yield* sql`
          INSERT INTO deliveries (id, org_id, kind, target_id, status)
          SELECT gen_random_uuid(), ${org}, 'webhook', ${target}, 'logged' FROM generate_series(1, ${BURST})
        `
        const options = { limit: 64, leaseFor: "30 seconds", perTarget: 256 } as const
        const owner = newId()
        const lease = yield* explain(leaseAndTake(pg, "webhook", options, owner))
        assert.deepStrictEqual(readsTheWholeQueue(lease), [], "lease and take")
        assert.deepStrictEqual(sortsTheQueue(lease), [], "lease and take: the ordered index scan, not a sort")
        const taken = (yield* leaseAndTake(pg, "webhook", options, owner)).filter((row) => row.id !== null)
        assert.strictEqual(taken.length, 64)
        // Its own lease again, past the mark.
        const again = yield* explain(leaseAndTake(pg, "webhook", options, owner))
        assert.deepStrictEqual(readsTheWholeQueue(again), [], "lease and take, past the mark")
        assert.deepStrictEqual(sortsTheQueue(again), [], "lease and take, past the mark: the ordered index scan")
      }))

    it.effect("with many endpoints of a few rows each, the take reads each endpoint's rows and no further", () =>
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        const pg = yield* PgClient.PgClient
        const org = yield* newOrg
        const targets = Array.from({ length: 100 }, () => newId())
        yield* sql`
          INSERT INTO delivery_targets (id, org_id, kind, undelivered, log_pending)
          SELECT t, ${org}, 'webhook', 5, 5 FROM unnest(${targets} ::uuid[]) AS t
        `
        yield* sql`
          INSERT INTO deliveries (id, org_id, kind, target_id, status)
          SELECT gen_random_uuid(), ${org}, 'webhook', (${targets} ::uuid[])[1 + i % 100], 'logged'
          FROM generate_series(0, 499) AS i
        `
        const [text, params] = leaseAndTake(pg, "webhook", { limit: 512, leaseFor: "30 seconds", perTarget: 256 }, newId()).compile()
        const [row] = yield* sql.unsafe<{ "QUERY PLAN": ReadonlyArray<{ Plan: PlanNode & { "Actual Rows"?: number; "Actual Loops"?: number } }> }>(
          `EXPLAIN (ANALYZE, FORMAT JSON) ${text}`,
          params as Array<unknown>
        )
        const read = nodes(row!["QUERY PLAN"][0]!.Plan)
          .filter((node) => node["Relation Name"] === "deliveries")
          .map((node) => {
            const n = node as PlanNode & { "Actual Rows"?: number; "Actual Loops"?: number }
            return (n["Actual Rows"] ?? 0) * (n["Actual Loops"] ?? 1)
          })
          .reduce((a, b) => a + b, 0)
        // Each endpoint's five rows (and the single endpoint's of the test before), not 256 per endpoint.
        assert.isAtMost(read, 500 + 256, "rows of deliveries read by the take")
      }).pipe(Effect.orDie))
  })
})
