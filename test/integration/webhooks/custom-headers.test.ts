/**
 * An endpoint's custom headers (docs/webhooks.md, "Custom headers"): sent
 * with every attempt, retry, replay and test event to a real HTTPS
 * receiver; listed by name only, the values sealed at rest and never in an
 * answer or a log line; refused with 400 INVALID_HEADERS naming the header
 * when they break a rule or would replace svc's own; replaced as a whole
 * by PATCH, removed with `{}`.
 */
import { assert, describe, layer } from "@effect/vitest"
import { Effect } from "effect"
import { SvcTest, type TestOrg } from "../../../src/testing.ts"
import { raw } from "../../support/http.ts"
import { HttpsReceiver, Reply } from "../../support/HttpsReceiver.ts"
import { eventBody, insertEvents, waitForDeliveries, webhookService } from "./support.ts"

const ROUTING = "payments-eu-7f3a9c"
const TOKEN = "gw-static-token-5d1e88b2c4"

const send = (org: TestOrg, method: string, path: string, body?: unknown) =>
  Effect.flatMap(SvcTest, (svc) =>
    raw(`${svc.baseUrl}${path}`, {
      method,
      headers: {
        authorization: `Bearer ${org.key}`,
        ...(body === undefined ? {} : { "content-type": "application/json" })
      },
      ...(body === undefined ? {} : { body: JSON.stringify(body) })
    }))

