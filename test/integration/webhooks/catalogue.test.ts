/**
 * The event catalogue (docs/events.md, src/api/Events.ts) tells the truth
 * about what svc sends: every event type is made to happen for real (an
 * approval through its deadlines to expiry, one approved with a reason, one
 * rejected, an endpoint that fails, one that answers 410 Gone, one whose
 * client certificate nears its expiry, and a test event of every type),
 * received over HTTPS, verified, and each body fits
 * its JSON Schema (also closed: no field it does not name) and has the keys
 * of the catalogue's example; the headers are the ones the catalogue lists.
 *
 * `SVC_CAPTURE_EVENTS=1` prints the bodies received, to refresh the page's
 * examples from.
 */
import { assert, describe, layer } from "@effect/vitest"
import { Duration, Effect } from "effect"
import { constructEventFromHeaders } from "../../../packages/receiver/src/index.ts"
import type { EventType } from "../../../src/api/Notifications.ts"
import { EventTypes } from "../../../src/api/Notifications.ts"
import { SvcTest } from "../../../src/testing.ts"
import { catalogue, eventValidators, keyPaths } from "../../support/eventCatalogue.ts"
import { eventually } from "../../support/http.ts"
import { HttpsReceiver, type ReceivedRequest, Reply } from "../../support/HttpsReceiver.ts"
import { TestTls } from "../../support/tls.ts"
import { webhookService } from "./support.ts"

/** Headers of the HTTP exchange itself, not of the event. */
const TRANSPORT = new Set(["host", "connection", "content-length", "accept-encoding"])

const text = (bytes: Uint8Array) => new TextDecoder().decode(bytes)

