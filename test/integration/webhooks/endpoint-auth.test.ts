/**
 * Endpoint authentication (docs/webhooks.md, "Endpoint authentication"):
 * a real OAuth token server and a real receiver on loopback (HTTPS, the
 * test CA), the receiver requiring both the token and a client certificate
 * signed by the test CA. Deliveries and the test event arrive signed as
 * always, with the bearer token, over mutual TLS; a token the receiver
 * refuses is fetched again once; a token endpoint that refuses, redirects,
 * answers too much or turns private fails the attempt with a clear
 * `last_error` on the retry schedule; neither secret nor the token appears
 * in an answer, a log line, a span or a stored row.
 */
import { PgClient } from "@effect/sql-pg"
import { assert, describe, layer } from "@effect/vitest"
import { Duration, Effect, Layer, Tracer } from "effect"
import { createHmac } from "node:crypto"
import { writeCertificateNotices } from "../../../src/notifications/auth/CertificateNotices.ts"
import { SvcTest, type TestOrg } from "../../../src/testing.ts"
import { makeDnsServer, type TestDnsServer } from "../../support/dns.ts"
import { raw } from "../../support/http.ts"
import { HttpsReceiver, type ReceivedRequest, Reply } from "../../support/HttpsReceiver.ts"
import { TestTls } from "../../support/tls.ts"
import { eventBody, insertEvents, waitForDeliveries, webhookService } from "./support.ts"

const CLIENT_ID = "svc-webhooks-client"
const CLIENT_SECRET = "cs-9f2d7c41b8e6a3f0d5c2"
const TOKEN = "at-3b8e1f5a9c2d7e4f6a0b"
const SECOND_TOKEN = "at-second-71c4e9a2d8f3"

const ended: Array<Tracer.NativeSpan> = []
class Recording extends Tracer.NativeSpan {
  override end(endTime: bigint, exit: Parameters<Tracer.NativeSpan["end"]>[1]) {
    super.end(endTime, exit)
    ended.push(this)
  }
}

let dns: TestDnsServer
const DnsLive = Layer.effectDiscard(Effect.gen(function*() {
  dns = yield* makeDnsServer
}))

const service = Layer.unwrap(
  Effect.sync(() =>
    webhookService({ dnsServers: [dns.address], webhookSendTimeout: Duration.seconds(3) }).pipe(
      Layer.provide(Layer.succeed(Tracer.Tracer, Tracer.make({ span: (options) => new Recording(options) })))
    )
  )
).pipe(Layer.provideMerge(DnsLive))

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

const basic = `Basic ${Buffer.from(`${CLIENT_ID}:${CLIENT_SECRET}`).toString("base64")}`

/** A token server that grants `tokens` in turn (the last one again after), to these client credentials only. */
const tokenServer = (tokens: ReadonlyArray<string>, expiresIn = 3600) =>
  Effect.gen(function*() {
    let granted = 0
    return yield* HttpsReceiver.make({
      respond: (request) => {
        if (request.headers["authorization"] !== basic) return Reply.json({ error: "invalid_client" }, 401)
        const token = tokens[Math.min(granted++, tokens.length - 1)]!
        return Reply.json({ access_token: token, token_type: "Bearer", expires_in: expiresIn })
      }
    })
  })

/** A receiver that wants `token` and a client certificate from the test CA. */
const guardedReceiver = (token: () => string) =>
  Effect.gen(function*() {
    const tls = yield* TestTls.shared
    return yield* HttpsReceiver.make({
      clientCa: tls.caCert,
      respond: (request) =>
        request.headers["authorization"] === `Bearer ${token()}` && request.clientCertificate === "svc-client"
          ? Reply.ok()
          : Reply.status(401)
    })
  })

const oauth = (tokenUrl: string, extra: Record<string, string> = {}) => ({
  type: "oauth2_client_credentials",
  token_url: tokenUrl,
  client_id: CLIENT_ID,
  client_secret: CLIENT_SECRET,
  ...extra
})

/** The `v1=` of `X-Svc-Signature`, as a receiver checks it. */
const signed = (request: ReceivedRequest, secret: string) => {
  const header = request.headers["x-svc-signature"]!
  const t = /t=(\d+)/.exec(header)![1]
  const expected = createHmac("sha256", secret).update(`${t}.`).update(request.body).digest("hex")
  return header.includes(`v1=${expected}`)
}

