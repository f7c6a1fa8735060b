/**
 * Notification endpoints API: create, list, PATCH, DELETE, secret rotation, scopes,
 * other organizations, and the public HTTPS address checks on create.
 */
import { assert, describe, layer } from "@effect/vitest"
import { Effect, Layer } from "effect"
import { SqlClient } from "effect/sql"
import { DefaultEventTypes } from "../../../src/api/Notifications.ts"
import { Resolver } from "../../../src/outbound/Resolver.ts"
import { SvcTest } from "../../../src/testing.ts"
import { fixedResolver } from "../../support/dns.ts"
import { raw } from "../../support/http.ts"
import { blockedNameUrls, encodedLoopbackUrls, nonPublicCorpus } from "../../support/ssrfCorpus.ts"
import { eventBody, insertEvents, waitForDeliveries, webhookService } from "./support.ts"

const hookUrl = "https://127.0.0.1:9/hooks/secret-path-token?sig=abc"

layer(webhookService(), { excludeTestServices: true })("notification endpoints", (it) => {
  describe("create", () => {
    it.effect("answers 201 with the endpoint and a whsec_ secret shown only then; omitted events subscribe to all six", () =>
      Effect.gen(function*() {
        const svc = yield* SvcTest
        const org = yield* SvcTest.org()
        const response = yield* raw(`${svc.baseUrl}/v1/notification-endpoints`, {
          method: "POST",
          headers: { authorization: `Bearer ${org.key}`, "content-type": "application/json" },
          body: JSON.stringify({ url: hookUrl })
        })
        assert.strictEqual(response.status, 201)
        const { endpoint, secret } = response.json
        assert.match(secret, /^whsec_[A-Za-z0-9+/]{43}=$/)
        assert.deepStrictEqual(endpoint.events, [...DefaultEventTypes])
        assert.strictEqual(endpoint.active, true)
        assert.strictEqual(endpoint.created_by, org.keyId)
        assert.isString(endpoint.created_at)
        assert.deepStrictEqual(Object.keys(endpoint).sort(), [
          "action_classes",
          "active",
          "auth",
          "created_at",
          "created_by",
          "events",
          "headers",
          "id",
          "ordering",
          "rate_limit",
          "tls_client_certificate",
          "url_hint"
        ])
        assert.isNull(endpoint.auth)
        assert.isNull(endpoint.tls_client_certificate)
        assert.notInclude(endpoint.url_hint, "secret-path-token")
        assert.notInclude(endpoint.url_hint, "sig=abc")

        // Nothing returns the full URL or the secret afterwards.
        const list = yield* raw(`${svc.baseUrl}/v1/notification-endpoints`, {
          headers: { authorization: `Bearer ${org.key}` }
        })
        assert.strictEqual(list.status, 200)
        assert.strictEqual(list.json.email_notifier, false)
        assert.deepStrictEqual(list.json.endpoints, [endpoint])
        assert.notInclude(list.text, secret)
        assert.notInclude(list.text, "secret-path-token")

        // The secret and the URL are sealed at rest.
        const rows = yield* svc.sql<
          { dump: string }
        >`SELECT row_to_json(org_secrets)::text AS dump FROM org_secrets WHERE owner_id = ${endpoint.id}`
        assert.strictEqual(rows.length, 2)
        for (const row of rows) {
          assert.notInclude(row.dump, secret.slice(6))
          assert.notInclude(row.dump, "secret-path-token")
        }
        assert.isFalse(svc.logLines().some((line) => line.includes(secret)))
      }))

    it.effect("an empty or unknown events list is 400 INVALID_WEBHOOK_EVENTS naming the entry, on create and on PATCH", () =>
      Effect.gen(function*() {
        const svc = yield* SvcTest
        const org = yield* SvcTest.org()
        const send = (method: string, path: string, body: unknown) =>
          raw(`${svc.baseUrl}${path}`, {
            method,
            headers: { authorization: `Bearer ${org.key}`, "content-type": "application/json" },
            body: JSON.stringify(body)
          })
        const empty = yield* send("POST", "/v1/notification-endpoints", { url: hookUrl, events: [] })
        assert.strictEqual(empty.status, 400)
        assert.strictEqual(empty.json.code, "INVALID_WEBHOOK_EVENTS")
        assert.strictEqual(empty.json.field, "events")
        const unknown = yield* send("POST", "/v1/notification-endpoints", {
          url: hookUrl,
          events: ["approval.requested", "approval.deleted"]
        })
        assert.strictEqual(unknown.status, 400)
        assert.strictEqual(unknown.json.code, "INVALID_WEBHOOK_EVENTS")
        assert.strictEqual(unknown.json.field, "events[1]")
        assert.include(unknown.json.supported, "approval.requested")
        const { endpoint } = yield* org.client.notifications.create({
          payload: { url: hookUrl, events: ["approval.approved"] }
        })
        for (const events of [[], ["approval.requested", "task.created"]]) {
          const error = yield* send("PATCH", `/v1/notification-endpoints/${endpoint.id}`, { events })
          assert.strictEqual(error.json.code, "INVALID_WEBHOOK_EVENTS")
        }
        // The typed client knows the rule too: it refuses an unknown type before sending.
        const refused = yield* Effect.flip(
          org.client.notifications.create({ payload: { url: hookUrl, events: ["task.created" as never] } })
        )
        assert.notStrictEqual((refused as { code?: string }).code, "INVALID_WEBHOOK_EVENTS")
        assert.strictEqual((yield* org.client.notifications.list()).endpoints.length, 1)
      }))

    it.effect("a long unknown event name or an oversized list is INVALID_WEBHOOK_EVENTS too, not a generic decode error", () =>
      Effect.gen(function*() {
        const svc = yield* SvcTest
        const org = yield* SvcTest.org()
        for (
          const events of [
            ["approval." + "x".repeat(200)],
            Array.from({ length: 21 }, () => "approval.requested")
          ]
        ) {
          const response = yield* raw(`${svc.baseUrl}/v1/notification-endpoints`, {
            method: "POST",
            headers: { authorization: `Bearer ${org.key}`, "content-type": "application/json" },
            body: JSON.stringify({ url: hookUrl, events })
          })
          assert.strictEqual(response.status, 400)
          assert.strictEqual(response.json.code, "INVALID_WEBHOOK_EVENTS")
        }
        assert.deepStrictEqual((yield* org.client.notifications.list()).endpoints, [])
      }))
  })

  describe("PATCH, DELETE and rotation", () => {
    it.effect("PATCH replaces the selection; address hint and secret stay; answers 200 with the masked endpoint", () =>
      Effect.gen(function*() {
        const svc = yield* SvcTest
        const org = yield* SvcTest.org()
        const { endpoint } = yield* org.client.notifications.create({
          payload: { url: hookUrl, events: ["approval.requested", "approval.expiring"] }
        })
        const secretsBefore = yield* svc.sql<{ id: string }>`SELECT id FROM org_secrets WHERE owner_id = ${endpoint.id}`
        const response = yield* raw(`${svc.baseUrl}/v1/notification-endpoints/${endpoint.id}`, {
          method: "PATCH",
          headers: { authorization: `Bearer ${org.key}`, "content-type": "application/json" },
          body: JSON.stringify({ events: ["approval.approved", "approval.rejected", "approval.approved"] })
        })
        assert.strictEqual(response.status, 200)
        assert.deepStrictEqual(response.json.events, ["approval.approved", "approval.rejected"])
        assert.strictEqual(response.json.url_hint, endpoint.url_hint)
        const secretsAfter = yield* svc.sql<{ id: string }>`SELECT id FROM org_secrets WHERE owner_id = ${endpoint.id}`
        assert.deepStrictEqual(secretsAfter, secretsBefore)
        const missing = yield* Effect.flip(
          org.client.notifications.update({
            params: { id: "0193a0a0-0000-7000-8000-000000000000" },
            payload: { events: ["approval.approved"] }
          })
        )
        assert.strictEqual(missing._tag, "NotFound")
      }))

    it.effect("DELETE answers 204, then 404; the endpoint, its secrets and the queue's target are gone", () =>
      Effect.gen(function*() {
        const svc = yield* SvcTest
        const org = yield* SvcTest.org()
        // Strict: the queue keeps a target row for it from the start.
        const { endpoint } = yield* org.client.notifications.create({ payload: { url: hookUrl, ordering: "strict" } })
        assert.lengthOf(yield* svc.sql`SELECT 1 FROM delivery_targets WHERE id = ${endpoint.id}`, 1)
        const first = yield* raw(`${svc.baseUrl}/v1/notification-endpoints/${endpoint.id}`, {
          method: "DELETE",
          headers: { authorization: `Bearer ${org.key}` }
        })
        assert.strictEqual(first.status, 204)
        const again = yield* Effect.flip(org.client.notifications.remove({ params: { id: endpoint.id } }))
        assert.strictEqual(again._tag, "NotFound")
        assert.deepStrictEqual((yield* org.client.notifications.list()).endpoints, [])
        const secrets = yield* svc.sql`SELECT 1 FROM org_secrets WHERE owner_id = ${endpoint.id}`
        assert.strictEqual(secrets.length, 0)
        assert.lengthOf(yield* svc.sql`SELECT 1 FROM delivery_targets WHERE id = ${endpoint.id}`, 0)
      }))

    it.effect("rotate-secret returns a new secret once and says until when the previous one still signs", () =>
      Effect.gen(function*() {
        const svc = yield* SvcTest
        const org = yield* SvcTest.org()
        const { endpoint, secret } = yield* org.client.notifications.create({ payload: { url: hookUrl } })
        const before = Date.now()
        const rotated = yield* org.client.notifications.rotateSecret({
          params: { id: endpoint.id },
          payload: { overlap_seconds: 3600 }
        })
        assert.match(rotated.secret, /^whsec_/)
        assert.notStrictEqual(rotated.secret, secret)
        const expires = new Date(rotated.previous_secret_expires_at).getTime()
        assert.isAtLeast(expires, before + 3_599_000)
        const live = yield* svc.sql<{ n: number }>`
          SELECT count(*)::int AS n FROM org_secrets
          WHERE owner_id = ${endpoint.id} AND owner_kind = 'notification_endpoint' AND (expires_at IS NULL OR expires_at > now())
        `
        assert.strictEqual(live[0]!.n, 2)
        const list = yield* raw(`${svc.baseUrl}/v1/notification-endpoints`, {
          headers: { authorization: `Bearer ${org.key}` }
        })
        assert.notInclude(list.text, rotated.secret)
      }))
  })

  describe("scopes and organizations", () => {
    it.effect("org_config.read lists; creating, editing and deleting need org_config.write", () =>
      Effect.gen(function*() {
        const org = yield* SvcTest.org()
        const { endpoint } = yield* org.client.notifications.create({ payload: { url: hookUrl } })
        const reader = yield* org.newKey(["org_config.read"])
        assert.strictEqual((yield* reader.client.notifications.list()).endpoints.length, 1)
        assert.strictEqual(
          (yield* reader.client.notifications.deliveries({ params: { id: endpoint.id }, query: {} })).deliveries.length,
          0
        )
        const denied = yield* Effect.flip(reader.client.notifications.create({ payload: { url: hookUrl } }))
        assert.strictEqual(denied._tag, "InsufficientScope")
        const patch = yield* Effect.flip(
          reader.client.notifications.update({
            params: { id: endpoint.id },
            payload: { events: ["approval.approved"] }
          })
        )
        assert.strictEqual(patch._tag, "InsufficientScope")
        const none = yield* org.newKey(["tasks.read"])
        assert.strictEqual((yield* Effect.flip(none.client.notifications.list()))._tag, "InsufficientScope")
      }))

    it.effect("another organization's endpoint is 404 for PATCH, DELETE, rotate, deliveries and replay, and absent from its list", () =>
      Effect.gen(function*() {
        const owner = yield* SvcTest.org()
        const other = yield* SvcTest.org()
        const { endpoint } = yield* owner.client.notifications.create({ payload: { url: hookUrl } })
        const params = { id: endpoint.id }
        const errors = [
          yield* Effect.flip(other.client.notifications.update({ params, payload: { events: ["approval.approved"] } })),
          yield* Effect.flip(other.client.notifications.remove({ params })),
          yield* Effect.flip(other.client.notifications.rotateSecret({ params, payload: {} })),
          yield* Effect.flip(other.client.notifications.deliveries({ params, query: {} })),
          yield* Effect.flip(other.client.notifications.replay({ params: { id: endpoint.id, delivery: endpoint.id } }))
        ]
        assert.deepStrictEqual(errors.map((e) => e._tag), ["NotFound", "NotFound", "NotFound", "NotFound", "NotFound"])
        assert.deepStrictEqual((yield* other.client.notifications.list()).endpoints, [])
        assert.strictEqual((yield* owner.client.notifications.list()).endpoints[0]!.events.length, 6)
      }))
  })

  describe("reviewer email address", () => {
    it.effect("is set and cleared through the API; email_notifier stays false without SVC_SMTP_URL", () =>
      Effect.gen(function*() {
        const org = yield* SvcTest.org()
        const set = yield* org.client.notifications.updateSettings({
          payload: { reviewer_email: "reviewers@example.com" }
        })
        assert.deepStrictEqual(set, {
          reviewer_email: "reviewers@example.com",
          reviewer_email_status: "pending",
          email_notifier: false
        })
        assert.strictEqual((yield* org.client.notifications.list()).email_notifier, false)
        const svc = yield* SvcTest
        const bad = yield* raw(`${svc.baseUrl}/v1/notification-settings`, {
          method: "PUT",
          headers: { authorization: `Bearer ${org.key}`, "content-type": "application/json" },
          body: JSON.stringify({ reviewer_email: "not an address" })
        })
        assert.strictEqual(bad.status, 400)
        assert.strictEqual(bad.json.code, "INVALID_REQUEST")
        const cleared = yield* org.client.notifications.updateSettings({ payload: { reviewer_email: null } })
        assert.deepStrictEqual(cleared, { reviewer_email: null, reviewer_email_status: null, email_notifier: false })
      }))
  })
})

