/**
 * A governed step is one statement: what it writes, the policy it answers
 * from (cached, never trusted alone), the one notification it sends, the
 * foreign keys it no longer takes, and a session's steps read a page at a
 * time.
 */
import { PgClient } from "@effect/sql-pg"
import { assert, describe, layer } from "@effect/vitest"
import { Context, Effect, Fiber, Layer, Option, Queue } from "effect"
import type { ApprovalEvent } from "../../../src/api/Events.ts"
import { Wakeups } from "../../../src/database/Wakeups.ts"
import { approvalEventBody } from "../../../src/outbox/Outbox.ts"
import { iso } from "../../../src/platform/Time.ts"
import { SvcTest } from "../../../src/testing.ts"
import { onServerRun } from "../../support/databases.ts"
import { eventually } from "../../support/http.ts"
import { openSse } from "../../support/sse.ts"

const step = (step_id: string, action_class: string, args: unknown = { path: "/srv/app", n: 1 }) => ({
  step_id,
  tool: "shell",
  action_class,
  arguments: args as any
})

/** The payloads of `svc_wakeup` notifications heard until `marker` (sent after the work committed, so it comes last). */
const heardUntilMarker = <E>(notes: Queue.Dequeue<{ readonly payload: string }, E>, marker: string) =>
  Effect.gen(function*() {
    const heard: Array<string> = []
    for (;;) {
      const next = yield* Queue.take(notes).pipe(Effect.orDie, Effect.timeoutOption("10 seconds"))
      if (Option.isNone(next)) {
        return yield* Effect.die(new Error(`no ${marker} within 10 s; heard ${heard.join(" | ")}`))
      }
      if (next.value.payload === marker) return heard
      heard.push(next.value.payload)
    }
  })

