/**
 * The queue's hot statements are index-driven whatever the planner's
 * statistics say: on a PostgreSQL server, with a large
 * backlog and a long history inserted after the last (auto)analyze, neither
 * the claim, the next-due query nor the settle reads `deliveries` sequentially or sorts
 * the queue, and the lease and next-due find the log's endpoints in
 * `delivery_targets_log_idx`, not by reading every endpoint. The plans are printed for the record (`PRINT_PLANS=1`). The
 * delivery records (an endpoint's latest deliveries, one delivery's
 * attempts) find each listed row's outcome row by one ordered probe, on
 * either database, however many outcome rows the endpoint has. With
 * statistics, the take checks each row it hands out against the outcome
 * rows above it, never by a sequential scan of them all.
 */
import { PgClient } from "@effect/sql-pg"
import { assert, describe, layer } from "@effect/vitest"
import { Effect } from "effect"
import { SqlClient } from "effect/sql"
import { leaseAndTake, leaseTargets, takeRows } from "../../../src/deliveries/log/Log.ts"
import { attemptsStatement, listStatement } from "../../../src/deliveries/records/Listing.ts"
import * as Rows from "../../../src/deliveries/Rows.ts"
import { claimStatement, nextDueStatement, settleStatement } from "../../../src/deliveries/rows/Statements.ts"
import { heldPastPass } from "../../../src/outbox/HeldPastPass.ts"
import { dispatchCursor, undispatchedEvents } from "../../../src/outbox/Outbox.ts"
import { newId } from "../../../src/platform/Ids.ts"
import { newOrg, QueueLive, serverUrl } from "./support.ts"

const BACKLOG = 60_000
const HISTORY = 120_000
const TARGETS = 40
/** Endpoints with nothing logged and no lease of late. */
const QUIET = 20_000
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
    node["Relation Name"] === "deliveries" &&
    (node["Node Type"] === "Seq Scan" || node["Node Type"] === "Bitmap Heap Scan")
  )