layer(
  webhookService({
    webhookCooldownAfter: 2,
    webhookCooldownBase: Duration.millis(200),
    webhookCooldownMax: Duration.millis(400),
    webhookTestsPerMinute: 100,
    // The test CA's client certificates last 30 days: told at once.
    webhookCertificateNotice: Duration.days(60)
  }),
  { excludeTestServices: true }
)("the event catalogue", (it) => {
  describe("every event type, sent for real", () => {
    it.effect(
      "fits its JSON Schema and the catalogue's example, with the catalogue's headers; test events too",
      () =>
        Effect.gen(function*() {
          const problemsOf = eventValidators()
          const receiver = yield* HttpsReceiver.make()
          receiver.respond((request) =>
            request.path === "/failing"
              ? Reply.status(500)
              : request.path === "/gone"
              ? Reply.status(410)
              : Reply.status(204)
          )
          const org = yield* SvcTest.org()
          const all = yield* org.client.notifications.create({
            payload: { url: receiver.url("/all"), events: [...EventTypes] }
          })
          yield* org.client.notifications.create({ payload: { url: receiver.url("/default") } })
          const failing = yield* org.client.notifications.create({
            payload: { url: receiver.url("/failing"), events: [...EventTypes] }
          })
          const gone = yield* org.client.notifications.create({
            payload: { url: receiver.url("/gone"), events: [...EventTypes] }
          })
          const tls = yield* TestTls.shared
          const client = yield* Effect.promise(() => tls.issueClient("catalogue"))
          const expiring = yield* org.client.notifications.create({
            payload: {
              url: receiver.url("/expiring"),
              events: [...EventTypes],
              tls_client_certificate: { certificate: client.cert, private_key: client.key }
            }
          })

          // Deadlines a second apart: the notice and the escalation after 1 s, expiry after 2 s.
          yield* org.client.approvalPolicies.put({
            params: { action_class: "catalogue.deadlines" },
            payload: {
              mode: "require_approval",
              review_seconds: 1,
              expiring_notice_seconds: 1,
              escalation_seconds: 1,
              timeout_action: "reject"
            }
          })
          const session = yield* org.client.agentSessions.create({ payload: {} })
          const step = (step_id: string, action_class: string) =>
            org.client.agentSessions.governStep({
              params: { session_id: session.id },
              payload: { step_id, tool: "catalogue.tool", action_class, arguments: { n: 1 } }
            })
          const lapsing = yield* step("lapses", "catalogue.deadlines")
          const approved = yield* step("approved", "catalogue.decided")
          const rejected = yield* step("rejected", "catalogue.decided")
          assert.deepStrictEqual([lapsing.decision, approved.decision, rejected.decision], [
            "pending",
            "pending",
            "pending"
          ])
          yield* org.client.approvals.decide({
            params: { approval_id: approved.approval_id! },
            payload: { decision: "approve", reason: "within policy" }
          })
          yield* org.client.approvals.decide({
            params: { approval_id: rejected.approval_id! },
            payload: { decision: "reject", reason: "over the limit" }
          })

          const at = (path: string) => receiver.requests().filter((r) => r.path === path)
          const typeOf = (request: ReceivedRequest) => request.headers["x-svc-event-type"] as EventType
          yield* eventually(
            Effect.sync(() =>
              EventTypes.every((type) => at("/all").some((r) => typeOf(r) === type)) ? true : undefined
            ),
            { what: "every event type at /all", timeoutMs: 30_000, intervalMs: 50 }
          )
          const real = at("/all")
          for (const type of EventTypes) {
            yield* org.client.notifications.test({ params: { id: all.endpoint.id }, payload: { event_type: type } })
          }
          const tests = at("/all").slice(real.length)
          assert.strictEqual(tests.length, EventTypes.length)
          if (process.env.SVC_CAPTURE_EVENTS !== undefined) {
            const captured = Object.fromEntries(
              [...real, ...tests].map((
                r,
                i
              ) => [`${i < real.length ? "" : "test "}${typeOf(r)}`, JSON.parse(text(r.body))])
            )
            yield* Effect.sync(() => console.log(JSON.stringify({ captured, headers: real[0]!.headers }, null, 2)))
          }

          const { entries, testExample, headers } = catalogue()
          for (
            const [request, isTest] of [
              ...real.map((r) => [r, false] as const),
              ...tests.map((r) => [r, true] as const)
            ]
          ) {
            const type = typeOf(request)
            const where = `${isTest ? "test " : ""}${type}`
            const event = yield* Effect.promise(() =>
              constructEventFromHeaders(request.body, request.headers, all.secret, { expectedOrgId: org.orgId })
            )
            const body = JSON.parse(text(request.body)) as Record<string, unknown>
            assert.strictEqual(event.type, type, where)
            assert.deepStrictEqual(problemsOf(type, body), [], where)
            const entry = entries.get(type)
            assert.isDefined(entry, `${type} has a section in the catalogue`)
            const expectedKeys = isTest ? [...keyPaths(entry!.example), "test"].sort() : keyPaths(entry!.example)
            assert.deepStrictEqual(keyPaths(body), expectedKeys, `${where}: the keys of the catalogue's example`)
            const received = Object.keys(request.headers).filter((name) => !TRANSPORT.has(name)).sort()
            assert.deepStrictEqual(received, [...headers].sort(), `${where}: the catalogue's headers`)
            assert.strictEqual(request.headers["x-svc-event-id"], body.id)
            assert.strictEqual(request.headers["webhook-id"], body.id)
          }
          const testApproval = tests.find((r) => typeOf(r) === testExample.type)!
          assert.deepStrictEqual(
            keyPaths(JSON.parse(text(testApproval.body))),
            keyPaths(testExample),
            "the test event's example"
          )

          // The deadlines as the catalogue tells them (R = E = N = 1 s): requested with
          // deadline_at = T + R and expires_at = deadline_at + E; escalated and the notice
          // at T + R = expires_at - N, the escalation moving deadline_at to expires_at;
          // expired at expires_at.
          const lapsed = real.map((r) => JSON.parse(text(r.body))).filter((b) =>
            b.approval?.approval_id === lapsing.approval_id
          )
          const byType = new Map(lapsed.map((b) => [b.type as string, b]))
          const ms = (iso: string) => new Date(iso).getTime()
          const requested = byType.get("approval.requested")!
          assert.strictEqual(ms(requested.approval.deadline_at) - ms(requested.occurred_at), 1000)
          assert.strictEqual(ms(requested.approval.expires_at) - ms(requested.approval.deadline_at), 1000)
          const expiresAt = ms(requested.approval.expires_at)
          assert.isAtLeast(ms(byType.get("approval.expiring")!.occurred_at), expiresAt - 1000)
          assert.isAtLeast(ms(byType.get("approval.escalated")!.occurred_at), ms(requested.approval.deadline_at))
          assert.strictEqual(ms(byType.get("approval.escalated")!.approval.deadline_at), expiresAt)
          assert.isAtLeast(ms(byType.get("approval.expired")!.occurred_at), expiresAt)
          assert.deepStrictEqual(
            lapsed.map((b) => b.type).filter((t) => t === "approval.approved" || t === "approval.rejected"),
            []
          )

          // Who gets what: the default subscription has the approval events only,
          // and no endpoint is told about itself.
          assert.includeMembers([
            "approval.requested",
            "approval.expiring",
            "approval.escalated",
            "approval.approved",
            "approval.rejected",
            "approval.expired"
          ], [...new Set(at("/default").map(typeOf))])
          for (
            const [path, id] of [
              ["/failing", failing.endpoint.id],
              ["/gone", gone.endpoint.id],
              ["/expiring", expiring.endpoint.id],
              ["/all", all.endpoint.id]
            ] as const
          ) {
            const about = at(path).slice(0, path === "/all" ? real.length : undefined).map((r) =>
              JSON.parse(text(r.body)).endpoint?.id
            ).filter((e) => e !== undefined)
            assert.notInclude(about, id, `${path} is not told about itself`)
          }
        }).pipe(Effect.scoped),
      60_000
    )
  })
})
