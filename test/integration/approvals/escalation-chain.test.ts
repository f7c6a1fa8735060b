/**
 * An escalation chain of several reviewer groups: each deadline fires
 * `approval.escalated`, hands the approval to the chain's next group
 * (`assigned_group`, `escalation_level` + 1) and opens another
 * `escalation_seconds` window; only the group it is with now decides; after
 * the last group's window it expires. Policies, rules and approvals stored
 * with one `escalation_group` before chains existed become chains of one
 * (migration 0860) and escalate as they did.
 */
import * as NodeServices from "@effect/platform-node/NodeServices"
import { PgMigrator } from "@effect/sql-pg"
import { assert, describe, it, layer } from "@effect/vitest"
import { Effect, Layer } from "effect"
import { Migrator, SqlClient } from "effect/sql"
import type { PolicyInput } from "../../../src/api/Policies.ts"
import { Migrations } from "../../../src/database/Migrations.ts"
import { migrationRecord } from "../../../src/database/migrations/index.ts"
import { SvcTest } from "../../../src/testing.ts"
import { outboxOf } from "../../support/approvals.ts"
import { databases } from "../../support/databases.ts"
import { eventually, raw } from "../../support/http.ts"

const CHAIN = ["finance", "cfo", "board"] as const
const REVIEW = 1
const WINDOW = 4
const NOTICE = 2

/** `leads` first, then the chain of three; the notice falls in the last group's window. */
const chained: PolicyInput = {
  mode: "require_approval",
  review_seconds: REVIEW,
  expiring_notice_seconds: NOTICE,
  escalation_seconds: WINDOW,
  timeout_action: "reject",
  group: "leads",
  escalation_chain: CHAIN
}

const setup = Effect.gen(function*() {
  const svc = yield* SvcTest
  const org = yield* SvcTest.org()
  const people = yield* Effect.all(["leads", ...CHAIN].map(() => org.newKey(["approvals.decide", "agents.read"])))
  for (const [i, name] of ["leads", ...CHAIN].entries()) {
    yield* org.client.reviewers.putGroup({ params: { name }, payload: { members: [{ key_id: people[i]!.keyId }] } })
  }
  yield* org.client.approvalPolicies.put({ params: { action_class: "payments.refund" }, payload: chained })
  const session = yield* org.client.agentSessions.create({ payload: {} })
  const pending = (stepId: string) =>
    org.client.agentSessions.governStep({
      params: { session_id: session.id },
      payload: { step_id: stepId, tool: "stripe.refund", action_class: "payments.refund", arguments: { amount: 5000 } }
    }).pipe(Effect.map((answer) => answer.approval_id!))
  const decideRaw = (key: string, approvalId: string) =>
    raw(`${svc.baseUrl}/v1/agent-approvals/${approvalId}/decision`, {
      method: "POST",
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
      body: JSON.stringify({ decision: "approve" })
    })
  const eventsOf = (approvalId: string, count: number) =>
    eventually(Effect.map(outboxOf(svc.sql, approvalId), (rows) => rows.length >= count ? rows : undefined), {
      what: `${count} events of ${approvalId}`,
      timeoutMs: 30_000
    })
  return { svc, org, people, pending, decideRaw, eventsOf }
})

layer(SvcTest.layer(), { excludeTestServices: true })("an escalation chain of three groups", (it) => {
  it.effect(
    "each deadline hands the approval to the chain's next group, one approval.escalated per hop; only the current group decides; it expires after the last window",
    () =>
      Effect.gen(function*() {
        const { svc, people, pending, decideRaw, eventsOf } = yield* setup
        const decided = yield* pending("decided")
        const expiring = yield* pending("expiring")
        const [requested] = yield* outboxOf(svc.sql, expiring)
        const snapshot = requested!.json.approval
        assert.deepStrictEqual([snapshot.assigned_group, snapshot.escalation_level], ["leads", 0])
        // The whole review time: the first window, then one window per group of the chain.
        assert.strictEqual(
          Date.parse(snapshot.expires_at) - Date.parse(snapshot.deadline_at),
          CHAIN.length * WINDOW * 1000
        )

        for (const [i, group] of CHAIN.entries()) {
          const events = yield* eventsOf(decided, i + 2)
          assert.deepStrictEqual(events.map((e) => e.type), [
            "approval.requested",
            ...CHAIN.slice(0, i + 1).map(() => "approval.escalated")
          ])
          const now = events[i + 1]!.json.approval
          assert.deepStrictEqual([now.assigned_group, now.escalation_level], [group, i + 1], `hop ${i + 1}`)
          // Every earlier group's member is refused; nothing is recorded.
          for (const earlier of people.slice(0, i + 1)) {
            const refused = yield* decideRaw(earlier.key, decided)
            assert.strictEqual(refused.status, 403, refused.text)
            assert.deepStrictEqual([refused.json.code, refused.json.assigned_group], ["NOT_ASSIGNED", group])
          }
        }
        const last = people[CHAIN.length]!
        const approved = yield* decideRaw(last.key, decided)
        assert.strictEqual(approved.status, 200, approved.text)
        assert.deepStrictEqual([approved.json.status, approved.json.decided_by, approved.json.escalation_level], [
          "approved",
          last.keyId,
          3
        ])

        const events = yield* eventsOf(expiring, 6)
        assert.deepStrictEqual(events.map((e) => e.type), [
          "approval.requested",
          "approval.escalated",
          "approval.escalated",
          "approval.escalated",
          "approval.expiring",
          "approval.expired"
        ])
        assert.deepStrictEqual(
          events.map((e) => [e.json.approval.assigned_group, e.json.approval.escalation_level]),
          [["leads", 0], ["finance", 1], ["cfo", 2], ["board", 3], ["board", 3], ["board", 3]]
        )
        // Each escalation opens the next window; the last one ends at expires_at, when it expires.
        const deadlines = events.map((e) => Date.parse(e.json.approval.deadline_at))
        for (let hop = 1; hop <= CHAIN.length; hop++) {
          assert.strictEqual(deadlines[hop]! - deadlines[hop - 1]!, WINDOW * 1000)
        }
        assert.strictEqual(deadlines[3], Date.parse(snapshot.expires_at))
        assert.isAtLeast(events[5]!.occurred_at.getTime(), Date.parse(snapshot.expires_at))
        assert.strictEqual(events[5]!.json.approval.status, "expired")
        // The list's `escalation`: pending while another escalation is to come, escalated once none remains.
        const items = yield* svc.sql<{ name: string; data: string }>`
        SELECT name, data FROM approval_stream_events WHERE data::jsonb ->> 'approval_id' = ${expiring} ORDER BY seq
      `
        assert.deepStrictEqual(
          items.map((item) => [item.name, JSON.parse(item.data).escalation]),
          [
            ["approval.requested", "pending"],
            ["approval.escalated", "pending"],
            ["approval.escalated", "pending"],
            ["approval.escalated", "escalated"],
            ["approval.expiring", "escalated"],
            ["approval.expired", "escalated"]
          ]
        )
      }),
    60_000
  )
})

