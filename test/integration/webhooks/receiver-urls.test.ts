/**
 * Receiver URLs are secrets: sealed at rest, never
 * returned, known to the feedback scrubber, masked in what receivers answer.
 */
import { assert, describe, layer } from "@effect/vitest"
import { Effect } from "effect"
import { endpointClearUrls } from "../../../src/notifications/EndpointRows.ts"
import { sealStoredUrls } from "../../../src/secrets/ReceiverUrls.ts"
import { SecretStore } from "../../../src/secrets/SecretStore.ts"
import { destinationClearUrls } from "../../../src/telemetry/Repository.ts"
import { SvcTest } from "../../../src/testing.ts"
import { eventually } from "../../support/http.ts"
import { HttpsReceiver, Reply } from "../../support/HttpsReceiver.ts"
import { eventBody, insertEvents, waitForDeliveries, webhookService } from "./support.ts"

const TOKEN = "T0KEN-in-the-path-8f7e6d5c4b3a"
const QUERY = "q-s3cr3t-9a8b7c6d5e4f"

/** Every text column of every row that could hold it, as JSON. */
const everything = Effect.gen(function*() {
  const svc = yield* SvcTest
  const rows = yield* svc.sql<{ dump: string }>`
    SELECT row_to_json(t)::text AS dump FROM notification_endpoints t
    UNION ALL SELECT row_to_json(t)::text FROM telemetry_destinations t
    UNION ALL SELECT row_to_json(t)::text FROM org_secrets t
    UNION ALL SELECT row_to_json(t)::text FROM deliveries t
    UNION ALL SELECT row_to_json(t)::text FROM delivery_attempts t
  `
  return rows.map((r) => r.dump).join("\n")
})

