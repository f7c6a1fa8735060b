/**
 * Searching the delivery log: whatever the filters, the pages of a search
 * hold exactly the matching records of the organization (or target), newest
 * first, none twice and none missing, compared with a plain filter of what
 * was stored; a cursor works only with the list and filters that issued it.
 */
import { assert, layer } from "@effect/vitest"
import { Duration, Effect, Exit } from "effect"
import { SqlClient } from "effect/sql"
import fc from "fast-check"
import crypto from "node:crypto"
import { DeliveryQueue, type DeliveryStatus, Outcome } from "../../../src/deliveries/DeliveryQueue.ts"
import type { SearchInput } from "../../../src/deliveries/records/Search.ts"
import type { CursorMac } from "../../../src/platform/Cursor.ts"
import { newId } from "../../../src/platform/Ids.ts"
import { newOrg, QueueLive } from "./support.ts"

const mac: CursorMac = (message) => crypto.createHmac("sha256", "search-test").update(message).digest("base64url")

const TYPES = ["approval.requested", "approval.approved", "endpoint.failing"] as const
const CLASSES = ["payments.refund", "payments.card.capture", "deploy.prod", "payments"] as const
const STATUSES: ReadonlyArray<DeliveryStatus> = ["queued", "sending", "retrying", "delivered", "failed"]
const BASE = Date.parse("2026-11-20T00:00:00Z")

interface Stored {
  readonly id: string
  readonly seq: string
  readonly org: string
  readonly target: string
  readonly label: string
  readonly eventId: string
  readonly type: string
  readonly approval: string | null
  readonly actionClass: string | null
  readonly createdAt: number
  readonly status: DeliveryStatus
  readonly statusCode: number | null
  readonly finishedAt: number | null
}

type Filters = Omit<SearchInput, "orgId" | "kind" | "after" | "limit" | "scan">

const iso = (ms: number) => new Date(ms).toISOString()

/** The plain reading of a filter, record by record. */
const matches = (record: Stored, filters: Filters) => {
  const code = filters.statusCode
  const inCode = code === undefined ||
    (record.statusCode !== null && (code._tag === "Class"
      ? Math.floor(record.statusCode / 100) === code.digit
      : record.statusCode === code.code))
  const after = (value: number | null, bound: string | undefined) =>
    bound === undefined || (value !== null && value >= Date.parse(bound))
  const before = (value: number | null, bound: string | undefined) =>
    bound === undefined || (value !== null && value < Date.parse(bound))
  return (filters.targetId === undefined || record.target === filters.targetId) &&
    (filters.statuses === undefined || filters.statuses.includes(record.status)) &&
    inCode &&
    (filters.eventType === undefined || record.type === filters.eventType) &&
    (filters.eventId === undefined || record.eventId === filters.eventId) &&
    (filters.approvalId === undefined || record.approval === filters.approvalId) &&
    (filters.actionClass === undefined || (record.actionClass !== null && (filters.actionClass.endsWith(".*")
      ? record.actionClass.startsWith(filters.actionClass.slice(0, -1))
      : record.actionClass === filters.actionClass))) &&
    (filters.label === undefined || (filters.label.endsWith("*")
      ? record.label.startsWith(filters.label.slice(0, -1))
      : record.label === filters.label)) &&
    after(record.createdAt, filters.createdFrom) && before(record.createdAt, filters.createdUntil) &&
    after(record.finishedAt, filters.finishedFrom) && before(record.finishedAt, filters.finishedUntil)
}

/** Absent three times in four: a combination of several filters still matches something. */
const rarely = <A>(arbitrary: fc.Arbitrary<A>) =>
  fc.oneof({ arbitrary: fc.constant(undefined), weight: 3 }, { arbitrary, weight: 1 })

const newest = (a: Stored, b: Stored) => b.createdAt - a.createdAt || Number(BigInt(b.seq) - BigInt(a.seq))

