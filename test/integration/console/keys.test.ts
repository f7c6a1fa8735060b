/**
 * The API keys and console sessions endpoints
 * (scope `keys.manage`), and the reviewer's `feedback.review` scope.
 */
import { assert, describe, layer } from "@effect/vitest"
import { Effect } from "effect"
import { ConsolePresets, Scopes } from "../../../src/api/Security.ts"
import { SvcTest } from "../../../src/testing.ts"
import { asConsole, consoleSession, consoleTestLayer } from "../../support/console.ts"
import { raw } from "../../support/http.ts"

layer(consoleTestLayer({ config: { maxApiKeysPerOrg: 4 } }), { excludeTestServices: true })(
  "API keys and presets",
  (it) => {
    describe("API keys", () => {
      it.effect("create shows the key once; list and revoke never show it; a revoked key stops at once", () =>
        Effect.gen(function*() {
          const svc = yield* SvcTest
          const org = yield* SvcTest.org()
          const created = yield* org.client.apiKeys.create({ payload: { name: "ci", scopes: ["tasks.read"] } })
          assert.match(created.key, /^svc_[A-Za-z0-9_-]{43}$/)
          assert.deepStrictEqual(created.api_key.scopes, ["tasks.read"])
          assert.strictEqual(created.api_key.key_prefix, created.key.slice(0, 12))
          const listResponse = yield* raw(`${svc.baseUrl}/v1/api-keys`, {
            headers: { authorization: `Bearer ${org.key}` }
          })
          assert.strictEqual(listResponse.status, 200)
          assert.notInclude(listResponse.text, created.key)
          assert.notInclude(listResponse.text, org.key)
          assert.include(listResponse.json.keys.map((k: { id: string }) => k.id), created.api_key.id)

          const usable = yield* svc.client(created.key)
          yield* usable.tasks.list({ query: {} })
          const revoked = yield* org.client.apiKeys.revoke({ params: { key_id: created.api_key.id } })
          assert.isString(revoked.revoked_at)
          const after = yield* raw(`${svc.baseUrl}/v1/tasks`, { headers: { authorization: `Bearer ${created.key}` } })
          assert.strictEqual(after.status, 401)
          const listed = yield* org.client.apiKeys.list()
          assert.notInclude(listed.keys.map((k) => k.id), created.api_key.id)
        }))

      it.effect("needs keys.manage; grants only scopes the caller holds; another organization's key is 404; capped", () =>
        Effect.gen(function*() {
          const svc = yield* SvcTest
          const org = yield* SvcTest.org()
          const plain = yield* org.newKey(["tasks.read"])
          const denied = yield* raw(`${svc.baseUrl}/v1/api-keys`, { headers: { authorization: `Bearer ${plain.key}` } })
          assert.strictEqual(denied.status, 403)
          assert.strictEqual(denied.json.required_scope, "keys.manage")

          const manager = yield* org.newKey(["keys.manage", "tasks.read"])
          const escalate = yield* raw(`${svc.baseUrl}/v1/api-keys`, {
            method: "POST",
            headers: { authorization: `Bearer ${manager.key}`, "content-type": "application/json" },
            body: JSON.stringify({ scopes: ["tasks.read", "tasks.write"] })
          })
          assert.strictEqual(escalate.status, 403)
          assert.include(escalate.json, { code: "INSUFFICIENT_SCOPE", required_scope: "tasks.write" })

          const other = yield* SvcTest.org()
          const theirs = yield* raw(`${svc.baseUrl}/v1/api-keys/${other.keyId}`, {
            method: "DELETE",
            headers: { authorization: `Bearer ${org.key}` }
          })
          assert.strictEqual(theirs.status, 404)
          yield* other.client.tasks.list({ query: {} })

          // org has 3 keys (org, plain, manager); the cap is 4.
          yield* org.client.apiKeys.create({ payload: { scopes: ["tasks.read"] } })
          const over = yield* raw(`${svc.baseUrl}/v1/api-keys`, {
            method: "POST",
            headers: { authorization: `Bearer ${org.key}`, "content-type": "application/json" },
            body: JSON.stringify({ scopes: ["tasks.read"] })
          })
          assert.strictEqual(over.status, 409)
          assert.include(over.json, { code: "LIMIT_REACHED", limit: "SVC_MAX_API_KEYS_PER_ORG", limit_value: 4 })
        }))

      it.effect("concurrent creates never pass the cap; a revoked key frees its place", () =>
        Effect.gen(function*() {
          const svc = yield* SvcTest
          const org = yield* SvcTest.org()
          // The org's own key is 1 of 4: 3 places left for 40 concurrent creates.
          const answers = yield* Effect.forEach(
            Array.from({ length: 40 }, (_, i) => i),
            (i) =>
              raw(`${svc.baseUrl}/v1/api-keys`, {
                method: "POST",
                headers: { authorization: `Bearer ${org.key}`, "content-type": "application/json" },
                body: JSON.stringify({ name: `race-${i}`, scopes: ["tasks.read"] })
              }),
            { concurrency: "unbounded" }
          )
          const statuses = answers.map((a) => a.status)
          assert.strictEqual(statuses.filter((s) => s === 201).length, 3, JSON.stringify(statuses))
          assert.strictEqual(statuses.filter((s) => s === 409).length, 37)
          const [row] = yield* svc.sql<{ n: string | number }>`
          SELECT count(*) AS n FROM api_keys WHERE org_id = ${org.orgId} AND revoked_at IS NULL
        `.pipe(Effect.orDie)
          assert.strictEqual(Number(row!.n), 4)

          const first = answers.find((a) => a.status === 201)!
          yield* org.client.apiKeys.revoke({ params: { key_id: first.json.api_key.id } })
          const again = yield* org.client.apiKeys.create({ payload: { scopes: ["tasks.read"] } })
          assert.isString(again.key)
        }))

      it.effect("an admin console session manages keys and sessions; a reviewer session cannot", () =>
        Effect.gen(function*() {
          const svc = yield* SvcTest
          const org = yield* SvcTest.org()
          const admin = yield* consoleSession(svc.baseUrl, org.orgId, "admin")
          const reviewer = yield* consoleSession(svc.baseUrl, org.orgId, "reviewer")
          const created = yield* asConsole(svc.baseUrl, admin.cookie, "POST", "/v1/api-keys", {
            scopes: ["agents.read"]
          })
          assert.strictEqual(created.status, 201, created.text)
          const sessions = yield* asConsole(svc.baseUrl, admin.cookie, "GET", "/v1/console/sessions")
          assert.strictEqual(sessions.status, 200)
          const current = sessions.json.sessions.filter((s: { current: boolean }) => s.current)
          assert.deepStrictEqual(current.map((s: { id: string }) => s.id), [admin.session.session_id])
          assert.strictEqual((yield* asConsole(svc.baseUrl, reviewer.cookie, "GET", "/v1/api-keys")).status, 403)
          assert.strictEqual(
            (yield* asConsole(svc.baseUrl, reviewer.cookie, "GET", "/v1/console/sessions")).status,
            403
          )
        }))
    })

    describe("who made a key", () => {
      it.effect("a key made in a console session records the person (console:<name>) and outlives the session; one made with a key records that key; the CLI's none", () =>
        Effect.gen(function*() {
          const svc = yield* SvcTest
          const org = yield* SvcTest.org()
          const { cookie } = yield* consoleSession(svc.baseUrl, org.orgId, "admin", "Ada Lovelace")
          const made = yield* asConsole(svc.baseUrl, cookie, "POST", "/v1/api-keys", {
            name: "from-console",
            scopes: ["tasks.read"]
          })
          assert.strictEqual(made.status, 201, made.text)
          assert.strictEqual(made.json.api_key.created_by, "console:Ada Lovelace")
          const byKey = yield* org.client.apiKeys.create({ payload: { name: "from-key", scopes: ["tasks.read"] } })
          assert.strictEqual(byKey.api_key.created_by, org.keyId)
          const listed = yield* org.client.apiKeys.list()
          const createdBy = new Map(listed.keys.map((key) => [key.name, key.created_by]))
          assert.strictEqual(createdBy.get("from-console"), "console:Ada Lovelace")
          assert.strictEqual(createdBy.get("from-key"), org.keyId)
          // The organization's first key was made as the CLI makes keys.
          assert.isNull(listed.keys.find((key) => key.id === org.keyId)!.created_by)

          // Signing out ends the session, not the keys it made.
          const out = yield* asConsole(svc.baseUrl, cookie, "POST", "/v1/console/sign-out")
          assert.strictEqual(out.status, 204)
          assert.strictEqual((yield* asConsole(svc.baseUrl, cookie, "GET", "/v1/console/session")).status, 401)
          const still = yield* raw(`${svc.baseUrl}/v1/tasks`, { headers: { authorization: `Bearer ${made.json.key}` } })
          assert.strictEqual(still.status, 200)
        }))
    })

    describe("presets and feedback.review", () => {
      it("admin holds every scope; approver and reviewer exactly theirs", () => {
        assert.sameMembers([...ConsolePresets.admin], [...Scopes])
        assert.sameMembers([...ConsolePresets.approver], ["agents.read", "approvals.decide", "tasks.read"])
        assert.sameMembers([...ConsolePresets.reviewer], [
          "feedback.read",
          "feedback.review",
          "tasks.read",
          "datasets.read"
        ])
      })

      it.effect("feedback.review stages and rejects but does not submit; feedback.write still does all three", () =>
        Effect.gen(function*() {
          const svc = yield* SvcTest
          const org = yield* SvcTest.org()
          const task = yield* org.client.tasks.create({
            payload: { name: "t", answer_schema: { type: "object", properties: { label: { type: "string" } } } }
          })
          const runs = yield* Effect.forEach([1, 2, 3], (n) =>
            org.client.tasks.logRun({
              params: { task_id: task.id },
              payload: { input: { n }, answer: { label: "a" } }
            }))
          const submit = (key: string, traceId: string) =>
            raw(`${svc.baseUrl}/v1/feedback`, {
              method: "POST",
              headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
              body: JSON.stringify({ inference_log_id: traceId, score: -1, correction: { label: "b" } })
            })
          const reviewer = yield* org.newKey(["feedback.review", "feedback.read"])
          const refused = yield* submit(reviewer.key, runs[0]!.trace_id)
          assert.strictEqual(refused.status, 403)
          assert.strictEqual(refused.json.required_scope, "feedback.write")

          const items = yield* Effect.forEach(
            runs,
            (run) => Effect.map(submit(org.key, run.trace_id), (r) => r.json.id as string)
          )
          yield* reviewer.client.feedback.stage({ params: { feedback_id: items[0]! } })
          yield* reviewer.client.feedback.reject({ params: { feedback_id: items[1]! } })
          const writer = yield* org.newKey(["feedback.write"])
          const staged = yield* writer.client.feedback.stage({ params: { feedback_id: items[2]! } })
          assert.strictEqual(staged.status, "staged")

          const neither = yield* org.newKey(["feedback.read"])
          const denied = yield* raw(`${svc.baseUrl}/v1/feedback/${items[0]}/reject`, {
            method: "POST",
            headers: { authorization: `Bearer ${neither.key}` }
          })
          assert.strictEqual(denied.status, 403)
          assert.include(denied.json.detail, "feedback.review")
        }))
    })
  }
)
