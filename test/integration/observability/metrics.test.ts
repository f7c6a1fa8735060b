/**
 * The operators' metrics. `/metrics` is scraped both ways
 * (the separate listener and the API port with the token), parsed with a
 * Prometheus text-format parser, and checked for the contract's names,
 * types and labels, for values that move when the events happen, and for
 * labels that never carry an organization's id, a URL or a raw path.
 */
import { assert, describe, layer } from "@effect/vitest"
import { Duration, Effect, Layer, Option, Redacted } from "effect"
import { newId } from "../../../src/platform/Ids.ts"
import { SvcTest } from "../../../src/testing.ts"
import { eventually, raw } from "../../support/http.ts"
import { HttpsReceiver, Reply } from "../../support/HttpsReceiver.ts"
import { family, histogram, labelValues, type Scrape, scrape, value } from "../../support/prometheus.ts"
import { openSse } from "../../support/sse.ts"
import { loopbackTargets, TestTls } from "../../support/tls.ts"

const TOKEN = "metrics-token-0123456789-abcdef"

const Svc = Layer.unwrap(Effect.map(TestTls.shared, (tls) =>
  SvcTest.layer({
    config: {
      ...loopbackTargets(tls),
      webhookRetrySchedule: [Duration.millis(100)],
      metricsToken: Option.some(Redacted.make(TOKEN)),
      metricsPort: Option.some(0),
      metricsHost: "127.0.0.1"
    }
  })))

/** The separate listener's address, from its start-up log line. */
const listenerUrl = Effect.gen(function*() {
  const svc = yield* SvcTest
  const line = svc.logLines().map((l) => JSON.parse(l)).find((l) => l.message === "svc metrics listening")
  assert.isDefined(line, "the metrics listener announces its address")
  return `${line.address as string}/metrics`
})

const viaToken = Effect.flatMap(SvcTest, (svc) => scrape(`${svc.baseUrl}/metrics`, TOKEN))
const viaListener = Effect.flatMap(listenerUrl, (url) => scrape(url))

/** Scrapes the listener until `check` holds (counters move after the event's work is recorded). */
const until = (check: (scraped: Scrape) => boolean, what: string, timeoutMs = 20_000) =>
  eventually(Effect.map(viaListener, (scraped) => check(scraped) ? scraped : undefined), {
    timeoutMs,
    intervalMs: 200,
    what
  })

const httpCount = (scraped: Scrape, method: string, route: string, status: string) =>
  histogram(scraped, "http_server_request_duration_seconds", {
    http_request_method: method,
    http_route: route,
    http_response_status_code: status
  })?.count ?? 0

/** Name, type and exact label names of every metric of the contract. */
const CONTRACT: ReadonlyArray<readonly [name: string, type: string, labels: ReadonlyArray<string>]> = [
  ["http_server_request_duration_seconds", "HISTOGRAM", [
    "http_request_method",
    "http_response_status_code",
    "http_route"
  ]],
  ["svc_deliveries_total", "COUNTER", ["kind", "outcome"]],
  ["svc_delivery_attempts_total", "COUNTER", ["kind", "outcome"]],
  ["svc_delivery_attempt_duration_seconds", "HISTOGRAM", ["kind"]],
  ["svc_delivery_queue_depth", "GAUGE", ["kind"]],
  ["svc_delivery_queue_oldest_age_seconds", "GAUGE", ["kind"]],
  ["svc_delivery_targets_cooling_down", "GAUGE", ["kind"]],
  ["svc_webhook_endpoints_deactivated", "GAUGE", []],
  ["svc_telemetry_spans_exported_total", "COUNTER", ["pipeline"]],
  ["svc_telemetry_spans_dropped_total", "COUNTER", ["pipeline", "reason"]],
  ["svc_telemetry_spans_pending", "GAUGE", ["pipeline"]],
  ["svc_approval_deadlines_fired_total", "COUNTER", ["deadline"]],
  ["svc_approval_scheduler_lag_seconds", "HISTOGRAM", []],
  ["svc_session_streams_open", "GAUGE", ["stream"]],
  ["svc_db_pool_connections_max", "GAUGE", []],
  ["svc_db_statements_total", "COUNTER", []],
  ["svc_db_transactions_total", "COUNTER", []],
  ["svc_db_rows_written_total", "COUNTER", []]
]