layer(QueueLive, { excludeTestServices: true })("delivery log search", (it) => {
  it.effect(
    "every page of any filter combination holds exactly the matching records, newest first, once each",
    () =>
      Effect.gen(function*() {
        const queue = yield* DeliveryQueue
        const sql = yield* SqlClient.SqlClient
        const orgs = [yield* newOrg, yield* newOrg]
        const targets = [[newId(), newId(), newId()], [newId()]] as const
        // The first organization's last target delivers in order: its rows are queued on their own.
        yield* queue.setStrict("webhook", orgs[0], targets[0][2], true)

        // Approvals of steps with action classes (what an action class filter reads).
        const approvals: Array<{ id: string; cls: string; org: string }> = []
        for (const org of orgs) {
          const session = newId()
          yield* sql`INSERT INTO agent_sessions (id, org_id) VALUES (${session}, ${org})`
          for (const [i, cls] of CLASSES.entries()) {
            const id = newId()
            yield* sql`
            INSERT INTO agent_steps (session_id, step_id, org_id, tool, action_class, arguments, decision, approval_id, resolution)
            VALUES (${session}, ${"s" + i}, ${org}, 'tool', ${cls}, '{}'::jsonb, 'pending', ${id}, 'pending')`
            yield* sql`
            INSERT INTO approvals (id, org_id, session_id, step_id, status, deadline_at, expires_at, timeout_action)
            VALUES (${id}, ${org}, ${session}, ${"s" + i}, 'pending', now(), now(), 'reject')`
            approvals.push({ id, cls, org })
          }
        }

        const rand = fc.sample(fc.integer({ min: 0, max: 1_000_000 }), { numRuns: 2_000, seed: 9_301 })
        let r = 0
        const pick = <A>(values: ReadonlyArray<A>) => values[rand[r++ % rand.length]! % values.length]!
        const events = Array.from({ length: 12 }, () => newId())
        const attrs = new Map<
          string,
          { type: string; approval: string | null; cls: string | null; eventId: string; label: string }
        >()
        for (let batch = 0; batch < 6; batch++) {
          const inputs = Array.from({ length: 14 }, () => {
            const o = pick([0, 0, 0, 1])
            const org = orgs[o]!
            const targetId = pick(targets[o]!)
            const type = pick(TYPES)
            const approval = type.startsWith("approval.") ? pick(approvals.filter((a) => a.org === org)) : undefined
            const test = pick([false, false, false, true])
            const label = test ? `test ${type}` : `${type} ${approval?.id ?? targetId}`
            return {
              orgId: org,
              kind: "webhook" as const,
              targetId,
              capacity: 1_000,
              label,
              eventId: pick(events),
              approval,
              type,
              test
            }
          })
          const stored = yield* queue.enqueueMany(inputs)
          stored.forEach((delivery, i) => {
            const input = inputs[i]!
            attrs.set(delivery.id, {
              type: input.type,
              approval: input.test ? null : input.approval?.id ?? null,
              cls: input.test ? null : input.approval?.cls ?? null,
              eventId: input.eventId,
              label: input.label
            })
          })
          // Some are sent: delivered (the log's outcome rows, or a row's), retried, failed with or without a status.
          const claimed = yield* queue.claim("webhook", { limit: 10, leaseFor: "1 minute", perTarget: 4 })
          const mine = claimed.filter((d) => attrs.has(d.id))
          const settled = mine.slice(0, Math.max(0, mine.length - 2))
          yield* queue.settleMany(settled.map((claimed) => {
            const kind = pick(["ok", "ok", "retry", "fail404", "fail500", "network"] as const)
            return kind === "ok"
              ? { claimed, outcome: Outcome.delivered(), attempt: { statusCode: pick([200, 204]), durationMs: 3 } }
              : kind === "retry"
              ? {
                claimed,
                outcome: Outcome.retry(Duration.hours(1), "HTTP 503"),
                attempt: { statusCode: 503, durationMs: 3 }
              }
              : kind === "network"
              ? { claimed, outcome: Outcome.failed("connection refused"), attempt: { error: "refused", durationMs: 3 } }
              : {
                claimed,
                outcome: Outcome.failed("HTTP"),
                attempt: { statusCode: kind === "fail404" ? 404 : 500, durationMs: 3 }
              }
          }))
          // The last two of each claim stay sending (under the log's lease, or their own).
        }
        // Times over three days, on whole seconds and with ties (the order breaks them by seq).
        for (const id of attrs.keys()) {
          const at = BASE + pick([0, 1, 2, 3, 5, 8, 13, 21, 34, 55]) * 3_600_000 + pick([0, 0, 1_000, 59_000])
          yield* sql`UPDATE deliveries SET created_at = ${new Date(at)} WHERE id = ${id}`
          yield* sql`UPDATE deliveries SET finished_at = ${new Date(
            at + 600_000
          )} WHERE id = ${id} AND finished_at IS NOT NULL`
        }
        // A logged batch's outcome row finishes its rows together: ten minutes after the last of them was created.
        yield* sql`
          UPDATE delivery_outcomes o SET at = (
            SELECT max(d.created_at) + interval '10 minutes' FROM deliveries d
            WHERE d.target_id = o.target_id AND d.seq = ANY(o.seqs)
          ) WHERE o.org_id IN ${sql.in(orgs)}`

        const rows = yield* sql<{
          id: string
          seq: string
          org_id: string
          target_id: string
          status: DeliveryStatus
          status_code: number | null
          created_at: Date
          finished_at: Date | null
        }>`SELECT id, seq::text AS seq, org_id, target_id, status, status_code, created_at, finished_at FROM delivery_records
         WHERE org_id IN ${sql.in(orgs)}`
        const records: Array<Stored> = rows.map((row) => {
          const a = attrs.get(row.id)!
          return {
            id: row.id,
            seq: row.seq,
            org: row.org_id,
            target: row.target_id,
            label: a.label,
            eventId: a.eventId,
            type: a.type,
            approval: a.approval,
            actionClass: a.cls,
            createdAt: new Date(row.created_at).getTime(),
            status: row.status,
            statusCode: row.status_code,
            finishedAt: row.finished_at === null ? null : new Date(row.finished_at).getTime()
          }
        })
        // Data is consistent: nothing finishes before it was created.
        assert.isTrue(records.every((x) => x.finishedAt === null || x.finishedAt >= x.createdAt))
        // Every status and the status codes the filters ask for occur.
        for (const status of ["queued", "sending", "retrying", "delivered", "failed"] as const) {
          assert.isTrue(records.some((x) => x.status === status), status)
        }
        assert.isTrue(records.some((x) => x.statusCode === 404) && records.some((x) => x.statusCode === 503))

        const hour = (n: number) => iso(BASE + n * 3_600_000)
        const combos = fc.sample(
          fc.record({
            scope: fc.constantFrom("org", "target0", "target2", "other"),
            statuses: rarely(fc.subarray([...STATUSES], { minLength: 1, maxLength: 2 })),
            statusCode: rarely(
              fc.constantFrom(
                { _tag: "Class" as const, digit: 2 },
                { _tag: "Class" as const, digit: 4 },
                { _tag: "Class" as const, digit: 5 },
                { _tag: "Code" as const, code: 503 },
                { _tag: "Code" as const, code: 204 }
              )
            ),
            eventType: rarely(fc.constantFrom(...TYPES)),
            eventId: rarely(fc.constantFrom(...events.slice(0, 4))),
            approval: rarely(fc.nat(approvals.length - 1)),
            actionClass: rarely(fc.constantFrom("payments.*", "payments", "deploy.prod", "deploy.*")),
            label: rarely(fc.constantFrom("test*", "test approval.requested", "approval.approved*")),
            createdFrom: rarely(fc.integer({ min: 0, max: 40 }).map(hour)),
            createdUntil: rarely(fc.integer({ min: 2, max: 60 }).map(hour)),
            finishedFrom: rarely(fc.integer({ min: 0, max: 40 }).map(hour)),
            finishedUntil: rarely(fc.integer({ min: 2, max: 60 }).map(hour)),
            limit: fc.integer({ min: 1, max: 9 }),
            // A small scan budget ends pages early (short, even empty, with a cursor): the pages together stay exact.
            scan: fc.constantFrom(3, 8, 10_000)
          }),
          { numRuns: 120, seed: 9_302 }
        )
        let nonEmpty = 0
        for (const combo of combos) {
          const { approval, limit, scan, scope, ...rest } = combo
          const org = scope === "other" ? orgs[1] : orgs[0]
          const filters: Filters = {
            ...rest,
            targetId: scope === "target0" ? targets[0][0] : scope === "target2" ? targets[0][2] : undefined,
            approvalId: approval === undefined ? undefined : approvals[approval]!.id
          }
          const expected = records.filter((x) => x.org === org && matches(x, filters)).sort(newest).map((x) => x.id)
          const filterKey = JSON.stringify(filters)
          const got: Array<string> = []
          let cursor: string | undefined
          for (let pages = 0; pages < 500; pages++) {
            const page = yield* queue.searchPage(mac, { orgId: org, list: "deliveries", filters: [filterKey] }, {
              orgId: org,
              kind: "webhook",
              scan,
              ...filters
            }, { limit, cursor })
            assert.isAtMost(page.items.length, limit)
            got.push(...page.items.map((found) => found.delivery.id))
            for (const found of page.items) {
              assert.strictEqual(found.delivery.orgId, org, "never another organization's record")
            }
            if (page.next_cursor === null) {
              break
            }
            cursor = page.next_cursor
          }
          assert.deepStrictEqual(got, expected, filterKey)
          if (expected.length > 0) nonEmpty++
        }
        assert.isAtLeast(nonEmpty, 40, "most combinations match something")

        // Another organization naming this organization's endpoint finds nothing, whatever else it asks.
        for (
          const filters of [{}, { statuses: ["delivered"] }, { createdFrom: hour(0) }, { label: "test*" }] as const
        ) {
          for (const targetId of targets[0]) {
            const page = yield* queue.searchPage(mac, { orgId: orgs[1], list: "deliveries", filters: ["f"] }, {
              orgId: orgs[1],
              kind: "webhook",
              scan: 10_000,
              targetId,
              ...filters
            }, { limit: 9 })
            assert.deepStrictEqual(page.items, [], targetId)
            assert.isNull(page.next_cursor)
          }
        }

        // A cursor is refused by another organization, another list's filters, or edited.
        const first = yield* queue.searchPage(mac, { orgId: orgs[0], list: "deliveries", filters: ["a"] }, {
          orgId: orgs[0],
          kind: "webhook",
          scan: 10_000
        }, { limit: 1 })
        assert.isNotNull(first.next_cursor)
        for (
          const [orgId, filters, cursor] of [
            [orgs[1], ["a"], first.next_cursor!],
            [orgs[0], ["b"], first.next_cursor!],
            [orgs[0], ["a"], `${first.next_cursor!.slice(0, -1)}${first.next_cursor!.endsWith("A") ? "B" : "A"}`]
          ] as const
        ) {
          const refused = yield* Effect.exit(
            queue.searchPage(mac, { orgId, list: "deliveries", filters }, { orgId, kind: "webhook", scan: 10_000 }, {
              limit: 1,
              cursor
            })
          )
          assert.isTrue(Exit.isFailure(refused))
        }
      }),
    120_000
  )
})
