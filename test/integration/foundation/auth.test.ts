import { assert, describe, layer } from "@effect/vitest"
import { Duration, Effect } from "effect"
import { KEY_CACHE_TTL } from "../../../src/identity/Identity.ts"
import { sha256Hex } from "../../../src/platform/Digest.ts"
import { SvcTest } from "../../../src/testing.ts"
import { raw } from "../../support/http.ts"

const schema = { type: "object", properties: { label: { type: "string" } } }

layer(SvcTest.layer(), { excludeTestServices: true })("authentication and authorization", (it) => {
  describe("Authorization: Bearer <key> authenticates every /v1 route", () => {
    it.effect("no key: 401 UNAUTHENTICATED problem with a Bearer challenge", () =>
      Effect.gen(function*() {
        const svc = yield* SvcTest
        const response = yield* raw(`${svc.baseUrl}/v1/tasks`)
        assert.strictEqual(response.status, 401)
        assert.strictEqual(response.headers.get("content-type"), "application/problem+json")
        assert.strictEqual(response.json.code, "UNAUTHENTICATED")
        assert.match(response.headers.get("www-authenticate") ?? "", /^Bearer /)
        const client = yield* svc.client()
        const error = yield* client.tasks.list({ query: {} }).pipe(Effect.flip)
        assert.strictEqual(error._tag, "Unauthenticated")
      }))

    it.effect("unknown key: 401", () =>
      Effect.gen(function*() {
        const svc = yield* SvcTest
        const client = yield* svc.client("svc_" + "A".repeat(43))
        const error = yield* client.tasks.list({ query: {} }).pipe(Effect.flip)
        assert.strictEqual(error._tag, "Unauthenticated")
        const other = yield* raw(`${svc.baseUrl}/v1/tasks`, { headers: { authorization: "Basic Zm9vOmJhcg==" } })
        assert.strictEqual(other.status, 401)
      }))

    it.effect("revoked key: 401 at once in the process that revoked it, though it was just used", () =>
      Effect.gen(function*() {
        const svc = yield* SvcTest
        const org = yield* svc.provisionOrg({ scopes: ["tasks.read"] })
        yield* org.client.tasks.list({ query: {} })
        yield* org.client.tasks.list({ query: {} })
        yield* org.revoke
        const error = yield* org.client.tasks.list({ query: {} }).pipe(Effect.flip)
        assert.strictEqual(error._tag, "Unauthenticated")
      }))

    it.effect("a revocation this process did not make (direct SQL, another process): 401 within KEY_CACHE_TTL", () =>
      Effect.gen(function*() {
        const svc = yield* SvcTest
        const org = yield* svc.provisionOrg({ scopes: ["tasks.read"] })
        yield* org.client.tasks.list({ query: {} })
        yield* svc.sql`UPDATE api_keys SET revoked_at = now() WHERE id = ${org.keyId}`
        const revokedAt = Date.now()
        for (;;) {
          const exit = yield* Effect.exit(org.client.tasks.list({ query: {} }))
          if (exit._tag === "Failure") break
          // The bound, plus room for a loaded machine.
          assert.isBelow(
            Date.now() - revokedAt,
            Duration.toMillis(KEY_CACHE_TTL) + 3_000,
            "still accepted after the bound"
          )
          yield* Effect.sleep("50 millis")
        }
        const error = yield* org.client.tasks.list({ query: {} }).pipe(Effect.flip)
        assert.strictEqual(error._tag, "Unauthenticated")
      }))

    it.effect("a key created a moment ago works at once (unknown keys are not remembered)", () =>
      Effect.gen(function*() {
        const svc = yield* SvcTest
        const org = yield* svc.provisionOrg({ scopes: ["tasks.read"] })
        // Present a key before it exists, then create it: no negative answer is kept.
        const key = "svc_" + "B".repeat(43)
        const before = yield* raw(`${svc.baseUrl}/v1/tasks`, { headers: { authorization: `Bearer ${key}` } })
        assert.strictEqual(before.status, 401)
        yield* svc.sql`
          INSERT INTO api_keys (id, org_id, name, key_hash, key_prefix, scopes)
          VALUES (gen_random_uuid(), ${org.orgId}, 'late', ${sha256Hex(key)}, ${key.slice(0, 12)}, ${["tasks.read"]})
        `
        const after = yield* raw(`${svc.baseUrl}/v1/tasks`, { headers: { authorization: `Bearer ${key}` } })
        assert.strictEqual(after.status, 200)
      }))

    it.effect("health, readiness, OpenAPI and docs need no key", () =>
      Effect.gen(function*() {
        const svc = yield* SvcTest
        for (const path of ["/health", "/ready", "/openapi.json", "/docs"]) {
          const response = yield* raw(`${svc.baseUrl}${path}`)
          assert.strictEqual(response.status, 200, path)
        }
      }))
  })

  describe("scopes", () => {
    it.effect("a key without the needed scope: 403 INSUFFICIENT_SCOPE naming required_scope", () =>
      Effect.gen(function*() {
        const org = yield* SvcTest.org({ scopes: ["tasks.read"] })
        const error = yield* org.client.tasks.create({ payload: { name: "t", answer_schema: schema } }).pipe(
          Effect.flip
        )
        assert.strictEqual(error._tag, "InsufficientScope")
        if (error._tag === "InsufficientScope") {
          assert.strictEqual(error.required_scope, "tasks.write")
          assert.strictEqual(error.code, "INSUFFICIENT_SCOPE")
          assert.strictEqual(error.status, 403)
        }
      }))

    it.effect("each scope permits exactly its operations", () =>
      Effect.gen(function*() {
        const writer = yield* SvcTest.org({ scopes: ["tasks.write"] })
        const task = yield* writer.client.tasks.create({ payload: { name: "t", answer_schema: schema } })
        const reader = yield* writer.newKey(["tasks.read"])
        assert.strictEqual((yield* reader.client.tasks.get({ params: { task_id: task.id } })).id, task.id)
        const noDatasets = yield* reader.client.datasets.listForTask({ params: { task_id: task.id }, query: {} }).pipe(
          Effect.flip
        )
        assert.strictEqual(noDatasets._tag, "InsufficientScope")
        const datasets = yield* writer.newKey(["datasets.read"])
        assert.strictEqual(
          (yield* datasets.client.datasets.listForTask({ params: { task_id: task.id }, query: {} })).datasets.length,
          1
        )
        const cannotLog = yield* reader.client.tasks.logRun({
          params: { task_id: task.id },
          payload: { input: 1, answer: 2 }
        }).pipe(Effect.flip)
        assert.strictEqual(cannotLog._tag, "InsufficientScope")
      }))
  })

  describe("organizations are isolated", () => {
    it.effect("another organization's task, run and dataset are 404, identical to missing ones", () =>
      Effect.gen(function*() {
        const svc = yield* SvcTest
        const a = yield* SvcTest.org()
        const b = yield* SvcTest.org()
        const task = yield* a.client.tasks.create({ payload: { name: "secret task", answer_schema: schema } })
        const run = yield* a.client.tasks.logRun({ params: { task_id: task.id }, payload: { input: {}, answer: {} } })
        const { datasets } = yield* a.client.datasets.listForTask({ params: { task_id: task.id }, query: {} })

        const missingId = "01900000-0000-7000-8000-000000000000"
        const attempts = [
          [`/v1/tasks/${task.id}`, `/v1/tasks/${missingId}`],
          [`/v1/tasks/${task.id}/runs`, `/v1/tasks/${missingId}/runs`],
          [`/v1/runs/${run.trace_id}`, `/v1/runs/${"ab".repeat(16)}`],
          [`/v1/tasks/${task.id}/datasets`, `/v1/tasks/${missingId}/datasets`],
          [`/v1/datasets/${datasets[0]!.id}`, `/v1/datasets/${missingId}`]
        ] as const
        for (const [foreign, missing] of attempts) {
          const x = yield* raw(`${svc.baseUrl}${foreign}`, { headers: { authorization: `Bearer ${b.key}` } })
          const y = yield* raw(`${svc.baseUrl}${missing}`, { headers: { authorization: `Bearer ${b.key}` } })
          assert.strictEqual(x.status, 404, foreign)
          assert.deepStrictEqual(x.json, y.json, foreign)
        }
        const logForeign = yield* b.client.tasks.logRun({
          params: { task_id: task.id },
          payload: { input: 1, answer: 1 }
        }).pipe(Effect.flip)
        assert.strictEqual(logForeign._tag, "NotFound")
        assert.strictEqual((yield* b.client.tasks.list({ query: {} })).tasks.length, 0)
      }))
  })
})
