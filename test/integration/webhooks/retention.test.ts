/**
 * Retention (issue 14, item 11): finished deliveries, attempts, dispatched
 * outbox events and session events are deleted once past their retention,
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
        const events = Array.from({ length: 5 }, () => eventBody(org.orgId, "approval.requested"))
        yield* insertEvents(events)
        const delivered = yield* waitForDeliveries(endpoint.id, (rows) => rows.length === 5 && rows.every((r) => r.status === "delivered"))
        const [old1, old2, old3, recent, waiting] = delivered
        // Three finished two minutes ago (past retention), one just now.
        yield* sql`UPDATE deliveries SET finished_at = now() - interval '2 minutes' WHERE id IN ${sql.in([old1!.id, old2!.id, old3!.id])}`
        // One still waiting for a retry, created long ago: never deleted.
        yield* sql`
          UPDATE deliveries SET status = 'retrying', finished_at = NULL, created_at = now() - interval '1 day',
            next_attempt_at = now() + interval '1 hour'
          WHERE id = ${waiting!.id}
        `
        // Every event was dispatched long ago; only those without deliveries may go.
        yield* sql`UPDATE events SET dispatched_at = now() - interval '2 minutes' WHERE org_id = ${org.orgId}`
        // An old attempt of the recent delivery goes; the delivery stays.
        yield* sql`UPDATE delivery_attempts SET at = now() - interval '2 minutes' WHERE delivery_id = ${recent!.id}`
        // An event dispatched with no delivery at all (an organization without endpoints).
        const lonely = yield* SvcTest.org()
        yield* insertEvents([eventBody(lonely.orgId, "approval.requested")])
        yield* eventually(Effect.map(
          sql<{ n: number }>`SELECT count(*)::int AS n FROM events WHERE org_id = ${lonely.orgId} AND dispatched_at IS NOT NULL`,
          (rows) => rows[0]!.n === 1 ? true : undefined
        ), { what: "the lonely events dispatched" })
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
        yield* eventually(Effect.gen(function*() {
          const left = yield* sql<{ id: string }>`SELECT id FROM deliveries WHERE target_id = ${endpoint.id}`
          const events = yield* sql<{ id: string }>`SELECT id FROM events WHERE org_id IN ${sql.in([org.orgId, lonely.orgId])}`
          const sessionEvents = yield* sql<{ seq: string }>`SELECT seq FROM session_events WHERE session_id = ${session.id}`
          const attempts = yield* sql<{ n: number }>`SELECT count(*)::int AS n FROM delivery_attempts WHERE delivery_id = ${recent!.id}`
          return left.length === 2 && events.length === 2 && sessionEvents.length === 1 && attempts[0]!.n === 0
            ? { left, events, sessionEvents }
            : undefined
        }), { what: "pruning", timeoutMs: 20_000 }).pipe(Effect.tap(({ left, events: kept, sessionEvents }) =>
          Effect.sync(() => {
            assert.deepStrictEqual(ids(left), [recent!.id, waiting!.id].sort())
            // The events of the two deliveries left stay (a delivery reads its body from its event).
            assert.deepStrictEqual(ids(kept), [recent!.event_id, waiting!.event_id].sort())
            assert.deepStrictEqual(sessionEvents.map((e) => Number(e.seq)), [2])
          })
        ))
        // Their records and attempts are gone from the API too; the waiting one keeps its status.
        const listed = yield* org.client.notifications.deliveries({ params: { id: endpoint.id } })
        assert.sameMembers(listed.deliveries.map((d) => d.id), [recent!.id, waiting!.id])
        assert.strictEqual(listed.deliveries.find((d) => d.id === waiting!.id)!.status, "retrying")
      }).pipe(Effect.scoped))
  })
})