describe("an escalation_group stored before chains existed", () => {
  const before = Object.fromEntries(Object.entries(migrationRecord).filter(([key]) => key < "0860"))
  for (const [name, database] of databases) {
    it.live(
      `becomes a chain of one: the policy's, a rule's and a pending approval's, escalated or not; the old columns are gone (${name})`,
      () =>
        Effect.gen(function*() {
          yield* PgMigrator.run({ loader: Migrator.fromRecord(before), table: "svc_migrations" }).pipe(
            Effect.provide(NodeServices.layer)
          )
          const sql = yield* SqlClient.SqlClient
          const orgId = "00000000-0000-4000-8000-000000000860"
          const sessionId = "00000000-0000-4000-8000-000000000861"
          yield* sql`INSERT INTO orgs (id, name) VALUES (${orgId}, 'chains')`
          const rules = [
            { name: "open", condition: "true", result: { decision: "allow" } },
            {
              name: "large",
              condition: "arguments.amount > 1000.0",
              result: {
                decision: "require_approval",
                review_seconds: 60,
                expiring_notice_seconds: 0,
                escalation_seconds: 60,
                timeout_action: "reject",
                group: "leads",
                escalation_group: "finance"
              }
            }
          ]
          yield* sql`
          INSERT INTO approval_policies (org_id, action_class, mode, review_seconds, expiring_notice_seconds, escalation_seconds, timeout_action, rules, reviewer_group, escalation_group)
          VALUES (${orgId}, 'payments.refund', 'require_approval', 60, 0, 60, 'reject', ${
            JSON.stringify(rules)
          }::jsonb, 'leads', 'finance'),
                 (${orgId}, 'payments.payout', 'require_approval', 60, 0, NULL, 'reject', '[]'::jsonb, NULL, NULL)
        `
          yield* sql`INSERT INTO agent_sessions (id, org_id) VALUES (${sessionId}, ${orgId})`
          for (const [step, level] of [["waiting", 0], ["handed", 1]] as const) {
            yield* sql`
            INSERT INTO approvals (id, org_id, session_id, step_id, status, deadline_at, expires_at, timeout_action, escalation_seconds, escalated,
              assigned_group, escalation_group, escalation_level)
            VALUES (gen_random_uuid(), ${orgId}, ${sessionId}, ${step}, 'pending', now() + interval '1 hour', now() + interval '2 hours', 'reject', 3600,
              ${level === 1}, ${level === 1 ? "finance" : "leads"}, 'finance', ${level})
          `
          }
          yield* Migrations.run
          const policies = yield* sql<
            { action_class: string; escalation_chain: ReadonlyArray<string> | null; rules: any }
          >`
          SELECT action_class, escalation_chain, rules FROM approval_policies ORDER BY action_class
        `
          assert.deepStrictEqual(policies.map((p) => [p.action_class, p.escalation_chain]), [
            ["payments.payout", null],
            ["payments.refund", ["finance"]]
          ])
          const converted = typeof policies[1]!.rules === "string" ? JSON.parse(policies[1]!.rules) : policies[1]!.rules
          assert.deepStrictEqual(
            converted,
            [rules[0], {
              ...rules[1],
              result: { ...rules[1]!.result, escalation_group: undefined, escalation_chain: ["finance"] }
            }].map((r) => JSON.parse(JSON.stringify(r)))
          )
          const approvals = yield* sql<
            {
              step_id: string
              escalation_chain: ReadonlyArray<string>
              assigned_group: string
              escalation_level: number
              escalated: boolean
            }
          >`
          SELECT step_id, escalation_chain, assigned_group, escalation_level, escalated FROM approvals ORDER BY step_id
        `
          assert.deepStrictEqual(
            approvals.map((a) => [a.step_id, a.escalation_chain, a.assigned_group, a.escalation_level, a.escalated]),
            [
              ["handed", ["finance"], "finance", 1, true],
              ["waiting", ["finance"], "leads", 0, false]
            ]
          )
          const old = yield* sql<{ table_name: string }>`
          SELECT table_name FROM information_schema.columns WHERE column_name = 'escalation_group' AND table_schema = current_schema()
        `
          assert.deepStrictEqual(old, [])
        }).pipe(Effect.provide(Layer.fresh(database()))),
      60_000
    )
  }
})
