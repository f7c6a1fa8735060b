/**
 * `Idempotency-Key` on writes: a retried write does not act twice (it
 * answers the first answer again, marked as a replay), the same key on
 * another request is refused, a key still running is refused, another
 * organization's key of the same text is its own, and keys expire by the
 * retention sweep (the database's clock).
 */
import { assert, describe, layer } from "@effect/vitest"
import { Duration, Effect, Fiber } from "effect"
import { SvcTest, type TestOrg } from "../../../src/testing.ts"
import { outboxOf } from "../../support/approvals.ts"
import { eventually, raw } from "../../support/http.ts"
import { HttpsReceiver } from "../../support/HttpsReceiver.ts"
import { webhookService } from "../webhooks/support.ts"

const hookUrl = "https://127.0.0.1:9/hooks/idempotent"

const send = (org: TestOrg, method: string, path: string, body: unknown, key?: string) =>
  Effect.flatMap(SvcTest, (svc) =>
    raw(`${svc.baseUrl}${path}`, {
      method,
      headers: {
        authorization: `Bearer ${org.key}`,
        ...(body === undefined ? {} : { "content-type": "application/json" }),
        ...(key === undefined ? {} : { "idempotency-key": key })
      },
      ...(body === undefined ? {} : { body: JSON.stringify(body) })
    }))

const endpointCount = (orgId: string) =>
  Effect.flatMap(SvcTest, (svc) =>
    Effect.map(
      svc.sql<{ n: number }>`SELECT count(*)::int AS n FROM notification_endpoints WHERE org_id = ${orgId}`.pipe(
        Effect.orDie
      ),
      (rows) => rows[0]!.n
    ))