layer(service, { excludeTestServices: true })("endpoint authentication", (it) => {
  describe("OAuth client credentials and mutual TLS", () => {
    it.effect("a receiver wanting a token and a client certificate gets signed deliveries and the test event; no secret leaves svc", () =>
      Effect.gen(function*() {
        const svc = yield* SvcTest
        const tls = yield* TestTls.shared
        const client = yield* Effect.promise(() => tls.issueClient("svc-client"))
        const tokens = yield* tokenServer([TOKEN])
        const receiver = yield* guardedReceiver(() => TOKEN)
        const org = yield* SvcTest.org()
        const created = yield* send(org, "POST", "/v1/notification-endpoints", {
          url: receiver.url("/guarded"),
          auth: oauth(tokens.url("/oauth/token"), { scope: "webhooks.write", audience: "https://api.acme.test" }),
          tls_client_certificate: { certificate: client.cert, private_key: client.key }
        })
        assert.strictEqual(created.status, 201, created.text)
        const { endpoint, secret } = created.json
        assert.deepStrictEqual(endpoint.auth, {
          type: "oauth2_client_credentials",
          token_url_hint: tokens.url("/…"),
          client_id: CLIENT_ID,
          scope: "webhooks.write",
          audience: "https://api.acme.test",
          auth_method: "client_secret_basic"
        })
        assert.strictEqual(endpoint.tls_client_certificate.subject, "CN=svc-client")
        assert.strictEqual(endpoint.tls_client_certificate.issuer, "CN=svc test CA")
        assert.match(endpoint.tls_client_certificate.fingerprint_sha256, /^([0-9A-F]{2}:){31}[0-9A-F]{2}$/)
        assert.isAbove(Date.parse(endpoint.tls_client_certificate.not_after), Date.now() + 29 * 86_400_000)
        const answers: Array<string> = [created.text]

        const test = yield* send(org, "POST", `/v1/notification-endpoints/${endpoint.id}/test`, {})
        assert.strictEqual(test.status, 200, test.text)
        answers.push(test.text)
        yield* insertEvents([eventBody(org.orgId, "approval.requested"), eventBody(org.orgId, "approval.approved")])
        yield* waitForDeliveries(endpoint.id, (rows) => rows.filter((row) => row.status === "delivered").length === 3)

        const requests = receiver.requests()
        assert.strictEqual(requests.length, 3)
        for (const request of requests) {
          assert.strictEqual(request.headers["authorization"], `Bearer ${TOKEN}`)
          assert.strictEqual(request.clientCertificate, "svc-client")
          assert.isTrue(signed(request, secret), "signed with the endpoint's secret")
          assert.match(request.headers["webhook-signature"]!, /^v1,/)
        }
        // One token for the test event and both deliveries: cached until shortly before it expires.
        const [grant, ...more] = tokens.requests()
        assert.lengthOf(more, 0)
        assert.strictEqual(grant!.method, "POST")
        assert.strictEqual(grant!.headers["content-type"], "application/x-www-form-urlencoded")
        assert.deepStrictEqual(Object.fromEntries(new URLSearchParams(new TextDecoder().decode(grant!.body))), {
          grant_type: "client_credentials",
          scope: "webhooks.write",
          audience: "https://api.acme.test"
        })

        for (const path of ["", `/${endpoint.id}/deliveries`]) {
          answers.push((yield* send(org, "GET", `/v1/notification-endpoints${path}`)).text)
        }
        answers.push(
          (yield* send(org, "PATCH", `/v1/notification-endpoints/${endpoint.id}`, { events: ["approval.requested"] }))
            .text
        )
        const spans = ended.flatMap((span) => [span.name, ...[...span.attributes.values()].map(String)])
        assert.include(spans, "EndpointTokens.fetch")
        const keyBody = client.key.split("\n").slice(1, -2).join("")
        for (const text of [...answers, ...svc.logLines(), ...spans]) {
          for (const hidden of [CLIENT_SECRET, TOKEN, keyBody.slice(0, 40), "/oauth/token"]) {
            assert.notInclude(text, hidden)
          }
        }
        // Sealed at rest: the secrets' rows hold none of it in clear.
        const stored = yield* svc.sql<{ dump: string }>`
          SELECT row_to_json(s)::text AS dump FROM org_secrets s WHERE owner_id = ${endpoint.id}
          UNION ALL SELECT row_to_json(e)::text FROM notification_endpoints e WHERE id = ${endpoint.id}
        `
        for (const row of stored) {
          for (const hidden of [CLIENT_SECRET, keyBody.slice(0, 40), "/oauth/token"]) {
            assert.notInclude(row.dump, hidden)
          }
        }
      }).pipe(Effect.scoped))

    it.effect("a client certificate alone: every delivery presents it (the sends without a fiber of their own too)", () =>
      Effect.gen(function*() {
        const tls = yield* TestTls.shared
        const client = yield* Effect.promise(() => tls.issueClient("svc-client"))
        const receiver = yield* HttpsReceiver.make({
          clientCa: tls.caCert,
          respond: (request) => request.clientCertificate === "svc-client" ? Reply.ok() : Reply.status(403)
        })
        const org = yield* SvcTest.org()
        const { endpoint } = yield* org.client.notifications.create({
          payload: {
            url: receiver.url("/mtls-only"),
            tls_client_certificate: { certificate: client.cert, private_key: client.key }
          }
        })
        assert.isNull(endpoint.auth)
        yield* insertEvents(Array.from({ length: 5 }, () => eventBody(org.orgId, "approval.requested")))
        const rows = yield* waitForDeliveries(
          endpoint.id,
          (rows) => rows.length === 5 && rows.every((row) => row.status === "delivered")
        )
        assert.isTrue(rows.every((row) => row.attempts === 1))
        for (const request of receiver.requests()) {
          assert.strictEqual(request.clientCertificate, "svc-client")
          assert.isUndefined(request.headers["authorization"])
        }
      }).pipe(Effect.scoped))

    it.effect("a token the receiver refuses (401) is fetched again once and the delivery goes through in one attempt", () =>
      Effect.gen(function*() {
        const tls = yield* TestTls.shared
        const client = yield* Effect.promise(() => tls.issueClient("svc-client"))
        const tokens = yield* tokenServer([TOKEN, SECOND_TOKEN])
        let wanted = TOKEN
        const receiver = yield* guardedReceiver(() => wanted)
        const org = yield* SvcTest.org()
        const { endpoint } = (yield* send(org, "POST", "/v1/notification-endpoints", {
          url: receiver.url("/expiring"),
          auth: oauth(tokens.url("/token")),
          tls_client_certificate: { certificate: client.cert, private_key: client.key }
        })).json
        yield* insertEvents([eventBody(org.orgId, "approval.requested")])
        yield* waitForDeliveries(endpoint.id, (rows) => rows[0]?.status === "delivered")
        // The receiver revokes the first token before its expires_in.
        wanted = SECOND_TOKEN
        yield* insertEvents([eventBody(org.orgId, "approval.approved")])
        const rows = yield* waitForDeliveries(endpoint.id, (rows) => rows[1]?.status === "delivered")
        assert.strictEqual(rows[1]!.attempts, 1)
        assert.deepStrictEqual(receiver.requests().map((r) => r.headers["authorization"]), [
          `Bearer ${TOKEN}`,
          `Bearer ${TOKEN}`,
          `Bearer ${SECOND_TOKEN}`
        ])
        assert.lengthOf(tokens.requests(), 2)
      }).pipe(Effect.scoped))

    it.effect("a token is fetched again once it nears its expires_in", () =>
      Effect.gen(function*() {
        const tokens = yield* tokenServer([TOKEN], 1)
        const receiver = yield* HttpsReceiver.make()
        const org = yield* SvcTest.org()
        const { endpoint } = yield* org.client.notifications.create({
          payload: {
            url: receiver.url("/short"),
            auth: { ...oauth(tokens.url("/token")), type: "oauth2_client_credentials" }
          }
        })
        yield* insertEvents([eventBody(org.orgId, "approval.requested")])
        yield* waitForDeliveries(endpoint.id, (rows) => rows[0]?.status === "delivered")
        // A one-second token is used for half of it.
        yield* Effect.sleep(Duration.millis(700))
        yield* insertEvents([eventBody(org.orgId, "approval.requested")])
        yield* waitForDeliveries(endpoint.id, (rows) => rows[1]?.status === "delivered")
        assert.lengthOf(tokens.requests(), 2)
      }).pipe(Effect.scoped))
  })

  describe("a token endpoint that fails fails the attempt, on the retry schedule, saying why", () => {
    it.effect("refused (401), redirected, too large, or answered without a token: last_error says which, never a secret", () =>
      Effect.gen(function*() {
        const tokens = yield* HttpsReceiver.make()
        const receiver = yield* HttpsReceiver.make()
        const org = yield* SvcTest.org()
        const cases: ReadonlyArray<readonly [Reply, string]> = [
          [
            Reply.json({ error: "invalid_client", error_description: CLIENT_SECRET }, 401),
            "the token endpoint answered HTTP 401 (invalid_client)"
          ],
          [
            Reply.redirect("https://127.0.0.1:1/token"),
            "the token endpoint answered HTTP 302, redirects are not followed"
          ],
          [
            Reply.json({ access_token: "x".repeat(20_000) }),
            "the token endpoint's answer is over SVC_WEBHOOK_TOKEN_MAX_BYTES"
          ],
          [
            Reply.json({ token: TOKEN }),
            "the token endpoint's answer has no usable access_token (JSON, visible ASCII, at most 8192 characters)"
          ]
        ]
        for (const [reply, reason] of cases) {
          tokens.respond(() => reply)
          const { endpoint } = (yield* send(org, "POST", "/v1/notification-endpoints", {
            url: receiver.url("/never"),
            auth: oauth(tokens.url("/token"))
          })).json
          yield* insertEvents([eventBody(org.orgId, "approval.requested")])
          const [row] = yield* waitForDeliveries(endpoint.id, (rows) => rows[0]?.status === "failed")
          // The first attempt and the schedule's three retries.
          assert.strictEqual(row!.attempts, 4)
          assert.strictEqual(row!.last_error, `OAuth token request failed: ${reason}; no retries left`)
          const test = yield* send(org, "POST", `/v1/notification-endpoints/${endpoint.id}/test`, {})
          assert.strictEqual(test.status, 502)
          assert.strictEqual(test.json.error, `OAuth token request failed: ${reason}`)
          for (const text of [row!.last_error!, test.text]) {
            assert.notInclude(text, CLIENT_SECRET)
            assert.notInclude(text, TOKEN)
          }
        }
        assert.lengthOf(receiver.requests(), 0)
      }).pipe(Effect.scoped))

    it.effect("a token URL whose name turns to a private address is refused at fetch time", () =>
      Effect.gen(function*() {
        const tokens = yield* tokenServer([TOKEN])
        const receiver = yield* HttpsReceiver.make()
        const org = yield* SvcTest.org()
        dns.answer("token.svc.test", ["127.0.0.1"])
        const created = yield* send(org, "POST", "/v1/notification-endpoints", {
          url: receiver.url("/rebound"),
          auth: oauth(`https://token.svc.test:${tokens.port}/token`)
        })
        assert.strictEqual(created.status, 201, created.text)
        dns.answer("token.svc.test", ["10.20.30.40"])
        yield* insertEvents([eventBody(org.orgId, "approval.requested")])
        const [row] = yield* waitForDeliveries(created.json.endpoint.id, (rows) => rows[0]?.status === "failed")
        assert.strictEqual(
          row!.last_error,
          "OAuth token request failed: the host resolves to a non-public address; no retries left"
        )
        assert.lengthOf(tokens.requests(), 0)
        assert.lengthOf(receiver.requests(), 0)
      }).pipe(Effect.scoped))
  })

  describe("checked when set", () => {
    it.effect("bad certificates and keys, token URLs and brokers: 400 naming the field, on create and PATCH", () =>
      Effect.gen(function*() {
        const tls = yield* TestTls.shared
        const client = yield* Effect.promise(() => tls.issueClient("svc-client"))
        const other = yield* Effect.promise(() => tls.issueClient("other"))
        const expired = yield* Effect.promise(() =>
          tls.issueClient("old", {
            notBeforeDate: new Date(Date.now() - 10 * 86_400_000),
            notAfterDate: new Date(Date.now() - 86_400_000)
          })
        )
        const server = yield* Effect.promise(() => tls.issue({ dnsNames: ["server.svc.test"] }))
        const receiver = yield* HttpsReceiver.make()
        const org = yield* SvcTest.org()
        const url = receiver.url("/checked")
        const certificateCases: ReadonlyArray<readonly [unknown, string, string]> = [
          [
            { certificate: "not a certificate", private_key: client.key },
            "tls_client_certificate.certificate",
            "INVALID_REQUEST"
          ],
          [
            { certificate: client.cert, private_key: "not a key" },
            "tls_client_certificate.private_key",
            "INVALID_REQUEST"
          ],
          [
            { certificate: client.cert, private_key: other.key },
            "tls_client_certificate.private_key",
            "INVALID_REQUEST"
          ],
          [
            { certificate: expired.cert, private_key: expired.key },
            "tls_client_certificate.certificate",
            "INVALID_REQUEST"
          ],
          [
            { certificate: server.cert, private_key: server.key },
            "tls_client_certificate.certificate",
            "INVALID_REQUEST"
          ],
          [{ certificate: client.cert }, "tls_client_certificate.private_key", "INVALID_REQUEST"]
        ]
        const authCases: ReadonlyArray<readonly [unknown, string, string]> = [
          [oauth("http://127.0.0.1/token"), "auth.token_url", "INVALID_URL"],
          [oauth("https://10.0.0.1/token"), "auth.token_url", "INVALID_URL"],
          [{ ...oauth(receiver.url("/t")), client_secret: "" }, "auth.client_secret", "INVALID_REQUEST"],
          // An unknown type is named as the field at fault, as any other member.
          [{ ...oauth(receiver.url("/t")), type: "basic" }, "auth.type", "INVALID_REQUEST"]
        ]
        for (const [value, field, code] of certificateCases) {
          const response = yield* send(org, "POST", "/v1/notification-endpoints", {
            url,
            tls_client_certificate: value
          })
          assert.strictEqual(response.status, 400, field)
          assert.strictEqual(response.json.code, code)
          assert.strictEqual(response.json.field, field)
          assert.notInclude(response.text, client.key.split("\n")[1]!)
        }
        for (const [value, field, code] of authCases) {
          const response = yield* send(org, "POST", "/v1/notification-endpoints", { url, auth: value })
          assert.strictEqual(response.status, 400, field)
          assert.strictEqual(response.json.code, code)
          assert.strictEqual(response.json.field, field)
        }
        const clash = yield* send(org, "POST", "/v1/notification-endpoints", {
          url,
          auth: oauth(receiver.url("/t")),
          headers: { Authorization: "Bearer static" }
        })
        assert.strictEqual(clash.status, 400)
        assert.strictEqual(clash.json.field, "headers.Authorization")
        for (
          const [body, field] of [
            [{ auth: oauth(receiver.url("/t")) }, "auth"],
            [
              { tls_client_certificate: { certificate: client.cert, private_key: client.key } },
              "tls_client_certificate"
            ]
          ] as const
        ) {
          const broker = yield* send(org, "POST", "/v1/notification-endpoints", {
            url: "nats://127.0.0.1:4222?subject=svc.events",
            ...body
          })
          assert.strictEqual(broker.status, 400)
          assert.strictEqual(broker.json.field, field)
        }
        assert.deepStrictEqual((yield* org.client.notifications.list()).endpoints, [])

        // PATCH: the same checks; a refused PATCH changes nothing; null removes.
        const { endpoint } = yield* org.client.notifications.create({ payload: { url } })
        assert.isNull(endpoint.auth)
        assert.isNull(endpoint.tls_client_certificate)
        for (const [value, field] of certificateCases) {
          const response = yield* send(org, "PATCH", `/v1/notification-endpoints/${endpoint.id}`, {
            tls_client_certificate: value
          })
          assert.strictEqual(response.status, 400, field)
          assert.strictEqual(response.json.field, field)
        }
        const set = yield* send(org, "PATCH", `/v1/notification-endpoints/${endpoint.id}`, {
          auth: oauth(receiver.url("/t"), { auth_method: "client_secret_post" }),
          tls_client_certificate: { certificate: client.cert, private_key: client.key }
        })
        assert.strictEqual(set.status, 200, set.text)
        assert.strictEqual(set.json.auth.auth_method, "client_secret_post")
        assert.strictEqual(set.json.tls_client_certificate.subject, "CN=svc-client")
        const headerClash = yield* send(org, "PATCH", `/v1/notification-endpoints/${endpoint.id}`, {
          headers: { authorization: "x" }
        })
        assert.strictEqual(headerClash.status, 400)
        assert.strictEqual(headerClash.json.field, "headers.authorization")
        const cleared = yield* org.client.notifications.update({ params: { id: endpoint.id }, payload: { auth: null } })
        assert.isNull(cleared.auth)
        assert.strictEqual(cleared.tls_client_certificate?.subject, "CN=svc-client")
        const svc = yield* SvcTest
        const kinds = yield* svc.sql<{ owner_kind: string }>`
          SELECT DISTINCT owner_kind FROM org_secrets WHERE owner_id = ${endpoint.id} ORDER BY owner_kind
        `
        assert.deepStrictEqual(kinds.map((row) => row.owner_kind), [
          "notification_endpoint",
          "notification_endpoint_certificate",
          "notification_endpoint_url"
        ])
        yield* org.client.notifications.remove({ params: { id: endpoint.id } })
        assert.lengthOf(yield* svc.sql`SELECT 1 FROM org_secrets WHERE owner_id = ${endpoint.id}`, 0)
      }).pipe(Effect.scoped))
  })
  describe("endpoint.certificate_expiring", () => {
    it.effect("a certificate within SVC_WEBHOOK_CERTIFICATE_NOTICE of its end is told to the other endpoints once; a new one again; a later one not", () =>
      Effect.gen(function*() {
        const svc = yield* SvcTest
        const sql = yield* PgClient.PgClient
        const tls = yield* TestTls.shared
        const days = (n: number) => new Date(Date.now() + n * 86_400_000)
        const soon = yield* Effect.promise(() =>
          tls.issueClient("soon", { notBeforeDate: days(-1), notAfterDate: days(10) })
        )
        const later = yield* Effect.promise(() =>
          tls.issueClient("later", { notBeforeDate: days(-1), notAfterDate: days(30) })
        )
        const receiver = yield* HttpsReceiver.make()
        const org = yield* SvcTest.org()
        const admin = yield* org.client.notifications.create({
          payload: { url: receiver.url("/admin"), events: ["endpoint.certificate_expiring"] }
        })
        const pair = (c: { cert: string; key: string }) => ({ certificate: c.cert, private_key: c.key })
        const { endpoint } = yield* org.client.notifications.create({
          payload: { url: receiver.url("/mtls"), tls_client_certificate: pair(soon) }
        })
        const notices = () =>
          svc.sql<{ body: string }>`
            SELECT body FROM events WHERE type = 'endpoint.certificate_expiring' AND about_endpoint = ${endpoint.id} ORDER BY occurred_at
          `
        const notice = yield* receiver.waitFor((r) => r.path === "/admin")
        const body = JSON.parse(new TextDecoder().decode(notice.body))
        assert.strictEqual(body.type, "endpoint.certificate_expiring")
        assert.strictEqual(body.endpoint.id, endpoint.id)
        assert.strictEqual(body.endpoint.certificate_expires_at, endpoint.tls_client_certificate!.not_after)
        assert.match(body.endpoint.reason, /expires within 14d/)
        // Once: the loop of every process finds it told already.
        assert.strictEqual(yield* writeCertificateNotices(sql, Duration.days(14)), 0)
        assert.lengthOf(yield* notices(), 1)
        // A certificate with more time left is not told; a new one near its end is, again.
        yield* org.client.notifications.update({
          params: { id: endpoint.id },
          payload: { tls_client_certificate: pair(later) }
        })
        assert.lengthOf(yield* notices(), 1)
        yield* org.client.notifications.update({
          params: { id: endpoint.id },
          payload: { tls_client_certificate: pair(soon) }
        })
        assert.lengthOf(yield* notices(), 2)
        // Never to the endpoint it is about.
        assert.lengthOf(receiver.requests().filter((r) => r.path === "/mtls"), 0)
        assert.strictEqual(admin.endpoint.events[0], "endpoint.certificate_expiring")
      }).pipe(Effect.scoped))
  })
})