describe.skipIf(!serverUrl)("queue statement plans on a PostgreSQL server without statistics", () => {
  layer(QueueLive, { excludeTestServices: true, timeout: 120_000 })(
    "a large backlog inserted after the last analyze",
    (it) => {
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
            claimStatement(
              pg,
              "webhook",
              { limit: 512, leaseFor: "30 seconds", perTarget: 256, perFailingTarget: 1 },
              newId(),
              newId()
            )
          )
          assert.deepStrictEqual(readsTheWholeQueue(claim), [], "claim")
          const due = yield* explain(nextDueStatement(pg, "webhook", newId()))
          assert.deepStrictEqual(readsTheWholeQueue(due), [], "next due")

          // The same once statistics exist.
          yield* sql`ANALYZE deliveries`
          yield* sql`ANALYZE delivery_targets`
          const claimAnalysed = yield* explain(
            claimStatement(
              pg,
              "webhook",
              { limit: 512, leaseFor: "30 seconds", perTarget: 256, perFailingTarget: 1 },
              newId(),
              newId()
            )
          )
          assert.deepStrictEqual(readsTheWholeQueue(claimAnalysed), [], "claim, analysed")
          assert.deepStrictEqual(
            readsTheWholeQueue(yield* explain(nextDueStatement(pg, "webhook", newId()))),
            [],
            "next due, analysed"
          )

          // And it does what it says on that backlog.
          const taken = yield* Rows.claimed(
            claimStatement(pg, "webhook", { limit: 512, leaseFor: "30 seconds", perTarget: 256 }, newId(), newId())
          )
          assert.strictEqual(taken.length, 512)

          // The settle of a batch of them reaches its rows by key, its targets' rows locked first.
          const batch = taken.slice(0, 32).map((row, ord) => ({
            ord,
            id: row.id,
            lease_owner: row.lease_owner,
            target_id: row.target_id,
            status: "delivered",
            last_error: null,
            meta: {},
            next_attempt_at: null,
            finished: true,
            failed_attempt: false,
            cooldown_after: 5,
            cooldown_base: 1,
            cooldown_cap: 60,
            status_code: 204,
            error: null,
            snippet: "",
            duration_ms: 1
          }))
          const settle = settleStatement(
            pg,
            JSON.stringify(batch),
            [...new Set(batch.map((row) => row.target_id))].sort()
          )
          const settlePlan = yield* explain(settle)
          assert.deepStrictEqual(readsTheWholeQueue(settlePlan), [], "settle")
          assert.isTrue(
            settlePlan.some((node) => node["Node Type"] === "LockRows"),
            "the targets are locked in the statement"
          )
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
          assert.deepStrictEqual(
            readsTheWholeQueue(yield* explain(leaseTargets(pg, "webhook", options, owner))),
            [],
            "takeover lease"
          )
          const leased = [...new Set(taken.map((row) => row.target_id))].map((id) => ({
            id,
            lease_id: taken.find((row) => row.target_id === id)!.lease_id,
            want: 13
          }))
          const take = yield* explain(takeRows(pg, leased, options))
          assert.deepStrictEqual(readsTheWholeQueue(take), [], "takeover take")
          assert.deepStrictEqual(sortsTheQueue(take), [], "takeover take: the ordered index scan, not a sort")
          const batch = taken.slice(0, 64).map((row, ord) => ({
            ord,
            id: row.id,
            lease_owner: row.lease_id,
            target_id: row.target_id,
            status: "delivered",
            last_error: null,
            meta: {},
            next_attempt_at: null,
            finished: true,
            failed_attempt: false,
            status_code: 204,
            error: null,
            duration_ms: 1,
            logged: true,
            seq: Number(row.seq),
            org_id: org,
            log_cursor: null,
            lease_secs: 30
          }))
          const settle = settleStatement(
            pg,
            JSON.stringify(batch),
            [...new Set(batch.map((row) => row.target_id))].sort()
          )
          assert.deepStrictEqual(readsTheWholeQueue(yield* explain(settle)), [], "settle")
          assert.strictEqual((yield* settle).length, 64)
        }))

      it.effect("with thousands of quiet endpoints, the lease and next-due read the log's endpoints from its index", () =>
        Effect.gen(function*() {
          const sql = yield* SqlClient.SqlClient
          const org = yield* newOrg
          // Endpoints delivered to once and quiet since: out of the log's index (not log_listed).
          yield* sql`
          INSERT INTO delivery_targets (id, org_id, kind, cursor, leased_to)
          SELECT gen_random_uuid(), ${org}, 'webhook', 1, 1 FROM generate_series(1, ${QUIET})
        `
          const pg = yield* PgClient.PgClient
          const readsEveryEndpoint = (plan: ReadonlyArray<PlanNode>) =>
            plan.filter((node) =>
              node["Relation Name"] === "delivery_targets" &&
              (node["Node Type"] === "Seq Scan" ||
                (node["Index Name"] !== undefined && node["Index Name"] !== "delivery_targets_log_idx" &&
                  node["Index Name"] !== "delivery_targets_pkey"))
            )
          const options = { limit: 512, leaseFor: "30 seconds", perTarget: 64 } as const
          const lease = yield* explain(leaseAndTake(pg, "webhook", options, newId()))
          assert.deepStrictEqual(readsEveryEndpoint(lease), [], "lease and take")
          assert.isTrue(
            lease.some((node) => node["Index Name"] === "delivery_targets_log_idx"),
            "lease and take: the log's index"
          )
          assert.deepStrictEqual(
            readsEveryEndpoint(yield* explain(leaseTargets(pg, "webhook", options, newId()))),
            [],
            "takeover lease"
          )
          assert.deepStrictEqual(
            readsEveryEndpoint(yield* explain(nextDueStatement(pg, "webhook", newId()))),
            [],
            "next due"
          )
        }))
    }
  )

  layer(QueueLive, { excludeTestServices: true, timeout: 120_000 })(
    "a burst to one endpoint on a fresh database",
    (it) => {
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
          const events = yield* explain(
            pg`WITH lock AS (SELECT true AS locked), ${dispatchCursor(pg)} ${undispatchedEvents(pg, 200)}`
          )
          assert.deepStrictEqual(
            events.filter((node) =>
              node["Relation Name"] === "events" &&
              (node["Node Type"] === "Seq Scan" || node["Node Type"] === "Bitmap Heap Scan")
            ),
            [],
            "the dispatcher's events"
          )
          assert.deepStrictEqual(
            events.filter((node) => node["Node Type"] === "Sort"),
            [],
            "the dispatcher's events: in index order"
          )
          // Every pass asks it: the first event past where it leaves the
          // cursor, from the index, never a walk of the events kept (here
          // with a pass that took nothing).
          const held = yield* explain(pg`
            WITH nxt AS (SELECT NULL::xid8 AS writer, NULL::bigint AS seq WHERE false),
            late AS (SELECT NULL::bigint AS seq WHERE false)
            SELECT ${heldPastPass(pg)} AS held`)
          assert.deepStrictEqual(
            held.filter((node) =>
              node["Relation Name"] === "events" && node["Node Type"] !== "Index Only Scan" &&
              node["Node Type"] !== "Index Scan"
            ),
            [],
            "whether events are held back"
          )

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
          const [text, params] = leaseAndTake(
            pg,
            "webhook",
            { limit: 512, leaseFor: "30 seconds", perTarget: 256 },
            newId()
          ).compile()
          const [row] = yield* sql.unsafe<
            { "QUERY PLAN": ReadonlyArray<{ Plan: PlanNode & { "Actual Rows"?: number; "Actual Loops"?: number } }> }
          >(
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
    }
  )
})

