/**
 * Retention: finished deliveries, attempts, dispatched
 * outbox events, session and approval stream events, and ended console
 * links and sessions are deleted once past their retention,
 * by a background fiber; what is still needed stays.
 */
import { assert, describe, layer } from "@effect/vitest"
import { Duration, Effect } from "effect"
import { SqlClient } from "effect/sql"
import { SvcTest } from "../../../src/testing.ts"
import { eventually } from "../../support/http.ts"
import { HttpsReceiver } from "../../support/HttpsReceiver.ts"
import { eventBody, insertEvents, waitForDeliveries, webhookService } from "./support.ts"

const minute = Duration.minutes(1)

layer(
  webhookService({
    webhookDeliveryRetention: minute,
    deliveryAttemptRetention: minute,
    outboxRetention: minute,
    sessionEventRetention: minute,
    retentionInterval: Duration.millis(200),
    retentionBatch: 2
  }),
  { excludeTestServices: true }
)("retention", (it) => {
  describe("rows past retention disappear; rows still needed stay", () => {
    it.effect("deliveries, attempts, outbox events and session events", () =>
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        const receiver = yield* HttpsReceiver.make()
        const org = yield* SvcTest.org()
        const { endpoint } = yield* org.client.notifications.create({ payload: { url: receiver.url("/r") } })
        // Three delivered first, two after them.
        const events = Array.from({ length: 5 }, () => eventBody(org.orgId, "approval.requested"))
        yield* insertEvents(events.slice(0, 3))
        yield* waitForDeliveries(
          endpoint.id,
          (rows) => rows.length === 3 && rows.every((r) => r.status === "delivered")
        )
        yield* insertEvents(events.slice(3))
        const delivered = yield* waitForDeliveries(
          endpoint.id,
          (rows) => rows.length === 5 && rows.every((r) => r.status === "delivered")
        )
        const [old1, , old3, recent, waiting] = delivered
        // The first three were delivered two minutes ago (past retention): a
        // delivery of the log is as old as the outcome row holding it.
        yield* sql`
          UPDATE delivery_outcomes SET at = now() - interval '2 minutes'
          WHERE target_id = ${endpoint.id}
            AND to_seq <= (SELECT max(seq) FROM deliveries WHERE id IN ${sql.in([old1!.id, old3!.id])})
        `
        // One still waiting for a retry, created long ago: never deleted.
        yield* sql`
          UPDATE deliveries SET status = 'retrying', finished_at = NULL, created_at = now() - interval '1 day',
            next_attempt_at = now() + interval '1 hour'
          WHERE id = ${waiting!.id}
        `
        // Every event was dispatched long ago; only those without deliveries may go.
        yield* sql`UPDATE events SET dispatched_at = now() - interval '2 minutes' WHERE org_id = ${org.orgId}`
        // An old attempt of the recent delivery (an earlier failure) goes; the delivery stays.
        yield* sql`
          INSERT INTO delivery_attempts (delivery_id, attempt, at, status_code, error, duration_ms)
          VALUES (${recent!.id}, 0, now() - interval '2 minutes', 500, 'HTTP 500', 1)
        `
        // An event dispatched with no delivery at all (an organization without endpoints).
        const lonely = yield* SvcTest.org()
        yield* insertEvents([eventBody(lonely.orgId, "approval.requested")])
        yield* eventually(
          Effect.map(
            sql<{ n: number }>`SELECT count(*)::int AS n FROM undispatched_events WHERE org_id = ${lonely.orgId}`,
            (rows) => rows[0]!.n === 0 ? true : undefined
          ),
          { what: "the lonely events dispatched" }
        )
        yield* sql`UPDATE events SET dispatched_at = now() - interval '2 minutes' WHERE org_id = ${lonely.orgId}`
        // Session events: one backdated past the resume window, one recent.
        // (Another organization: its steps' approval events must not reach the endpoint above.)
        const agents = yield* SvcTest.org()
        const session = yield* agents.client.agentSessions.create({ payload: {} })
        for (const step_id of ["s1", "s2"]) {
          yield* agents.client.agentSessions.governStep({
            params: { session_id: session.id },
            payload: { step_id, tool: "t", action_class: "a", arguments: {} }
          })
        }
        yield* sql`UPDATE session_events SET created_at = now() - interval '2 minutes' WHERE session_id = ${session.id} AND seq = 1`

        const ids = (rows: ReadonlyArray<{ id: string }>) => rows.map((r) => r.id).sort()
        // The fiber works in batches of 2 until nothing past retention is left.
        yield* eventually(
          Effect.gen(function*() {
            const left = yield* sql<{ id: string }>`SELECT id FROM deliveries WHERE target_id = ${endpoint.id}`
            const events = yield* sql<{ id: string }>`SELECT id FROM events WHERE org_id IN ${
              sql.in([org.orgId, lonely.orgId])
            }`
            const sessionEvents = yield* sql<
              { seq: string }
            >`SELECT seq FROM session_events WHERE session_id = ${session.id}`
            const attempts = yield* sql<
              { n: number }
            >`SELECT count(*)::int AS n FROM delivery_attempts WHERE delivery_id = ${recent!.id}`
            // The outcome rows of the deliveries gone go after them.
            const outcomes = yield* sql<{ n: number }>`
            SELECT count(*)::int AS n FROM delivery_outcomes WHERE target_id = ${endpoint.id} AND at < now() - interval '1 minute'
          `
            return left.length === 2 && events.length === 2 && sessionEvents.length === 1 && attempts[0]!.n === 0 &&
                outcomes[0]!.n === 0
              ? { left, events, sessionEvents }
              : undefined
          }),
          { what: "pruning", timeoutMs: 20_000 }
        ).pipe(Effect.tap(({ left, events: kept, sessionEvents }) =>
          Effect.sync(() => {
            assert.deepStrictEqual(ids(left), [recent!.id, waiting!.id].sort())
            // The events of the two deliveries left stay (a delivery reads its body from its event).
            assert.deepStrictEqual(ids(kept), [recent!.event_id, waiting!.event_id].sort())
            assert.deepStrictEqual(sessionEvents.map((e) => Number(e.seq)), [2])
          })
        ))
        // Their records and attempts are gone from the API too; the waiting one keeps its status.
        const listed = yield* org.client.notifications.deliveries({ params: { id: endpoint.id }, query: {} })
        assert.sameMembers(listed.deliveries.map((d) => d.id), [recent!.id, waiting!.id])
        assert.strictEqual(listed.deliveries.find((d) => d.id === waiting!.id)!.status, "retrying")
        assert.strictEqual(listed.deliveries.find((d) => d.id === recent!.id)!.status, "delivered")
      }).pipe(Effect.scoped))

    it.effect("reviewer address confirmation links once used or expired, after the same time as console links", () =>
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        const org = yield* SvcTest.org()
        const link = (name: string, expires: string, used: string | null) =>
          sql`
            INSERT INTO reviewer_confirmations (token_hash, org_id, reviewer_address_id, reviewer_email, expires_at, used_at)
            VALUES (${name}, ${org.orgId}, gen_random_uuid(), 'r@example.com', now() + ${expires}::interval,
                    ${used === null ? null : sql`now() + ${used}::interval`})
          `
        yield* link("expired long ago", "-2 minutes", null)
        yield* link("used long ago", "10 minutes", "-2 minutes")
        yield* link("unused", "10 minutes", null)
        yield* link("used just now", "10 minutes", "0 seconds")
        const left = yield* eventually(
          Effect.map(
            sql<{ token_hash: string }>`SELECT token_hash FROM reviewer_confirmations WHERE org_id = ${org.orgId}`,
            (rows) => rows.length === 2 ? rows : undefined
          ),
          { what: "pruning", timeoutMs: 20_000 }
        )
        assert.deepStrictEqual(left.map((r) => r.token_hash).sort(), ["unused", "used just now"])
      }))

    it.effect("approval stream events, and console links and sessions once ended", () =>
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        const org = yield* SvcTest.org()
        const link = (name: string, expires: string, used: string | null) =>
          sql`
            INSERT INTO console_links (id, org_id, token_hash, preset, person, expires_at, used_at)
            VALUES (gen_random_uuid(), ${org.orgId}, ${name}, 'admin', ${name}, now() + ${expires}::interval,
                    ${used === null ? null : sql`now() + ${used}::interval`})
          `
        yield* link("expired long ago", "-2 minutes", null)
        yield* link("used long ago", "10 minutes", "-2 minutes")
        yield* link("unused", "10 minutes", null)
        yield* link("used just now", "10 minutes", "0 seconds")
        const session = (name: string, lastSeen: string, absolute: string, revoked: string | null) =>
          sql`
            INSERT INTO console_sessions (id, org_id, token_hash, preset, person, last_seen_at, absolute_expires_at, revoked_at)
            VALUES (gen_random_uuid(), ${org.orgId}, ${name}, 'admin', ${name}, now() + ${lastSeen}::interval,
                    now() + ${absolute}::interval, ${revoked === null ? null : sql`now() + ${revoked}::interval`})
          `
        yield* session("revoked long ago", "-3 minutes", "1 day", "-2 minutes")
        yield* session("idle long ago", "-9 hours", "1 day", null)
        yield* session("too old long ago", "-3 minutes", "-2 minutes", null)
        yield* session("live", "0 seconds", "1 day", null)
        yield* session("revoked just now", "0 seconds", "1 day", "0 seconds")
        yield* sql`INSERT INTO approval_stream_events (org_id, seq, name, data, created_at) VALUES
          (${org.orgId}, 1, 'approval.requested', '{}', now() - interval '2 minutes'),
          (${org.orgId}, 2, 'approval.requested', '{}', now())`
        const names = (rows: ReadonlyArray<{ person: string }>) => rows.map((r) => r.person).sort()
        yield* eventually(
          Effect.gen(function*() {
            const links = yield* sql<{ person: string }>`SELECT person FROM console_links WHERE org_id = ${org.orgId}`
            const sessions = yield* sql<
              { person: string }
            >`SELECT person FROM console_sessions WHERE org_id = ${org.orgId}`
            const events = yield* sql<
              { seq: string }
            >`SELECT seq FROM approval_stream_events WHERE org_id = ${org.orgId}`
            return links.length === 2 && sessions.length === 2 && events.length === 1
              ? { links, sessions, events }
              : undefined
          }),
          { what: "pruning", timeoutMs: 20_000 }
        ).pipe(Effect.tap(({ events, links, sessions }) =>
          Effect.sync(() => {
            assert.deepStrictEqual(names(links), ["unused", "used just now"])
            assert.deepStrictEqual(names(sessions), ["live", "revoked just now"])
            assert.deepStrictEqual(events.map((e) => Number(e.seq)), [2])
          })
        ))
      }))
  })
})