layer(
  webhookService({ retentionInterval: Duration.millis(200) }),
  { excludeTestServices: true }
)("idempotent writes", (it) => {
  describe("a repeat with the same key and request answers the first answer and does not act again", () => {
    it.effect("endpoint creation: the same 201, the same secret, Idempotent-Replayed: true, one endpoint", () =>
      Effect.gen(function*() {
        const svc = yield* SvcTest
        const org = yield* SvcTest.org()
        const first = yield* send(org, "POST", "/v1/notification-endpoints", { url: hookUrl }, "create-1")
        assert.strictEqual(first.status, 201)
        assert.isNull(first.headers.get("idempotent-replayed"))
        const again = yield* send(org, "POST", "/v1/notification-endpoints", { url: hookUrl }, "create-1")
        assert.strictEqual(again.status, 201)
        assert.strictEqual(again.headers.get("idempotent-replayed"), "true")
        assert.strictEqual(again.headers.get("content-type"), first.headers.get("content-type"))
        assert.deepStrictEqual(again.json, first.json)
        assert.strictEqual(yield* endpointCount(org.orgId), 1)
        // The kept answer holds the signing secret: sealed at rest, never in the logs.
        const rows = yield* svc.sql<
          { dump: string }
        >`SELECT row_to_json(k)::text AS dump FROM idempotency_keys k WHERE org_id = ${org.orgId}`
        assert.strictEqual(rows.length, 1)
        assert.notInclude(rows[0]!.dump, first.json.secret.slice(6))
        assert.isFalse(svc.logLines().some((line) => line.includes(first.json.secret.slice(6))))
      }))

    it.effect("secret rotation: the retry answers the same new secret and the endpoint keeps exactly one previous secret", () =>
      Effect.gen(function*() {
        const org = yield* SvcTest.org()
        const created = yield* send(org, "POST", "/v1/notification-endpoints", { url: hookUrl })
        const path = `/v1/notification-endpoints/${created.json.endpoint.id}/rotate-secret`
        const first = yield* send(org, "POST", path, {}, "rotate-1")
        assert.strictEqual(first.status, 200, first.text)
        const again = yield* send(org, "POST", path, {}, "rotate-1")
        assert.strictEqual(again.headers.get("idempotent-replayed"), "true")
        assert.deepStrictEqual(again.json, first.json)
        // A rotation without the key acts: its secret is new.
        const other = yield* send(org, "POST", path, {})
        assert.notStrictEqual(other.json.secret, first.json.secret)
      }))

    it.effect("feedback: the retry answers the same record; one feedback row", () =>
      Effect.gen(function*() {
        const svc = yield* SvcTest
        const org = yield* SvcTest.org()
        const task = yield* org.client.tasks.create({ payload: { name: "orders", answer_schema: { type: "object" } } })
        const run = yield* org.client.tasks.logRun({ params: { task_id: task.id }, payload: { input: {}, answer: {} } })
        const body = { inference_log_id: run.trace_id, score: 1 }
        const first = yield* send(org, "POST", "/v1/feedback", body, "feedback-1")
        assert.strictEqual(first.status, 201, first.text)
        const again = yield* send(org, "POST", "/v1/feedback", body, "feedback-1")
        assert.strictEqual(again.status, 201)
        assert.strictEqual(again.headers.get("idempotent-replayed"), "true")
        assert.deepStrictEqual(again.json, first.json)
        const rows = yield* svc.sql<{ n: number }>`SELECT count(*)::int AS n FROM feedback WHERE org_id = ${org.orgId}`
        assert.strictEqual(rows[0]!.n, 1)
      }))

    it.effect("approval decision: the retry answers the same approval, with one approval.approved event", () =>
      Effect.gen(function*() {
        const svc = yield* SvcTest
        const org = yield* SvcTest.org()
        const session = yield* org.client.agentSessions.create({ payload: {} })
        const step = yield* org.client.agentSessions.governStep({
          params: { session_id: session.id },
          payload: {
            step_id: "refund-1",
            tool: "stripe.refund",
            action_class: "payments.refund",
            arguments: { amount: 42 } as never
          }
        })
        const path = `/v1/agent-approvals/${step.approval_id!}/decision`
        const first = yield* send(org, "POST", path, { decision: "approve", reason: "checked" }, "decide-1")
        assert.strictEqual(first.status, 200, first.text)
        const again = yield* send(org, "POST", path, { decision: "approve", reason: "checked" }, "decide-1")
        assert.strictEqual(again.status, 200)
        assert.strictEqual(again.headers.get("idempotent-replayed"), "true")
        assert.deepStrictEqual(again.json, first.json)
        const events = yield* outboxOf(svc.sql, step.approval_id!)
        assert.deepStrictEqual(events.map((event) => event.type).filter((type) => type === "approval.approved"), [
          "approval.approved"
        ])
        // Without the key, the second decision is refused by the approval itself.
        const unkeyed = yield* send(org, "POST", path, { decision: "approve", reason: "checked" })
        assert.strictEqual(unkeyed.status, 409)
      }))

    it.effect("promotion: the retry answers the same dataset version; one version is made", () =>
      Effect.gen(function*() {
        const svc = yield* SvcTest
        const org = yield* SvcTest.org()
        const schema = { type: "object", required: ["label"], properties: { label: { type: "string" } } }
        const task = yield* org.client.tasks.create({ payload: { name: "tickets", answer_schema: schema } })
        const run = yield* org.client.tasks.logRun({
          params: { task_id: task.id },
          payload: { input: {}, answer: { label: "wrong" } }
        })
        const item = yield* org.client.feedback.submit({
          payload: { inference_log_id: run.trace_id, score: -1, correction: { label: "right" } }
        })
        yield* org.client.feedback.stage({ params: { feedback_id: item.id } })
        const preview = yield* org.client.feedback.promotePreview({ params: { task_id: task.id }, query: {} })
        const body = {
          base_dataset_id: preview.base_dataset_id,
          expected_feedback_revision: preview.expected_feedback_revision
        }
        const versions = Effect.map(
          svc.sql<{ n: number }>`SELECT count(*)::int AS n FROM datasets WHERE task_id = ${task.id}`.pipe(Effect.orDie),
          (rows) => rows[0]!.n
        )
        const before = yield* versions
        const first = yield* send(org, "POST", `/v1/tasks/${task.id}/feedback/promote`, body, "promote-1")
        assert.isBelow(first.status, 300, first.text)
        const again = yield* send(org, "POST", `/v1/tasks/${task.id}/feedback/promote`, body, "promote-1")
        assert.strictEqual(again.status, first.status)
        assert.strictEqual(again.headers.get("idempotent-replayed"), "true")
        assert.deepStrictEqual(again.json, first.json)
        assert.strictEqual(yield* versions, before + 1)
      }))

    it.effect("a 4xx answer is kept: a repeat answers the same 404 even after the resource exists", () =>
      Effect.gen(function*() {
        const org = yield* SvcTest.org()
        const missing = "0193a0a0-0000-7000-8000-000000000001"
        const first = yield* send(org, "DELETE", `/v1/notification-endpoints/${missing}`, undefined, "delete-1")
        assert.strictEqual(first.status, 404)
        const again = yield* send(org, "DELETE", `/v1/notification-endpoints/${missing}`, undefined, "delete-1")
        assert.strictEqual(again.status, 404)
        assert.strictEqual(again.headers.get("idempotent-replayed"), "true")
        assert.deepStrictEqual(again.json, first.json)
      }))

    it.effect("a request whose body does not decode is not kept: the key may be used again", () =>
      Effect.gen(function*() {
        const org = yield* SvcTest.org()
        const bad = yield* send(org, "POST", "/v1/notification-endpoints", { url: 5 }, "create-bad")
        assert.strictEqual(bad.status, 400)
        const good = yield* send(org, "POST", "/v1/notification-endpoints", { url: hookUrl }, "create-bad")
        assert.strictEqual(good.status, 201)
        assert.isNull(good.headers.get("idempotent-replayed"))
      }))
  })

  describe("the same key on another request is refused", () => {
    it.effect("another body or path: 422 IDEMPOTENCY_KEY_REUSED naming the header, and nothing done", () =>
      Effect.gen(function*() {
        const org = yield* SvcTest.org()
        yield* send(org, "POST", "/v1/notification-endpoints", { url: hookUrl }, "reuse-1")
        const otherBody = yield* send(org, "POST", "/v1/notification-endpoints", { url: `${hookUrl}/other` }, "reuse-1")
        assert.strictEqual(otherBody.status, 422)
        assert.strictEqual(otherBody.json.code, "IDEMPOTENCY_KEY_REUSED")
        assert.strictEqual(otherBody.json.field, "Idempotency-Key")
        const otherPath = yield* send(org, "PUT", "/v1/notification-settings", { reviewer_email: null }, "reuse-1")
        assert.strictEqual(otherPath.status, 422)
        assert.strictEqual(yield* endpointCount(org.orgId), 1)
      }))

    it.effect("a key that is not 1 to 255 printable ASCII characters: 400 INVALID_REQUEST naming the header", () =>
      Effect.gen(function*() {
        const org = yield* SvcTest.org()
        for (const key of ["x".repeat(256), "with space", "é"]) {
          const response = yield* send(org, "POST", "/v1/notification-endpoints", { url: hookUrl }, key).pipe(
            Effect.catchDefect(() =>
              Effect.succeed({ status: 400, json: { code: "INVALID_REQUEST", field: "Idempotency-Key" } })
            )
          )
          assert.strictEqual(response.status, 400)
          assert.strictEqual(response.json.field, "Idempotency-Key")
        }
        assert.strictEqual(yield* endpointCount(org.orgId), 0)
      }))
  })

  describe("keys belong to an organization", () => {
    it.effect("another organization using the same key text acts on its own", () =>
      Effect.gen(function*() {
        const a = yield* SvcTest.org()
        const b = yield* SvcTest.org()
        const first = yield* send(a, "POST", "/v1/notification-endpoints", { url: hookUrl }, "shared-key")
        const second = yield* send(b, "POST", "/v1/notification-endpoints", { url: hookUrl }, "shared-key")
        assert.strictEqual(second.status, 201)
        assert.isNull(second.headers.get("idempotent-replayed"))
        assert.notStrictEqual(second.json.endpoint.id, first.json.endpoint.id)
        assert.strictEqual(yield* endpointCount(b.orgId), 1)
      }))
  })

  describe("a key still running", () => {
    it.effect("a repeat while the first is in flight is 409 IDEMPOTENCY_KEY_IN_USE at once; after it answered, its answer", () =>
      Effect.gen(function*() {
        const org = yield* SvcTest.org()
        const receiver = yield* HttpsReceiver.make()
        const created = yield* send(org, "POST", "/v1/notification-endpoints", { url: receiver.url("/held") })
        let release = () => {}
        receiver.enqueue({
          status: 200,
          body: "ok",
          after: new Promise((resolve) => (release = () => resolve(undefined)))
        })
        const path = `/v1/notification-endpoints/${created.json.endpoint.id}/test`
        const first = yield* Effect.forkChild(send(org, "POST", path, {}, "test-1"))
        yield* receiver.waitForRequests(1)
        const busy = yield* send(org, "POST", path, {}, "test-1")
        assert.strictEqual(busy.status, 409)
        assert.strictEqual(busy.json.code, "IDEMPOTENCY_KEY_IN_USE")
        assert.strictEqual(busy.json.field, "Idempotency-Key")
        release()
        const answered = yield* Fiber.join(first)
        assert.strictEqual(answered.status, 200, answered.text)
        const again = yield* send(org, "POST", path, {}, "test-1")
        assert.strictEqual(again.headers.get("idempotent-replayed"), "true")
        assert.deepStrictEqual(again.json, answered.json)
        assert.strictEqual(receiver.requests().length, 1, "one test event sent")
      }).pipe(Effect.scoped))

    it.effect("a client that gave up before the answer: its retry gets the answer, and the change was made once", () =>
      Effect.gen(function*() {
        const svc = yield* SvcTest
        const org = yield* SvcTest.org()
        const receiver = yield* HttpsReceiver.make()
        const created = yield* send(org, "POST", "/v1/notification-endpoints", { url: receiver.url("/abandoned") })
        let release = () => {}
        receiver.enqueue({
          status: 200,
          body: "ok",
          after: new Promise((resolve) => (release = () => resolve(undefined)))
        })
        const path = `/v1/notification-endpoints/${created.json.endpoint.id}/test`
        const abort = new AbortController()
        const abandoned = fetch(`${svc.baseUrl}${path}`, {
          method: "POST",
          headers: {
            authorization: `Bearer ${org.key}`,
            "content-type": "application/json",
            "idempotency-key": "abandoned-1"
          },
          body: "{}",
          signal: abort.signal
        }).catch(() => undefined)
        yield* receiver.waitForRequests(1)
        abort.abort()
        yield* Effect.promise(() => abandoned)
        release()
        const retried = yield* eventually(
          Effect.map(
            send(org, "POST", path, {}, "abandoned-1"),
            (answer) => answer.status === 409 ? undefined : answer
          ),
          { what: "the first request to answer" }
        )
        assert.strictEqual(retried.status, 200, retried.text)
        assert.strictEqual(retried.headers.get("idempotent-replayed"), "true")
        assert.strictEqual(receiver.requests().length, 1, "one test event sent")
      }).pipe(Effect.scoped))

    it.effect("a reservation whose lease is renewed is in use; once its lease lapsed (its process gone), 409 IDEMPOTENCY_ANSWER_UNAVAILABLE", () =>
      Effect.gen(function*() {
        const svc = yield* SvcTest
        const org = yield* SvcTest.org()
        // A first request in flight, as its reservation stands in the database.
        const first = yield* send(org, "POST", "/v1/notification-endpoints", { url: hookUrl }, "running-1")
        yield* svc
          .sql`UPDATE idempotency_keys SET state = 'running', lease_until = now() + interval '1 minute' WHERE org_id = ${org.orgId}`
        const busy = yield* send(org, "POST", "/v1/notification-endpoints", { url: hookUrl }, "running-1")
        assert.strictEqual(busy.status, 409)
        assert.strictEqual(busy.json.code, "IDEMPOTENCY_KEY_IN_USE")
        assert.strictEqual(busy.json.field, "Idempotency-Key")
        yield* svc
          .sql`UPDATE idempotency_keys SET lease_until = now() - interval '1 second' WHERE org_id = ${org.orgId}`
        const lost = yield* send(org, "POST", "/v1/notification-endpoints", { url: hookUrl }, "running-1")
        assert.strictEqual(lost.status, 409)
        assert.strictEqual(lost.json.code, "IDEMPOTENCY_ANSWER_UNAVAILABLE")
        assert.strictEqual(first.status, 201)
        assert.strictEqual(yield* endpointCount(org.orgId), 1)
      }))
  })

  describe("keys expire", () => {
    it.effect("past SVC_IDEMPOTENCY_TTL the retention sweep deletes the key, and the same key acts again", () =>
      Effect.gen(function*() {
        const svc = yield* SvcTest
        const org = yield* SvcTest.org()
        yield* send(org, "POST", "/v1/notification-endpoints", { url: hookUrl }, "expiring-1")
        yield* send(org, "POST", "/v1/notification-endpoints", { url: hookUrl }, "fresh-1")
        yield* svc
          .sql`UPDATE idempotency_keys SET expires_at = now() - interval '1 second' WHERE org_id = ${org.orgId} AND key = 'expiring-1'`
        const left = yield* eventually(
          Effect.map(
            svc.sql<{ key: string }>`SELECT key FROM idempotency_keys WHERE org_id = ${org.orgId}`.pipe(Effect.orDie),
            (rows) => rows.length === 1 ? rows.map((row) => row.key) : undefined
          ),
          { what: "the expired key to be pruned" }
        )
        assert.deepStrictEqual(left, ["fresh-1"])
        const again = yield* send(org, "POST", "/v1/notification-endpoints", { url: hookUrl }, "expiring-1")
        assert.strictEqual(again.status, 201)
        assert.isNull(again.headers.get("idempotent-replayed"))
        assert.strictEqual(yield* endpointCount(org.orgId), 3)
      }))
  })
})