/** An endpoint's history delivered through the log: outcome rows of this many seqs, in pairs whose ranges overlap. */
const OUTCOMES = 3_000
const SEQS = 14
/**
 * The analysed history of the claim's check: past 6 000 outcome rows of
 * one endpoint the planner took an `EXISTS` over the key's range for a
 * sequential scan that stops early (at 3 000 it still walked the key).
 */
const ANALYSED_OUTCOMES = 8_000

interface AnalysedNode extends PlanNode {
  readonly "Actual Rows"?: number
  readonly "Actual Loops"?: number
  readonly "Rows Removed by Filter"?: number
  readonly "Rows Removed by Index Recheck"?: number
}

/** The statement's plan (without statistics) and the rows of `delivery_outcomes` it read, run. */
const analyse = (statement: { readonly compile: () => readonly [string, ReadonlyArray<unknown>] }) =>
  Effect.gen(function*() {
    const sql = (yield* PgClient.PgClient) as SqlClient.SqlClient
    const [text, params] = statement.compile()
    const [row] = yield* sql.unsafe<{ "QUERY PLAN": ReadonlyArray<{ Plan: AnalysedNode }> }>(
      `EXPLAIN (ANALYZE, FORMAT JSON) ${text}`,
      params as Array<unknown>
    )
    const plan = nodes(row!["QUERY PLAN"][0]!.Plan) as Array<AnalysedNode>
    if (process.env.PRINT_PLANS) {
      const textPlan = yield* sql.unsafe<{ "QUERY PLAN": string }>(`EXPLAIN ANALYZE ${text}`, params as Array<unknown>)
      console.log(textPlan.map((line) => line["QUERY PLAN"]).join("\n"))
    }
    const outcomesRead = plan
      .filter((node) => node["Relation Name"] === "delivery_outcomes")
      .map((node) =>
        ((node["Actual Rows"] ?? 0) + (node["Rows Removed by Filter"] ?? 0) +
          (node["Rows Removed by Index Recheck"] ?? 0)) *
        (node["Actual Loops"] ?? 1)
      )
      .reduce((a, b) => a + b, 0)
    return { plan, outcomesRead }
  }).pipe(Effect.orDie)

/** A new organization's endpoint with `outcomes * SEQS` rows logged for it (their outcome rows are each test's own). */
const loggedHistory = (outcomes: number) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const org = yield* newOrg
    const target = newId()
    yield* sql`INSERT INTO delivery_targets (id, org_id, kind) VALUES (${target}, ${org}, 'webhook')`
    yield* sql`
    INSERT INTO deliveries (id, org_id, kind, target_id, status)
    SELECT gen_random_uuid(), ${org}, 'webhook', ${target}, 'logged' FROM generate_series(1, ${outcomes * SEQS})
  `
    return { org, target }
  })