layer(webhookService(), { excludeTestServices: true })("receiver URLs are secrets", (it) => {
  describe("sealed at rest, never returned, still used", () => {
    it.effect("a webhook endpoint's and a collector's URL: no clear copy in the database; the hint is scheme and host", () =>
      Effect.gen(function*() {
        const receiver = yield* HttpsReceiver.make()
        const org = yield* SvcTest.org()
        const url = receiver.url(`/hooks/${TOKEN}?sig=${QUERY}`)
        const { endpoint } = yield* org.client.notifications.create({ payload: { url } })
        assert.match(endpoint.url_hint, /^https:\/\/127\.0\.0\.1:\d+\/…$/)
        const collector = yield* HttpsReceiver.make()
        const destination = yield* org.client.telemetry.create({
          payload: { url: collector.url(`/otlp/${TOKEN}/v1/traces?key=${QUERY}`) }
        })
        assert.match(destination.url_hint, /^https:\/\/127\.0\.0\.1:\d+\/…$/)
        const events = [eventBody(org.orgId, "approval.requested")]
        yield* insertEvents(events)
        yield* waitForDeliveries(endpoint.id, (rows) => rows.length === 1 && rows[0]!.status === "delivered")
        const received = yield* receiver.waitFor(() => true, "10 seconds")
        assert.strictEqual(received.path, `/hooks/${TOKEN}?sig=${QUERY}`)
        const tested = yield* org.client.telemetry.test({ params: { id: destination.id } })
        assert.isTrue(tested.delivered)
        const dump = yield* everything
        assert.notInclude(dump, TOKEN)
        assert.notInclude(dump, QUERY)
        const listed = JSON.stringify([yield* org.client.notifications.list(), yield* org.client.telemetry.list()])
        assert.notInclude(listed, TOKEN)
        assert.notInclude(listed, QUERY)
      }).pipe(Effect.scoped))

    it.effect("URLs stored in clear before are moved into the secret store at start, and keep working", () =>
      Effect.gen(function*() {
        const svc = yield* SvcTest
        const receiver = yield* HttpsReceiver.make()
        const org = yield* SvcTest.org()
        const { endpoint } = yield* org.client.notifications.create({ payload: { url: receiver.url("/placeholder") } })
        // As an older version stored it: the URL in clear in its row, with an old-style hint.
        const url = receiver.url(`/legacy/${TOKEN}`)
        yield* svc
          .sql`DELETE FROM org_secrets WHERE owner_id = ${endpoint.id} AND owner_kind = 'notification_endpoint_url'`
        yield* svc
          .sql`UPDATE notification_endpoints SET url = ${url}, url_hint = ${"https://127.0.0.1/…/3a"} WHERE id = ${endpoint.id}`
        const moved = yield* sealStoredUrls([endpointClearUrls, destinationClearUrls]).pipe(
          Effect.provide(SecretStore.layer)
        )
        assert.isAtLeast(moved, 1)
        assert.strictEqual(
          yield* sealStoredUrls([endpointClearUrls, destinationClearUrls]).pipe(Effect.provide(SecretStore.layer)),
          0,
          "each URL moves once"
        )
        const [row] = yield* svc.sql<
          { url: string; url_hint: string }
        >`SELECT url, url_hint FROM notification_endpoints WHERE id = ${endpoint.id}`
        assert.strictEqual(row!.url, "")
        assert.match(row!.url_hint, /^https:\/\/127\.0\.0\.1:\d+\/…$/)
        assert.notInclude(yield* everything, TOKEN)
        yield* insertEvents([eventBody(org.orgId, "approval.requested")])
        yield* waitForDeliveries(endpoint.id, (rows) => rows.length === 1 && rows[0]!.status === "delivered")
        assert.strictEqual((yield* receiver.waitFor(() => true, "10 seconds")).path, `/legacy/${TOKEN}`)
      }).pipe(Effect.scoped))
  })

  describe("protected like collector header values", () => {
    it.effect("a receiver echoing its URL's token in an error page: masked in the attempt record", () =>
      Effect.gen(function*() {
        const receiver = yield* HttpsReceiver.make({
          respond: (request) =>
            Reply.status(404, { body: `Cannot POST ${request.path} (token ${TOKEN}, sig ${QUERY})` })
        })
        const org = yield* SvcTest.org()
        const { endpoint } = yield* org.client.notifications.create({
          payload: { url: receiver.url(`/hooks/${TOKEN}?sig=${QUERY}`) }
        })
        yield* insertEvents([eventBody(org.orgId, "approval.requested")])
        const [delivery] = yield* waitForDeliveries(endpoint.id, (rows) => rows.length === 1 && rows[0]!.attempts >= 1)
        const svc = yield* SvcTest
        const attempts = yield* eventually(
          Effect.map(
            svc.sql<
              { response_snippet: string | null }
            >`SELECT response_snippet FROM delivery_attempts WHERE delivery_id = ${delivery!.id}`,
            (rows) => rows.length > 0 ? rows : undefined
          ),
          { what: "an attempt recorded" }
        )
        assert.include(attempts[0]!.response_snippet ?? "", "Cannot POST")
        assert.notInclude(yield* everything, TOKEN)
        assert.notInclude(yield* everything, QUERY)
      }).pipe(Effect.scoped))

    it.effect("a correction holding the endpoint's URL has it removed, like a signing secret", () =>
      Effect.gen(function*() {
        const receiver = yield* HttpsReceiver.make()
        const org = yield* SvcTest.org()
        const url = receiver.url(`/hooks/${TOKEN}?sig=${QUERY}`)
        yield* org.client.notifications.create({ payload: { url } })
        const task = yield* org.client.tasks.create({ payload: { name: "t", answer_schema: { type: "object" } } })
        const run = yield* org.client.tasks.logRun({ params: { task_id: task.id }, payload: { input: 1, answer: {} } })
        const feedback = yield* org.client.feedback.submit({
          payload: {
            inference_log_id: run.trace_id,
            score: -1,
            correction: { whole: `post to ${url} please`, part: `the token is ${TOKEN}` }
          }
        })
        const text = JSON.stringify(feedback.correction)
        assert.notInclude(text, TOKEN)
        assert.notInclude(text, QUERY)
        assert.sameMembers([...(feedback.redaction_warning?.fields ?? [])], ["correction.whole", "correction.part"])
      }).pipe(Effect.scoped))
  })
})