layer(SvcTest.layer(), { excludeTestServices: true })("governed steps in one statement", (it) => {
  describe("what a step writes", () => {
    it.effect("a pending step's outbox body is byte for byte the event of its approval; its stream item is its list item", () =>
      Effect.gen(function*() {
        const svc = yield* SvcTest
        const org = yield* SvcTest.org()
        const task = yield* org.client.tasks.create({ payload: { name: "t", answer_schema: { type: "object" } } })
        const session = yield* org.client.agentSessions.create({ payload: { task_id: task.id } })
        // Quotes, a backslash, a control character, non-ASCII and an astral character: JSON escaping must match.
        const stepId = "he said \"go\" \\ \u0001 é 😀 </script>"
        const args = { q: "a\"b", list: [1, 2.5, null, true], nested: { "ü": "\n" } }
        yield* org.client.approvalPolicies.put({
          params: { action_class: "ops.escalating" },
          payload: {
            mode: "require_approval",
            review_seconds: 600,
            expiring_notice_seconds: 120,
            escalation_seconds: 300,
            timeout_action: "allow"
          }
        })
        const answer = yield* org.client.agentSessions.governStep({
          params: { session_id: session.id },
          payload: step(stepId, "ops.escalating", args)
        })
        assert.strictEqual(answer.decision, "pending")
        const approval = yield* org.client.approvals.get({ params: { approval_id: answer.approval_id! } })
        assert.strictEqual(approval.task_id, task.id)
        assert.strictEqual(approval.step_id, stepId)
        const [row] = yield* svc.sql<
          { id: string; type: string; org_id: string; occurred_at: Date; body: string; label: string; created_at: Date }
        >`
          SELECT e.id, e.type, e.org_id, e.occurred_at, e.body, e.label, a.created_at
          FROM events e JOIN approvals a ON a.id = ${answer.approval_id!} WHERE e.org_id = ${org.orgId}
        `
        const event: ApprovalEvent = {
          id: row!.id,
          type: "approval.requested",
          org_id: org.orgId,
          occurred_at: iso(row!.occurred_at),
          approval
        }
        assert.strictEqual(row!.body, approvalEventBody(event))
        assert.strictEqual(row!.label, `approval.requested ${answer.approval_id}`)
        // Deadlines from the database's instant of the request.
        const requested = row!.created_at.getTime()
        assert.strictEqual(row!.occurred_at.getTime(), requested)
        assert.strictEqual(Date.parse(approval.deadline_at), requested + 600_000)
        assert.strictEqual(Date.parse(approval.expires_at), requested + 900_000)

        const listed = yield* org.client.approvals.list({ query: {} })
        const [streamed] = yield* svc.sql<
          { data: string }
        >`SELECT data FROM approval_stream_events WHERE org_id = ${org.orgId}`
        assert.deepStrictEqual(JSON.parse(streamed!.data), JSON.parse(JSON.stringify(listed.approvals[0])))
        assert.strictEqual(JSON.parse(streamed!.data).escalation, "pending")

        const [governed] = yield* svc.sql<{ seq: string; data: string }>`
          SELECT seq::text AS seq, data FROM session_events WHERE session_id = ${session.id}
        `
        assert.strictEqual(governed!.seq, "1")
        assert.deepStrictEqual(JSON.parse(governed!.data), {
          step_id: stepId,
          tool: "shell",
          action_class: "ops.escalating",
          arguments: args,
          decision: "pending",
          approval_id: answer.approval_id
        })
      }))

    it.effect("a step of an unknown or another organization's session is 404 and writes nothing", () =>
      Effect.gen(function*() {
        const svc = yield* SvcTest
        const org = yield* SvcTest.org()
        const stranger = yield* SvcTest.org()
        const session = yield* org.client.agentSessions.create({ payload: {} })
        const error = yield* stranger.client.agentSessions.governStep({
          params: { session_id: session.id },
          payload: step("x", "any")
        }).pipe(Effect.flip)
        assert.strictEqual(error._tag, "NotFound")
        const [counts] = yield* svc.sql<{ steps: number; approvals: number }>`
          SELECT (SELECT count(*)::int FROM agent_steps WHERE session_id = ${session.id}) AS steps,
                 (SELECT count(*)::int FROM approvals WHERE session_id = ${session.id}) AS approvals
        `
        assert.deepStrictEqual(counts, { steps: 0, approvals: 0 })
      }))
  })

  describe("streams past nine events", () => {
    it.effect("a session's stream replays its events in number order, 9 before 10", () =>
      Effect.gen(function*() {
        const svc = yield* SvcTest
        const org = yield* SvcTest.org()
        const session = yield* org.client.agentSessions.create({ payload: {} })
        yield* org.client.approvalPolicies.put({
          params: { action_class: "read" },
          payload: { mode: "allow", review_seconds: 60, expiring_notice_seconds: 0, timeout_action: "reject" }
        })
        for (let i = 1; i <= 12; i++) {
          yield* org.client.agentSessions.governStep({
            params: { session_id: session.id },
            payload: step(`s${i}`, "read")
          })
        }
        const sse = yield* Effect.promise(() =>
          openSse(`${svc.baseUrl}/v1/agent-sessions/${session.id}/events/stream?after=7`, { key: org.key })
        )
        try {
          const events = yield* Effect.promise(() => sse.events(5))
          assert.deepStrictEqual(events.map((e) => e.id), ["8", "9", "10", "11", "12"])
        } finally {
          sse.close()
        }
      }))
  })

  describe("the policy a step answers from", () => {
    it.effect("a policy changed by PUT applies to the next step", () =>
      Effect.gen(function*() {
        const org = yield* SvcTest.org()
        const session = yield* org.client.agentSessions.create({ payload: {} })
        const params = { session_id: session.id }
        assert.strictEqual(
          (yield* org.client.agentSessions.governStep({ params, payload: step("1", "deploy") })).decision,
          "pending"
        )
        for (const [i, mode] of (["allow", "reject", "require_approval", "allow"] as const).entries()) {
          yield* org.client.approvalPolicies.put({
            params: { action_class: "deploy" },
            payload: { mode, review_seconds: 60, expiring_notice_seconds: 0, timeout_action: "reject" }
          })
          const answer = yield* org.client.agentSessions.governStep({ params, payload: step(`after-${i}`, "deploy") })
          assert.strictEqual(answer.decision, mode === "require_approval" ? "pending" : mode)
        }
      }))

    it.effect("a policy row changed behind the process's back (no announcement) still applies to the next step", () =>
      Effect.gen(function*() {
        const svc = yield* SvcTest
        const org = yield* SvcTest.org()
        const session = yield* org.client.agentSessions.create({ payload: {} })
        const params = { session_id: session.id }
        yield* org.client.approvalPolicies.put({
          params: { action_class: "files.read" },
          payload: { mode: "allow", review_seconds: 60, expiring_notice_seconds: 0, timeout_action: "reject" }
        })
        assert.strictEqual(
          (yield* org.client.agentSessions.governStep({ params, payload: step("cached", "files.read") })).decision,
          "allow"
        )
        // As another process's change whose notification has not arrived yet.
        yield* svc
          .sql`UPDATE approval_policies SET mode = 'reject' WHERE org_id = ${org.orgId} AND action_class = 'files.read'`
        assert.strictEqual(
          (yield* org.client.agentSessions.governStep({ params, payload: step("changed", "files.read") })).decision,
          "reject"
        )
        yield* svc.sql`DELETE FROM approval_policies WHERE org_id = ${org.orgId} AND action_class = 'files.read'`
        const answer = yield* org.client.agentSessions.governStep({ params, payload: step("removed", "files.read") })
        assert.strictEqual(answer.decision, "pending", "without a policy, the default rule")
        // And a policy created behind its back for a class it knew without one.
        yield* svc.sql`
          INSERT INTO approval_policies (org_id, action_class, mode, review_seconds, expiring_notice_seconds, timeout_action)
          VALUES (${org.orgId}, 'files.read', 'allow', 60, 0, 'reject')
        `
        assert.strictEqual(
          (yield* org.client.agentSessions.governStep({ params, payload: step("created", "files.read") })).decision,
          "allow"
        )
      }))
  })

  describe("foreign keys and deletion", () => {
    it.effect("rows a pending step writes hold no key to the organization; deleting the organization removes them all", () =>
      Effect.gen(function*() {
        const svc = yield* SvcTest
        const keyed = yield* svc.sql<{ table: string }>`
          SELECT conrelid::regclass::text AS table FROM pg_constraint
          WHERE contype = 'f' AND confrelid = 'orgs'::regclass
            AND conrelid::regclass::text IN ('approvals', 'events', 'approval_stream_events')
        `
        assert.deepStrictEqual(keyed, [])
        const org = yield* SvcTest.org()
        const kept = yield* SvcTest.org()
        for (const who of [org, kept]) {
          const session = yield* who.client.agentSessions.create({ payload: {} })
          const pending = yield* who.client.agentSessions.governStep({
            params: { session_id: session.id },
            payload: step("p", "ask")
          })
          yield* who.client.approvals.decide({
            params: { approval_id: pending.approval_id! },
            payload: { decision: "approve" }
          })
          yield* who.client.agentSessions.governStep({ params: { session_id: session.id }, payload: step("q", "ask") })
        }
        const count = (orgId: string) =>
          svc.sql<{ n: number }>`
            SELECT (SELECT count(*) FROM agent_sessions WHERE org_id = ${orgId}) + (SELECT count(*) FROM agent_steps WHERE org_id = ${orgId})
              + (SELECT count(*) FROM session_events WHERE org_id = ${orgId}) + (SELECT count(*) FROM approvals WHERE org_id = ${orgId})
              + (SELECT count(*) FROM events WHERE org_id = ${orgId}) + (SELECT count(*) FROM approval_stream_events WHERE org_id = ${orgId})
              AS n
          `.pipe(Effect.map(([row]) => Number(row!.n)))
        assert.isAbove(yield* count(org.orgId), 0)
        yield* svc.sql`DELETE FROM orgs WHERE id = ${org.orgId}`
        assert.strictEqual(yield* count(org.orgId), 0)
        assert.strictEqual(yield* count(kept.orgId), 1 + 2 + 3 + 2 + 3 + 3, "another organization keeps everything")
      }))
  })

  describe("a session's steps, a page at a time", () => {
    it.effect("limit and cursor page through the steps oldest first; without them the first 100", () =>
      Effect.gen(function*() {
        const org = yield* SvcTest.org()
        const stranger = yield* SvcTest.org()
        const session = yield* org.client.agentSessions.create({ payload: {} })
        const other = yield* org.client.agentSessions.create({ payload: {} })
        const params = { session_id: session.id }
        yield* org.client.approvalPolicies.put({
          params: { action_class: "read" },
          payload: { mode: "allow", review_seconds: 60, expiring_notice_seconds: 0, timeout_action: "reject" }
        })
        const ids = Array.from({ length: 105 }, (_, i) => `s${i}`)
        for (const id of ids) yield* org.client.agentSessions.governStep({ params, payload: step(id, "read") })
        yield* org.client.agentSessions.governStep({
          params: { session_id: other.id },
          payload: step("elsewhere", "read")
        })

        const all = yield* org.client.agentSessions.get({ params, query: {} })
        assert.deepStrictEqual(all.steps.map((s) => s.step_id), ids.slice(0, 100))
        const rest = yield* org.client.agentSessions.get({ params, query: { cursor: all.next_cursor! } })
        assert.deepStrictEqual(rest.steps.map((s) => s.step_id), ids.slice(100))
        assert.isNull(rest.next_cursor)
        assert.strictEqual(rest.id, session.id)

        const seen: Array<string> = []
        let cursor: string | undefined
        for (;;) {
          const page = yield* org.client.agentSessions.get({
            params,
            query: { limit: 40, ...(cursor === undefined ? {} : { cursor }) }
          })
          assert.isAtMost(page.steps.length, 40)
          seen.push(...page.steps.map((s) => s.step_id))
          if (page.next_cursor === null) break
          cursor = page.next_cursor
        }
        assert.deepStrictEqual(seen, ids)

        // A cursor is bound to its session and organization; limit is 1 to 100.
        const foreign = yield* org.client.agentSessions.get({
          params: { session_id: other.id },
          query: { cursor: all.next_cursor! }
        }).pipe(Effect.flip)
        assert.strictEqual(foreign._tag, "InvalidRequest")
        if (foreign._tag === "InvalidRequest") assert.strictEqual(foreign.field, "cursor")
        const theirs = yield* stranger.client.agentSessions.get({ params, query: { cursor: all.next_cursor! } }).pipe(
          Effect.flip
        )
        assert.include(["InvalidRequest", "NotFound"], theirs._tag)
        const svc = yield* SvcTest
        for (const limit of ["0", "101", "x"]) {
          const response = yield* Effect.promise(() =>
            fetch(`${svc.baseUrl}/v1/agent-sessions/${session.id}?limit=${limit}`, {
              headers: { authorization: `Bearer ${org.key}` }
            })
          )
          assert.strictEqual(response.status, 400, limit)
          const problem = yield* Effect.promise(() => response.json())
          assert.strictEqual(problem.field, "limit", limit)
        }
      }))

    it.effect("without statistics a step is found by its key, not by reading the session's steps; a page by the ordered index", () =>
      Effect.gen(function*() {
        const svc = yield* SvcTest
        const org = yield* SvcTest.org()
        const session = yield* org.client.agentSessions.create({ payload: {} })
        yield* org.client.approvalPolicies.put({
          params: { action_class: "read" },
          payload: { mode: "allow", review_seconds: 60, expiring_notice_seconds: 0, timeout_action: "reject" }
        })
        for (let i = 0; i < 30; i++) {
          yield* org.client.agentSessions.governStep({
            params: { session_id: session.id },
            payload: step(`p${i}`, "read")
          })
        }
        // A fresh database's state (the embedded one has none until its first statistics round), and the
        // plan a prepared statement keeps (generic). Rolled back with the transaction (it ends by failing).
        const plans = yield* svc.sql.withTransaction(Effect.gen(function*() {
          yield* svc.sql.unsafe("DELETE FROM pg_statistic WHERE starelid = 'agent_steps'::regclass")
          yield* svc.sql.unsafe("SET LOCAL plan_cache_mode = force_generic_plan")
          const plan = (name: string, types: string, body: string, args: string) =>
            Effect.gen(function*() {
              yield* svc.sql.unsafe(`PREPARE ${name} (${types}) AS ${body}`)
              const rows = yield* svc.sql.unsafe<{ "QUERY PLAN": string }>(`EXPLAIN EXECUTE ${name}(${args})`)
              yield* svc.sql.unsafe(`DEALLOCATE ${name}`)
              return rows.map((row) => row["QUERY PLAN"]).join("\n")
            })
          const lookup = yield* plan(
            "plan_step_lookup",
            "uuid, text",
            "SELECT tool FROM agent_steps WHERE session_id = $1 AND step_id = $2",
            `'${session.id}', 'p3'`
          )
          const page = yield* plan(
            "plan_step_page",
            "uuid, bigint",
            "SELECT step_id FROM agent_steps WHERE session_id = $1 AND seq > $2 ORDER BY seq LIMIT 100",
            `'${session.id}', 0`
          )
          return yield* Effect.fail({ lookup, page })
        })).pipe(Effect.flip)
        if (!("lookup" in plans)) return yield* Effect.die(plans)
        assert.match(plans.lookup, /Index Scan using agent_steps_pkey/)
        assert.match(plans.page, /using agent_steps_session_seq_idx/)
      }))
  })

  describe.runIf(onServerRun)("notifications (PostgreSQL server)", () => {
    it.effect("a step sends one notification carrying every signal of its change; allow and reject only the session's", () =>
      Effect.gen(function*() {
        const pg = yield* PgClient.PgClient
        const org = yield* SvcTest.org()
        const session = yield* org.client.agentSessions.create({ payload: {} })
        const params = { session_id: session.id }
        yield* org.client.approvalPolicies.put({
          params: { action_class: "read" },
          payload: { mode: "allow", review_seconds: 60, expiring_notice_seconds: 0, timeout_action: "reject" }
        })
        const notes = yield* pg.listen("svc_wakeup")
        // The listener is registered once a notification of our own comes through.
        yield* pg.notify("svc_wakeup", "ready")
        yield* heardUntilMarker(notes, "ready")

        yield* org.client.agentSessions.governStep({ params, payload: step("pending", "ask") })
        yield* pg.notify("svc_wakeup", "after-pending")
        const pending = yield* heardUntilMarker(notes, "after-pending")
        assert.strictEqual(pending.length, 1, pending.join(" | "))
        // The default rule's first deadline is minutes away: the schedulers find it on their next poll.
        const signals = pending[0]!.split(" ").slice(1).sort()
        assert.deepStrictEqual(signals, ["events", `hub:${session.id}`, `hub:approvals:${org.orgId}`].sort())

        // A deadline within the schedulers' poll: they are woken.
        yield* org.client.approvalPolicies.put({
          params: { action_class: "soon" },
          payload: { mode: "require_approval", review_seconds: 1, expiring_notice_seconds: 0, timeout_action: "reject" }
        })
        yield* org.client.agentSessions.governStep({ params, payload: step("soon", "soon") })
        yield* pg.notify("svc_wakeup", "after-soon")
        const soon = (yield* heardUntilMarker(notes, "after-soon")).filter((p) => !p.includes("policies:"))
        assert.strictEqual(soon.length, 1, soon.join(" | "))
        assert.deepStrictEqual(
          soon[0]!.split(" ").slice(1).sort(),
          ["approvals", "events", `hub:${session.id}`, `hub:approvals:${org.orgId}`].sort()
        )

        yield* org.client.agentSessions.governStep({ params, payload: step("allowed", "read") })
        yield* pg.notify("svc_wakeup", "after-allow")
        const allowed = yield* heardUntilMarker(notes, "after-allow")
        assert.deepStrictEqual(allowed.map((p) => p.split(" ").slice(1)), [[`hub:${session.id}`]])

        // A re-sent step changes nothing and says nothing.
        yield* org.client.agentSessions.governStep({ params, payload: step("allowed", "read") })
        yield* pg.notify("svc_wakeup", "after-replay")
        assert.deepStrictEqual(yield* heardUntilMarker(notes, "after-replay"), [])
      }).pipe(Effect.scoped))

    it.effect("a process does not hear its own notifications: one signal reaches a subscriber once", () =>
      Effect.gen(function*() {
        const pg = yield* PgClient.PgClient
        const wakeups = yield* Layer.build(Wakeups.layer).pipe(Effect.map((context) => Context.get(context, Wakeups)))
        const heard: Array<string> = []
        yield* wakeups.subscribe("policies:", (rest) => Effect.sync(() => void heard.push(rest)), Effect.void)
        // Listening once a notification from another session comes through.
        let ready = 0
        yield* eventually(
          Effect.suspend(() =>
            Effect.as(pg.notify("svc_wakeup", `policies:ready-${++ready}`), heard.length > 0 ? true : undefined)
          ),
          { timeoutMs: 10_000, intervalMs: 50, what: "the listener" }
        )
        heard.length = 0
        yield* wakeups.signal("policies:mine")
        // Sent after ours, from another session (a bare topic, as SQL or an older process sends it): it comes after any echo of ours.
        yield* pg.notify("svc_wakeup", "policies:theirs")
        yield* eventually(Effect.sync(() => heard.includes("theirs") ? true : undefined), {
          timeoutMs: 10_000,
          intervalMs: 20,
          what: "their signal"
        })
        assert.deepStrictEqual(heard.filter((h) => !h.startsWith("ready-")), ["mine", "theirs"])
      }).pipe(Effect.scoped))

    it.effect("the organization's stream holds back an event until every older transaction has ended, so ids never go back", () =>
      Effect.gen(function*() {
        const svc = yield* SvcTest
        const pg = yield* PgClient.PgClient
        const org = yield* SvcTest.org()
        const session = yield* org.client.agentSessions.create({ payload: {} })
        const sse = yield* Effect.promise(() =>
          openSse(`${svc.baseUrl}/v1/agent-approvals/events/stream`, { key: org.key })
        )
        try {
          // An older transaction appends its event and stays open while a step commits a newer one.
          const older = yield* Effect.forkChild(
            pg.withTransaction(Effect.gen(function*() {
              yield* pg`
                INSERT INTO approval_stream_events (org_id, seq, name, data)
                VALUES (${org.orgId}, pg_current_xact_id()::text::bigint * 1024, 'approval.expiring', '{"older":true}')
              `
              const newer = yield* Effect.promise(() =>
                fetch(`${svc.baseUrl}/v1/agent-sessions/${session.id}/steps`, {
                  method: "POST",
                  headers: { authorization: `Bearer ${org.key}`, "content-type": "application/json" },
                  body: JSON.stringify(step("newer", "ask"))
                })
              )
              assert.strictEqual(newer.status, 200)
              // The newer event is committed but must not be streamed before the older one.
              const early = yield* Effect.promise(() => sse.events(1, 1_000).then((e) => e, () => []))
              assert.deepStrictEqual(early.map((e) => e.event), [])
            }))
          )
          yield* Fiber.join(older).pipe(Effect.orDie)
          // What an approval transaction does after commit: wake the organization's streams.
          yield* pg.notify("svc_wakeup", `hub:approvals:${org.orgId}`)
          const events = yield* Effect.promise(() => sse.events(2, 10_000))
          assert.deepStrictEqual(events.map((e) => e.event), ["approval.expiring", "approval.requested"])
          assert.isTrue(BigInt(events[0]!.id!) < BigInt(events[1]!.id!))
        } finally {
          sse.close()
        }
      }))

    it.effect("an event held back by an unrelated long transaction is streamed soon after it ends, without a wake-up", () =>
      Effect.gen(function*() {
        const svc = yield* SvcTest
        const pg = yield* PgClient.PgClient
        const org = yield* SvcTest.org()
        const session = yield* org.client.agentSessions.create({ payload: {} })
        const sse = yield* Effect.promise(() =>
          openSse(`${svc.baseUrl}/v1/agent-approvals/events/stream`, { key: org.key })
        )
        try {
          // A transaction with an id (any write, here none of svc's tables) outlives the step's wake-up.
          yield* pg.withTransaction(Effect.gen(function*() {
            yield* pg`SELECT pg_current_xact_id()::text AS id`
            const response = yield* Effect.promise(() =>
              fetch(`${svc.baseUrl}/v1/agent-sessions/${session.id}/steps`, {
                method: "POST",
                headers: { authorization: `Bearer ${org.key}`, "content-type": "application/json" },
                body: JSON.stringify(step("held", "ask"))
              })
            )
            assert.strictEqual(response.status, 200)
            yield* Effect.sleep("1500 millis")
          }))
          // No signal comes when it ends: the stream reads again on its own, well before its 10 s poll.
          const events = yield* Effect.promise(() => sse.events(1, 4_000))
          assert.deepStrictEqual(events.map((e) => e.event), ["approval.requested"])
        } finally {
          sse.close()
        }
      }))
  })
})