/** What must not appear: a sequential or bitmap scan of the outcome rows, or of the deliveries listed. */
const scansTheHistory = (plan: ReadonlyArray<PlanNode>) =>
  plan.filter((node) =>
    (node["Relation Name"] === "delivery_outcomes" || node["Relation Name"] === "deliveries") &&
    (node["Node Type"] === "Seq Scan" || node["Node Type"] === "Bitmap Heap Scan")
  )

describe("delivery record plans, without statistics", () => {
  layer(QueueLive, { excludeTestServices: true, timeout: 120_000 })(
    "an endpoint with a long delivered history",
    (it) => {
      it.effect("the list and one delivery's attempts probe delivery_outcomes once per row, however long the history", () =>
        Effect.gen(function*() {
          const sql = yield* SqlClient.SqlClient
          const pg = yield* PgClient.PgClient
          yield* sql`ALTER TABLE deliveries SET (autovacuum_enabled = false)`
          yield* sql`ALTER TABLE delivery_outcomes SET (autovacuum_enabled = false)`
          const { org, target } = yield* loggedHistory(OUTCOMES)
          // Batches in pairs over 2 × SEQS rows, one the even places, the
          // other the odd: overlapping ranges, as out-of-order settles leave them.
          yield* sql`
          INSERT INTO delivery_outcomes (target_id, to_seq, from_seq, org_id, seqs, status_codes, durations_ms)
          SELECT ${target}, max(seq), min(seq), ${org}, array_agg(seq ORDER BY seq),
                 array_agg(200 + (seq % 5)::int ORDER BY seq), array_agg((seq % 97)::int ORDER BY seq)
          FROM (SELECT seq, row_number() OVER (ORDER BY seq) - 1 AS r FROM deliveries WHERE target_id = ${target}) s
          GROUP BY (r / ${2 * SEQS}) * 2 + r % 2
        `
          // Then 100 more logged rows under a live lease, 14 of them (near
          // the top) settled above the cursor.
          yield* sql`
          INSERT INTO deliveries (id, org_id, kind, target_id, status)
          SELECT gen_random_uuid(), ${org}, 'webhook', ${target}, 'logged' FROM generate_series(1, 100)
        `
          yield* sql`
          INSERT INTO delivery_outcomes (target_id, to_seq, from_seq, org_id, seqs, status_codes, durations_ms)
          SELECT ${target}, max(seq), min(seq), ${org}, array_agg(seq ORDER BY seq), array_agg(204 ORDER BY seq), array_agg(3 ORDER BY seq)
          FROM (SELECT seq FROM deliveries WHERE target_id = ${target} ORDER BY seq DESC OFFSET 6 LIMIT 14) s
        `
          yield* sql`
          UPDATE delivery_targets SET cursor = h.seq, lease_owner = gen_random_uuid(), lease_id = gen_random_uuid(),
            lease_until = now() + interval '1 hour', leased_to = h.top, log_pending = 86, log_in_flight = 86
          FROM (SELECT (array_agg(seq ORDER BY seq))[${OUTCOMES * SEQS}] AS seq, max(seq) AS top FROM deliveries
                WHERE target_id = ${target}) h
          WHERE id = ${target}
        `
          const [picked] = yield* sql<{ halfway: string; halfway_seq: string; queued: string }>`
          SELECT (SELECT id FROM deliveries WHERE target_id = ${target} ORDER BY seq OFFSET ${
            OUTCOMES * SEQS / 2
          } LIMIT 1) AS halfway,
                 (SELECT seq FROM deliveries WHERE target_id = ${target} ORDER BY seq OFFSET ${
            OUTCOMES * SEQS / 2
          } LIMIT 1) AS halfway_seq,
                 (SELECT id FROM deliveries WHERE target_id = ${target} ORDER BY seq DESC OFFSET 50 LIMIT 1) AS queued
        `

          const list = yield* analyse(listStatement(pg, { orgId: org, kind: "webhook", targetId: target }))
          assert.deepStrictEqual(scansTheHistory(list.plan), [], "the list")
          // 50 probes, each reading its outcome row or (for a row not
          // delivered) the one settled above the cursor: not the history.
          assert.isAtMost(list.outcomesRead, 100, "outcome rows read by the list")
          const listed = yield* listStatement(pg, { orgId: org, kind: "webhook", targetId: target })
          assert.strictEqual(listed.length, 50)
          assert.deepStrictEqual(
            Object.fromEntries(
              ["queued", "sending", "delivered"].map((s) => [s, listed.filter((row) => row.status === s).length])
            ),
            { queued: 0, sending: 36, delivered: 14 }
          )

          for (
            const [name, id, read] of [["halfway", picked!.halfway, 2], ["still to send", picked!.queued, 1]] as const
          ) {
            const attempts = yield* analyse(attemptsStatement(pg, id))
            assert.deepStrictEqual(scansTheHistory(attempts.plan), [], `attempts, ${name}`)
            assert.isAtMost(attempts.outcomesRead, read, `outcome rows read by the attempts, ${name}`)
          }
          const halfway = yield* attemptsStatement(pg, picked!.halfway)
          const seq = Number(picked!.halfway_seq)
          assert.deepStrictEqual(halfway.map((a) => [a.attempt, a.status_code, a.duration_ms]), [[
            1,
            200 + (seq % 5),
            seq % 97
          ]])
          assert.deepStrictEqual(yield* attemptsStatement(pg, picked!.queued), [])
        }))
    }
  )
})