layer(webhookService(), { excludeTestServices: true })("custom headers", (it) => {
  describe("sent", () => {
    it.effect("every attempt, retry, replay and test event carries them; no answer, log line or stored row shows a value", () =>
      Effect.gen(function*() {
        const svc = yield* SvcTest
        const receiver = yield* HttpsReceiver.make()
        const org = yield* SvcTest.org()
        const created = yield* send(org, "POST", "/v1/notification-endpoints", {
          url: receiver.url("/custom"),
          headers: { "X-Routing-Key": ROUTING, Authorization: `Bearer ${TOKEN}` }
        })
        assert.strictEqual(created.status, 201)
        const endpoint = created.json.endpoint
        assert.deepStrictEqual([...endpoint.headers].sort(), ["Authorization", "X-Routing-Key"])
        assert.isNull(endpoint.rate_limit)
        const answers: Array<string> = [created.text]

        // A first attempt answered 500, its retry, then a replay of a delivery that failed for good.
        receiver.enqueue(Reply.status(500), Reply.ok())
        yield* insertEvents([eventBody(org.orgId, "approval.requested")])
        yield* waitForDeliveries(endpoint.id, (rows) => rows[0]?.status === "delivered")
        receiver.respond(() => Reply.status(502))
        yield* insertEvents([eventBody(org.orgId, "approval.approved")])
        const rows = yield* waitForDeliveries(endpoint.id, (rows) => rows[1]?.status === "failed")
        receiver.respond(() => Reply.ok())
        answers.push(
          (yield* send(org, "POST", `/v1/notification-endpoints/${endpoint.id}/deliveries/${rows[1]!.id}/replay`)).text
        )
        yield* waitForDeliveries(endpoint.id, (rows) => rows[1]?.status === "delivered")
        const test = yield* send(org, "POST", `/v1/notification-endpoints/${endpoint.id}/test`, {})
        assert.strictEqual(test.status, 200)
        answers.push(test.text)

        const requests = receiver.requests()
        // 2 (500, retry) + 4 (the failed one's attempts) + 1 replay + 1 test
        assert.strictEqual(requests.length, 8)
        for (const request of requests) {
          assert.strictEqual(request.headers["x-routing-key"], ROUTING)
          assert.strictEqual(request.headers["authorization"], `Bearer ${TOKEN}`)
          // svc's own headers are all still there.
          assert.strictEqual(request.headers["content-type"], "application/json")
          assert.match(request.headers["x-svc-signature"]!, /^t=\d+,v1=/)
          assert.isString(request.headers["webhook-signature"])
        }

        for (const path of ["", `/${endpoint.id}/deliveries`, `/${endpoint.id}/stats`]) {
          answers.push((yield* send(org, "GET", `/v1/notification-endpoints${path}`)).text)
        }
        answers.push(
          (yield* send(org, "PATCH", `/v1/notification-endpoints/${endpoint.id}`, { events: ["approval.requested"] }))
            .text
        )
        for (const text of [...answers, ...svc.logLines()]) {
          assert.notInclude(text, ROUTING)
          assert.notInclude(text, TOKEN)
        }
        // Sealed at rest, one secret per header.
        const stored = yield* svc.sql<{ name: string; dump: string }>`
          SELECT name, row_to_json(org_secrets)::text AS dump FROM org_secrets
          WHERE owner_id = ${endpoint.id} AND owner_kind = 'notification_endpoint_header'
        `
        assert.deepStrictEqual(stored.map((row) => row.name).sort(), ["Authorization", "X-Routing-Key"])
        for (const row of stored) {
          assert.notInclude(row.dump, ROUTING)
          assert.notInclude(row.dump, TOKEN)
        }
      }).pipe(Effect.scoped))

    it.effect("PATCH replaces the whole set; {} removes them all; absent leaves them; DELETE removes their secrets", () =>
      Effect.gen(function*() {
        const svc = yield* SvcTest
        const receiver = yield* HttpsReceiver.make()
        const org = yield* SvcTest.org()
        const { endpoint } = yield* org.client.notifications.create({
          payload: { url: receiver.url("/patch"), headers: { "X-A": "one", "X-B": "two" } }
        })
        const replaced = yield* org.client.notifications.update({
          params: { id: endpoint.id },
          payload: { headers: { "X-C": "three" } }
        })
        assert.deepStrictEqual(replaced.headers, ["X-C"])
        const kept = yield* org.client.notifications.update({
          params: { id: endpoint.id },
          payload: { events: ["approval.requested"] }
        })
        assert.deepStrictEqual(kept.headers, ["X-C"])
        yield* insertEvents([eventBody(org.orgId, "approval.requested")])
        const [first] = yield* receiver.waitForRequests(1)
        assert.strictEqual(first!.headers["x-c"], "three")
        assert.isUndefined(first!.headers["x-a"])
        assert.isUndefined(first!.headers["x-b"])

        const cleared = yield* org.client.notifications.update({
          params: { id: endpoint.id },
          payload: { headers: {} }
        })
        assert.deepStrictEqual(cleared.headers, [])
        yield* insertEvents([eventBody(org.orgId, "approval.requested")])
        const [, second] = yield* receiver.waitForRequests(2)
        assert.isUndefined(second!.headers["x-c"])
        const left = yield* svc
          .sql`SELECT 1 FROM org_secrets WHERE owner_id = ${endpoint.id} AND owner_kind = 'notification_endpoint_header'`
        assert.strictEqual(left.length, 0)

        yield* org.client.notifications.update({ params: { id: endpoint.id }, payload: { headers: { "X-D": "four" } } })
        yield* org.client.notifications.remove({ params: { id: endpoint.id } })
        const gone = yield* svc.sql`SELECT 1 FROM org_secrets WHERE owner_id = ${endpoint.id}`
        assert.strictEqual(gone.length, 0)
      }).pipe(Effect.scoped))
  })

  it.effect("a header named __proto__ is stored and sent like any other, never silently lost", () =>
    Effect.gen(function*() {
      const receiver = yield* HttpsReceiver.make()
      const org = yield* SvcTest.org()
      const created = yield* send(org, "POST", "/v1/notification-endpoints", {
        url: receiver.url("/proto"),
        headers: JSON.parse("{\"__proto__\":\"proto-value-1\",\"X-Other\":\"other-value-1\"}")
      })
      assert.strictEqual(created.status, 201, created.text)
      assert.deepStrictEqual([...created.json.endpoint.headers].sort(), ["X-Other", "__proto__"])
      const test = yield* send(org, "POST", `/v1/notification-endpoints/${created.json.endpoint.id}/test`, {})
      assert.strictEqual(test.status, 200, test.text)
      const [request] = receiver.requests()
      const raw = request!.rawHeaders
      const at = raw.findIndex((name, i) => i % 2 === 0 && name.toLowerCase() === "__proto__")
      assert.isAtLeast(at, 0, "the __proto__ header was sent")
      assert.strictEqual(raw[at + 1], "proto-value-1")
      assert.strictEqual(request!.headers["x-other"], "other-value-1")
    }).pipe(Effect.scoped))

  describe("refused", () => {
    it.effect("svc's own headers, transport headers, bad values and more than 10: 400 INVALID_HEADERS naming the header, on create and PATCH; bad names: 400 INVALID_REQUEST naming it", () =>
      Effect.gen(function*() {
        const receiver = yield* HttpsReceiver.make()
        const org = yield* SvcTest.org()
        const url = receiver.url("/refused")
        const cases: ReadonlyArray<readonly [Record<string, string>, string]> = [
          [{ "Content-Type": "text/plain" }, "headers.Content-Type"],
          [{ "X-Svc-Signature": "t=1,v1=00" }, "headers.X-Svc-Signature"],
          [{ "x-svc-event-id": "forged" }, "headers.x-svc-event-id"],
          [{ "Webhook-Id": "forged" }, "headers.Webhook-Id"],
          [{ "webhook-signature": "v1,AAAA" }, "headers.webhook-signature"],
          [{ "User-Agent": "not-svc" }, "headers.User-Agent"],
          [{ "Accept-Encoding": "gzip" }, "headers.Accept-Encoding"],
          [{ Host: "elsewhere.example" }, "headers.Host"],
          [{ Traceparent: "00-0-0-01" }, "headers.Traceparent"],
          [{ "X-Ok": "line\r\nInjected: 1" }, "headers.X-Ok"]
        ]
        for (const [headers, field] of cases) {
          const response = yield* send(org, "POST", "/v1/notification-endpoints", { url, headers })
          assert.strictEqual(response.status, 400, field)
          assert.strictEqual(response.json.code, "INVALID_HEADERS")
          assert.strictEqual(response.json.field, field)
          for (const value of Object.values(headers)) assert.notInclude(response.text, value)
        }
        // A name that is not an HTTP field name: refused by the schema, as the document's `propertyNames` says.
        for (const [name, field] of [["Bad Name", `headers["Bad Name"]`], ["X:Y", `headers["X:Y"]`]] as const) {
          const response = yield* send(org, "POST", "/v1/notification-endpoints", {
            url,
            headers: JSON.parse(`{${JSON.stringify(name)}:"v-q8"}`)
          })
          assert.strictEqual(response.status, 400, name)
          assert.strictEqual(response.json.code, "INVALID_REQUEST")
          assert.strictEqual(response.json.field, field)
          // The detail says what a header name must be, not only that the key is unexpected.
          assert.strictEqual(
            response.json.detail,
            `${field}: Expected a header name that is an RFC 9110 token: letters, digits and !#$%&'*+-.^_\`|~`
          )
          assert.notInclude(response.text, "v-q8")
        }
        const eleven = Object.fromEntries(Array.from({ length: 11 }, (_, i) => [`X-H${i}`, "v"]))
        const tooMany = yield* send(org, "POST", "/v1/notification-endpoints", { url, headers: eleven })
        assert.strictEqual(tooMany.status, 400)
        assert.strictEqual(tooMany.json.field, "headers")
        assert.deepStrictEqual((yield* org.client.notifications.list()).endpoints, [])

        const { endpoint } = yield* org.client.notifications.create({ payload: { url, headers: { "X-Ok": "kept" } } })
        const patch = yield* send(org, "PATCH", `/v1/notification-endpoints/${endpoint.id}`, {
          headers: { "X-Svc-Event-Type": "x" }
        })
        assert.strictEqual(patch.status, 400)
        assert.strictEqual(patch.json.field, "headers.X-Svc-Event-Type")
        // The typed client knows the schema's rules (more than 10 is refused before sending); the service's own is answered typed.
        const local = yield* Effect.flip(
          org.client.notifications.update({ params: { id: endpoint.id }, payload: { headers: eleven } })
        )
        assert.strictEqual(local._tag, "SchemaError")
        const typed = yield* Effect.flip(
          org.client.notifications.update({
            params: { id: endpoint.id },
            payload: { headers: { "X-A": "1", "x-a": "2" } }
          })
        )
        assert.strictEqual(typed._tag, "InvalidHeaders")
        // A refused PATCH changes nothing.
        assert.deepStrictEqual((yield* org.client.notifications.list()).endpoints[0]!.headers, ["X-Ok"])
      }).pipe(Effect.scoped))
  })
})