// The guard as it stands in production: no allowed private ranges, and a
// name that resolves to loopback.
const guarded = webhookService({ allowedTargetCidrs: [] }).pipe(
  Layer.provide(Layer.succeed(
    Resolver,
    fixedResolver({
      "loopback.example.com": ["127.0.0.1"],
      "mixed.example.com": ["93.184.215.14", "10.0.0.1"],
      "rebind.example.com": ["169.254.169.254"],
      // Public when the endpoint is created, metadata at send time (DNS rebinding).
      "rebinding.example.com": (call) => (call === 1 ? ["93.184.215.14"] : ["169.254.169.254"])
    })
  ))
)

layer(guarded, { excludeTestServices: true })("public HTTPS address checks on create", (it) => {
  // Sent as is (the typed client refuses a URL the document's pattern forbids before sending it).
  const refuse = (url: string) =>
    Effect.gen(function*() {
      const svc = yield* SvcTest
      const org = yield* SvcTest.org()
      const response = yield* raw(`${svc.baseUrl}/v1/notification-endpoints`, {
        method: "POST",
        headers: { authorization: `Bearer ${org.key}`, "content-type": "application/json" },
        body: JSON.stringify({ url })
      })
      assert.strictEqual(response.status, 400, url)
      assert.strictEqual(response.json.code, "INVALID_URL", url)
      assert.strictEqual(response.json.field, "url", url)
      assert.deepStrictEqual((yield* org.client.notifications.list()).endpoints, [])
    })

  it.effect("refuses http, credentials in the URL, and other schemes", () =>
    Effect.gen(function*() {
      for (
        const url of [
          "http://hooks.example.com/x",
          "https://user:pass@hooks.example.com/x",
          "https://user@hooks.example.com/x",
          "ftp://hooks.example.com/x",
          "not a url"
        ]
      ) yield* refuse(url)
    }))

  it.effect("refuses every non-public address class of the corpus", () =>
    Effect.gen(function*() {
      for (const [, address] of nonPublicCorpus) {
        yield* refuse(address.includes(":") ? `https://[${address}]/hook` : `https://${address}/hook`)
      }
    }))

  it.effect("refuses encoded loopback and metadata forms, metadata names, and names resolving to non-public addresses", () =>
    Effect.gen(function*() {
      for (const url of [...encodedLoopbackUrls, ...blockedNameUrls]) yield* refuse(url)
      yield* refuse("https://loopback.example.com/hook")
      yield* refuse("https://mixed.example.com/hook")
      yield* refuse("https://rebind.example.com/hook")
    }))

  it.effect("the address is checked again at every send: a name that now resolves to a metadata address is a failed attempt", () =>
    Effect.gen(function*() {
      const org = yield* SvcTest.org()
      const { endpoint } = yield* org.client.notifications.create({
        payload: { url: "https://rebinding.example.com/hook" }
      })
      yield* insertEvents([eventBody(org.orgId, "approval.requested")])
      const [row] = yield* waitForDeliveries(
        endpoint.id,
        (rows) => (rows[0]?.attempts ?? 0) >= 1 && rows[0]!.status !== "sending"
      )
      assert.include(row!.last_error!, "non-public")
      const sql = yield* SqlClient.SqlClient
      const attempts = yield* sql<
        { status_code: number | null; error: string }
      >`SELECT status_code, error FROM delivery_attempts WHERE delivery_id = ${row!.id}`
      assert.isNull(attempts[0]!.status_code)
    }))

  it.effect("accepts a public HTTPS address", () =>
    Effect.gen(function*() {
      const org = yield* SvcTest.org()
      const created = yield* org.client.notifications.create({ payload: { url: "https://93.184.215.14/hooks/abc" } })
      assert.strictEqual(created.endpoint.active, true)
      const sql = yield* SqlClient.SqlClient
      // The URL is a secret: sealed in the secret store, its column empty.
      const [row] = yield* sql<
        { url: string }
      >`SELECT url FROM notification_endpoints WHERE id = ${created.endpoint.id}`
      assert.strictEqual(row!.url, "")
      const stored = yield* sql<{ sealed: string }>`
        SELECT sealed FROM org_secrets WHERE owner_id = ${created.endpoint.id} AND owner_kind = 'notification_endpoint_url'
      `
      assert.strictEqual(stored.length, 1)
      assert.notInclude(stored[0]!.sealed, "hooks/abc")
    }))
})