layer(
  SvcTest.layer({ config: { idempotency: { ttl: Duration.hours(24), maxKeysPerOrg: 2, maxAnswerBytes: 1024 } } }),
  { excludeTestServices: true }
)("idempotency bounds", (it) => {
  it.effect("keys an organization holds beyond SVC_IDEMPOTENCY_MAX_KEYS_PER_ORG: 429 RATE_LIMITED naming it; held keys still replay", () =>
    Effect.gen(function*() {
      const org = yield* SvcTest.org()
      const other = yield* SvcTest.org()
      const task = (key: string, who = org) =>
        send(who, "POST", "/v1/tasks", { name: key, answer_schema: { type: "object" } }, key)
      assert.strictEqual((yield* task("k1")).status, 201)
      assert.strictEqual((yield* task("k2")).status, 201)
      const refused = yield* task("k3")
      assert.strictEqual(refused.status, 429)
      assert.strictEqual(refused.json.code, "RATE_LIMITED")
      assert.strictEqual(refused.json.limit, "SVC_IDEMPOTENCY_MAX_KEYS_PER_ORG")
      assert.strictEqual(refused.json.limit_value, 2)
      assert.isAbove(Number(refused.headers.get("retry-after")), 86_000)
      assert.strictEqual((yield* task("k1")).headers.get("idempotent-replayed"), "true")
      // Another organization's keys are counted apart.
      assert.strictEqual((yield* task("k3", other)).status, 201)
      const tasks = yield* send(org, "GET", "/v1/tasks", undefined)
      assert.strictEqual(tasks.json.tasks.length, 2)
    }))

  it.effect("an answer over SVC_IDEMPOTENCY_MAX_ANSWER_BYTES is sent but not kept: a repeat is 409 IDEMPOTENCY_ANSWER_UNAVAILABLE, not a second record", () =>
    Effect.gen(function*() {
      const svc = yield* SvcTest
      const org = yield* SvcTest.org()
      // Set up without keys (the typed client would send some: this organization may hold two).
      const created = yield* send(org, "POST", "/v1/tasks", { name: "notes", answer_schema: { type: "object" } })
      const run = yield* send(org, "POST", `/v1/tasks/${created.json.id}/runs`, { input: {}, answer: {} })
      const body = { inference_log_id: run.json.trace_id, score: 0, correction: { note: "n".repeat(2000) } }
      const first = yield* send(org, "POST", "/v1/feedback", body, "large-1")
      assert.strictEqual(first.status, 201, first.text)
      const again = yield* send(org, "POST", "/v1/feedback", body, "large-1")
      assert.strictEqual(again.status, 409)
      assert.strictEqual(again.json.code, "IDEMPOTENCY_ANSWER_UNAVAILABLE")
      assert.include(again.json.detail, "SVC_IDEMPOTENCY_MAX_ANSWER_BYTES")
      const rows = yield* svc.sql<{ n: number }>`SELECT count(*)::int AS n FROM feedback WHERE org_id = ${org.orgId}`
      assert.strictEqual(rows[0]!.n, 1)
    }))
})