describe("the claim's check against the outcome rows, with statistics", () => {
  layer(QueueLive, { excludeTestServices: true, timeout: 120_000 })(
    "an endpoint with a long delivered history, analysed",
    (it) => {
      it.effect("the take reads the outcome rows above each row it hands out, never the whole history", () =>
        Effect.gen(function*() {
          const sql = yield* SqlClient.SqlClient
          const pg = yield* PgClient.PgClient
          const { org, target } = yield* loggedHistory(ANALYSED_OUTCOMES)
          yield* sql`
          INSERT INTO delivery_outcomes (target_id, to_seq, from_seq, org_id, seqs, status_codes, durations_ms)
          SELECT ${target}, max(seq), min(seq), ${org}, array_agg(seq ORDER BY seq), array_agg(204 ORDER BY seq),
                 array_agg(3 ORDER BY seq)
          FROM (SELECT seq, row_number() OVER (ORDER BY seq) - 1 AS r FROM deliveries WHERE target_id = ${target}) s
          GROUP BY r / ${SEQS}
        `
          // The history settled (the cursor past it), then 40 rows waiting.
          yield* sql`UPDATE delivery_targets SET cursor = (SELECT max(seq) FROM deliveries WHERE target_id = ${target}),
            leased_to = (SELECT max(seq) FROM deliveries WHERE target_id = ${target}) WHERE id = ${target}`
          yield* sql`
          INSERT INTO deliveries (id, org_id, kind, target_id, status)
          SELECT gen_random_uuid(), ${org}, 'webhook', ${target}, 'logged' FROM generate_series(1, 40)
        `
          yield* sql`UPDATE delivery_targets SET undelivered = 40, log_pending = 40 WHERE id = ${target}`
          // As autovacuum (or the embedded database's own statistics) leaves them.
          yield* sql`ANALYZE deliveries`
          yield* sql`ANALYZE delivery_outcomes`
          yield* sql`ANALYZE delivery_targets`
          const taken = yield* analyse(
            leaseAndTake(pg, "webhook", { limit: 64, leaseFor: "30 seconds", perTarget: 64 }, newId())
          )
          assert.deepStrictEqual(
            taken.plan.filter((node) =>
              node["Relation Name"] === "delivery_outcomes" && node["Node Type"] === "Seq Scan"
            ),
            [],
            "the take"
          )
          // Each of the 40 rows looks above itself and finds nothing: not 40 times the 8 000 outcome rows.
          assert.isAtMost(taken.outcomesRead, 40, "outcome rows read by the take")
          // The take ran (EXPLAIN ANALYZE runs it): it handed out the 40 rows.
          const [after] = yield* sql<{ log_in_flight: number }>`
            SELECT log_in_flight FROM delivery_targets WHERE id = ${target}`
          assert.strictEqual(after!.log_in_flight, 40)
        }))
    }
  )
})