const labelNamesOf = (scraped: Scrape, name: string): ReadonlySet<string> =>
  new Set(
    labelValues(scraped).filter((l) => l.family === name || l.family.startsWith(`${name}_`)).map((l) => l.label).filter(
      (l) => l !== "le"
    )
  )

layer(Svc, { excludeTestServices: true })("operators' metrics", (it) => {
  describe("the token rule on the API port", () => {
    it.effect("401 without a bearer token, 403 with another one, the metrics with SVC_METRICS_TOKEN; the token is never logged", () =>
      Effect.gen(function*() {
        const svc = yield* SvcTest
        const org = yield* SvcTest.org()
        const url = `${svc.baseUrl}/metrics`
        const none = yield* raw(url)
        assert.strictEqual(none.status, 401)
        assert.match(none.headers.get("content-type") ?? "", /^application\/problem\+json/)
        assert.strictEqual(none.json.code, "UNAUTHENTICATED")
        assert.match(none.headers.get("www-authenticate") ?? "", /^Bearer/)
        const basic = yield* raw(url, {
          headers: { authorization: `Basic ${Buffer.from(`x:${TOKEN}`).toString("base64")}` }
        })
        assert.strictEqual(basic.status, 401)
        for (const other of [org.key, TOKEN.slice(0, -1), `${TOKEN}x`, TOKEN.toUpperCase()]) {
          const wrong = yield* raw(url, { headers: { authorization: `Bearer ${other}` } })
          assert.strictEqual(
            wrong.status,
            403,
            other === org.key ? "an API key does not open the metrics" : "a near miss"
          )
          assert.strictEqual(wrong.json.code, "FORBIDDEN")
          assert.notInclude(wrong.text, TOKEN)
        }
        const ok = yield* viaToken
        assert.strictEqual(ok.status, 200)
        assert.match(ok.contentType ?? "", /^text\/plain; version=0\.0\.4/)
        assert.isAbove(ok.families.length, 10)
        assert.isFalse(svc.logLines().some((line) => line.includes(TOKEN)), "the token is never logged")
      }))
  })

  describe("both ways of exposing /metrics", () => {
    it.effect("the listener serves GET /metrics only; both parse and carry every metric of the contract with its type and labels", () =>
      Effect.gen(function*() {
        const listener = yield* listenerUrl
        const other = yield* raw(listener.replace(/\/metrics$/, "/v1/tasks"))
        assert.strictEqual(other.status, 404)
        assert.strictEqual(other.json.code, "NOT_FOUND")
        // Traffic, so that the request histogram has series.
        const svc = yield* SvcTest
        yield* raw(`${svc.baseUrl}/health`)
        for (const scraped of [yield* viaListener, yield* viaToken]) {
          assert.strictEqual(scraped.status, 200)
          for (const [name, type, labels] of CONTRACT) {
            const found = family(scraped, name)
            assert.isDefined(found, name)
            assert.strictEqual(found!.type, type, name)
            assert.isNotEmpty(found!.help, name)
            if (labels.length > 0) assert.deepStrictEqual([...labelNamesOf(scraped, name)].sort(), [...labels], name)
          }
          // The standard process metrics come along.
          assert.isDefined(family(scraped, "process_cpu_seconds_total"))
          assert.isDefined(family(scraped, "nodejs_eventloop_lag_seconds"))
        }
      }))
  })

  describe("values move when the events happen", () => {
    it.effect("request durations by route template, method and status; an unknown route is _OTHER", () =>
      Effect.gen(function*() {
        const svc = yield* SvcTest
        const org = yield* SvcTest.org()
        const before = yield* viaListener
        const missing = newId()
        yield* raw(`${svc.baseUrl}/v1/tasks/${missing}`, { headers: { authorization: `Bearer ${org.key}` } })
        yield* raw(`${svc.baseUrl}/v1/tasks/${missing}`, { headers: { authorization: `Bearer ${org.key}` } })
        yield* raw(`${svc.baseUrl}/no/such/${missing}`)
        yield* raw(`${svc.baseUrl}/v1/tasks`, {
          method: "POST",
          headers: { authorization: `Bearer ${org.key}`, "content-type": "application/json" },
          body: "{}"
        })
        const after = yield* viaListener
        assert.strictEqual(
          httpCount(after, "GET", "/v1/tasks/:task_id", "404") - httpCount(before, "GET", "/v1/tasks/:task_id", "404"),
          2
        )
        assert.strictEqual(httpCount(after, "GET", "_OTHER", "404") - httpCount(before, "GET", "_OTHER", "404"), 1)
        assert.strictEqual(
          httpCount(after, "POST", "/v1/tasks", "400") - httpCount(before, "POST", "/v1/tasks", "400"),
          1
        )
        const series = histogram(after, "http_server_request_duration_seconds", {
          http_request_method: "GET",
          http_route: "/v1/tasks/:task_id",
          http_response_status_code: "404"
        })!
        assert.isAbove(series.sum, 0)
        assert.deepStrictEqual(
          Object.keys(series.buckets).sort(),
          [
            "0.005",
            "0.01",
            "0.025",
            "0.05",
            "0.075",
            "0.1",
            "0.25",
            "0.5",
            "0.75",
            "1",
            "2.5",
            "5",
            "7.5",
            "10",
            "+Inf"
          ].sort()
        )
      }))

    it.effect("webhook deliveries and attempts by outcome, a 410 deactivation", () =>
      Effect.gen(function*() {
        const org = yield* SvcTest.org()
        const before = yield* viaListener
        const receiver = yield* HttpsReceiver.make({ respond: () => Reply.status(204) })
        const gone = yield* HttpsReceiver.make({ respond: () => Reply.status(410) })
        yield* org.client.notifications.create({
          payload: { url: receiver.url("/ok"), events: ["approval.requested"] }
        })
        yield* org.client.notifications.create({ payload: { url: gone.url("/gone"), events: ["approval.requested"] } })
        const session = yield* org.client.agentSessions.create({ payload: {} })
        yield* org.client.agentSessions.governStep({
          params: { session_id: session.id },
          payload: { step_id: "s1", tool: "t", action_class: "needs.review", arguments: {} }
        })
        yield* receiver.waitForRequests(1, "20 seconds")
        const delta = (s: Scrape, name: string, labels: Record<string, string>) =>
          (value(s, name, labels) ?? 0) - (value(before, name, labels) ?? 0)
        const after = yield* until(
          (s) =>
            delta(s, "svc_deliveries_total", { kind: "webhook", outcome: "delivered" }) >= 1 &&
            delta(s, "svc_deliveries_total", { kind: "webhook", outcome: "failed" }) >= 1 &&
            delta(s, "svc_webhook_endpoints_deactivated", {}) >= 1,
          "a delivered and a failed webhook, and a deactivated endpoint"
        )
        assert.isAtLeast(delta(after, "svc_delivery_attempts_total", { kind: "webhook", outcome: "delivered" }), 1)
        assert.isAtLeast(delta(after, "svc_delivery_attempts_total", { kind: "webhook", outcome: "failed" }), 1)
        assert.isAtLeast(histogram(after, "svc_delivery_attempt_duration_seconds", { kind: "webhook" })!.count, 2)
      }))

    it.effect("queue depth, age of the oldest undelivered delivery and targets in cooldown, read from the database", () =>
      Effect.gen(function*() {
        const svc = yield* SvcTest
        const org = yield* SvcTest.org()
        const target = newId()
        // A delivery waiting an hour already, not due for another hour, to a target cooling down;
        // the target's row holds its undelivered count, as the enqueue statement keeps it.
        yield* svc.sql`
          INSERT INTO delivery_targets (id, org_id, kind, undelivered, cooldown_until)
          VALUES (${target}, ${org.orgId}, 'email', 1, now() + interval '1 hour')
        `
        yield* svc.sql`
          INSERT INTO deliveries (id, org_id, kind, target_id, status, created_at, next_attempt_at)
          VALUES (${newId()}, ${org.orgId}, 'email', ${target}, 'retrying', now() - interval '1 hour', now() + interval '1 hour')
        `
        const after = yield* until(
          (s) => (value(s, "svc_delivery_queue_depth", { kind: "email" }) ?? 0) >= 1,
          "the queued delivery (within the cache interval)"
        )
        assert.isAtLeast(value(after, "svc_delivery_queue_oldest_age_seconds", { kind: "email" })!, 3600)
        assert.isAtLeast(value(after, "svc_delivery_targets_cooling_down", { kind: "email" })!, 1)
        yield* svc.sql`DELETE FROM deliveries WHERE target_id = ${target}`
        yield* svc.sql`DELETE FROM delivery_targets WHERE id = ${target}`
        const cleared = yield* until(
          (s) => value(s, "svc_delivery_queue_depth", { kind: "email" }) === 0,
          "the queue empty again"
        )
        assert.strictEqual(value(cleared, "svc_delivery_queue_oldest_age_seconds", { kind: "email" }), 0)
        assert.strictEqual(value(cleared, "svc_delivery_targets_cooling_down", { kind: "email" }), 0)
      }))

    it.effect("the database is read at most once per interval, however often it is scraped", () =>
      Effect.gen(function*() {
        const svc = yield* SvcTest
        const org = yield* SvcTest.org()
        const target = newId()
        const first = yield* viaListener
        const readAt = Date.now()
        yield* svc
          .sql`INSERT INTO delivery_targets (id, org_id, kind, undelivered) VALUES (${target}, ${org.orgId}, 'email', 1)`
        yield* svc.sql`
          INSERT INTO deliveries (id, org_id, kind, target_id, status, next_attempt_at)
          VALUES (${newId()}, ${org.orgId}, 'email', ${target}, 'queued', now() + interval '1 hour')
        `
        const scrapes = yield* Effect.all([viaListener, viaToken, viaListener], { concurrency: "unbounded" })
        // Within the 5 s interval every scrape answers from the same read.
        if (Date.now() - readAt < 4_000) {
          for (const s of scrapes) {
            assert.strictEqual(
              value(s, "svc_delivery_queue_depth", { kind: "email" }),
              value(first, "svc_delivery_queue_depth", { kind: "email" })
            )
          }
        }
        yield* until(
          (s) =>
            value(s, "svc_delivery_queue_depth", { kind: "email" }) ===
              (value(first, "svc_delivery_queue_depth", { kind: "email" }) ?? 0) + 1,
          "the next read"
        )
        yield* svc.sql`DELETE FROM deliveries WHERE target_id = ${target}`
        yield* svc.sql`DELETE FROM delivery_targets WHERE id = ${target}`
      }))

    it.effect("spans exported to an organization's destination; spans pending", () =>
      Effect.gen(function*() {
        const org = yield* SvcTest.org()
        const collector = yield* HttpsReceiver.make()
        const before = yield* viaListener
        yield* org.client.telemetry.create({ payload: { url: collector.url("/v1/traces") } })
        yield* org.client.tasks.list({ query: {} })
        yield* collector.waitForRequests(1, "20 seconds")
        const after = yield* until(
          (s) =>
            (value(s, "svc_telemetry_spans_exported_total", { pipeline: "organizations" }) ?? 0) >
              (value(before, "svc_telemetry_spans_exported_total", { pipeline: "organizations" }) ?? 0),
          "exported spans counted"
        )
        assert.isDefined(value(after, "svc_telemetry_spans_pending", { pipeline: "organizations" }))
        assert.strictEqual(
          value(after, "svc_telemetry_spans_dropped_total", { pipeline: "organizations", reason: "buffer_full" }),
          0
        )
      }))

    it.effect("approval deadlines fired by kind, with the scheduler's lag", () =>
      Effect.gen(function*() {
        const org = yield* SvcTest.org()
        const before = yield* viaListener
        yield* org.client.approvalPolicies.put({
          params: { action_class: "quick" },
          payload: { mode: "require_approval", review_seconds: 1, expiring_notice_seconds: 0, timeout_action: "reject" }
        })
        const session = yield* org.client.agentSessions.create({ payload: {} })
        yield* org.client.agentSessions.governStep({
          params: { session_id: session.id },
          payload: { step_id: "q1", tool: "t", action_class: "quick", arguments: {} }
        })
        const expired = (s: Scrape) => value(s, "svc_approval_deadlines_fired_total", { deadline: "expire" }) ?? 0
        const after = yield* until((s) => expired(s) > expired(before), "the expiry fired")
        assert.isAbove(
          histogram(after, "svc_approval_scheduler_lag_seconds")!.count,
          histogram(before, "svc_approval_scheduler_lag_seconds")!.count
        )
      }))

    it.effect("open session streams", () =>
      Effect.gen(function*() {
        const svc = yield* SvcTest
        const org = yield* SvcTest.org()
        const session = yield* org.client.agentSessions.create({ payload: {} })
        const base = value(yield* viaListener, "svc_session_streams_open", { stream: "session" }) ?? 0
        const stream = yield* Effect.promise(() =>
          openSse(`${svc.baseUrl}/v1/agent-sessions/${session.id}/events/stream`, { key: org.key })
        )
        yield* Effect.promise(() => stream.next(5_000))
        yield* until(
          (s) => value(s, "svc_session_streams_open", { stream: "session" }) === base + 1,
          "the stream counted"
        )
        stream.close()
        yield* until((s) => value(s, "svc_session_streams_open", { stream: "session" }) === base, "the stream gone")
      }))

    it.effect("the database pool: its maximum; connections by state on a PostgreSQL server", () =>
      Effect.gen(function*() {
        const svc = yield* SvcTest
        const scraped = yield* viaListener
        if (svc.database === "server") {
          assert.strictEqual(value(scraped, "svc_db_pool_connections_max"), 10)
          for (const state of ["active", "waiting", "idle_in_transaction", "idle"]) {
            assert.isDefined(value(scraped, "svc_db_connections", { state }), state)
          }
        } else {
          assert.strictEqual(value(scraped, "svc_db_pool_connections_max"), 1)
          assert.deepStrictEqual(family(scraped, "svc_db_connections")?.metrics ?? [], [])
        }
      }))
  })

  describe("the database work", () => {
    it.effect("statements, transactions and rows written grow with a write", () =>
      Effect.gen(function*() {
        const svc = yield* SvcTest
        const org = yield* SvcTest.org()
        const before = yield* viaListener
        const created = yield* raw(`${svc.baseUrl}/v1/tasks`, {
          method: "POST",
          headers: { authorization: `Bearer ${org.key}`, "content-type": "application/json" },
          body: JSON.stringify({ name: "work counted", answer_schema: { type: "object" } })
        })
        assert.strictEqual(created.status, 201)
        const after = yield* viaListener
        const grew = (name: string) => (value(after, name) ?? 0) - (value(before, name) ?? 0)
        assert.isAtLeast(grew("svc_db_statements_total"), 1)
        assert.isAtLeast(grew("svc_db_transactions_total"), 1)
        assert.isAtLeast(grew("svc_db_rows_written_total"), 1, "the task's row")
      }))
  })

  describe("bounded labels", () => {
    it.effect("no label carries an organization's id, a URL, a raw path or any id", () =>
      Effect.gen(function*() {
        const svc = yield* SvcTest
        const org = yield* SvcTest.org()
        const receiver = yield* HttpsReceiver.make({ respond: () => Reply.status(204) })
        yield* org.client.notifications.create({ payload: { url: receiver.url(`/hooks/${org.orgId}`) } })
        yield* raw(`${svc.baseUrl}/v1/tasks/${org.orgId}`, { headers: { authorization: `Bearer ${org.key}` } })
        yield* raw(`${svc.baseUrl}/v1/runs/4bf92f3577b34da6a3ce929d0e0e4736?x=${org.orgId}`, {
          headers: { authorization: `Bearer ${org.key}` }
        })
        const orgIds = (yield* svc.sql<{ id: string }>`SELECT id FROM orgs`).map((row) => row.id)
        assert.isNotEmpty(orgIds)
        for (const scraped of [yield* viaListener, yield* viaToken]) {
          const labels = labelValues(scraped)
          assert.isNotEmpty(labels)
          for (const { family: name, label, value: text } of labels) {
            const where = `${name}{${label}="${text}"}`
            for (const id of orgIds) assert.notInclude(text, id, where)
            assert.notMatch(text, /[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/i, where)
            assert.notMatch(text, /[0-9a-f]{32}/i, where)
            assert.notInclude(text, "://", where)
            assert.notInclude(text, "127.0.0.1", where)
            assert.notInclude(text, "?", where)
          }
          const routes = new Set(labels.filter((l) => l.label === "http_route").map((l) => l.value))
          for (const route of routes) assert.match(route, /^(_OTHER|\/[a-z0-9\-._/:]*)$/, route)
        }
      }))
  })
})
