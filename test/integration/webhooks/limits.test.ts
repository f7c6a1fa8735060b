/**
 * Per-organization caps on what a tenant could inflate to hurt others:
 * notification endpoints (each one more signed POST per event), approval
 * policies (all listed in one answer), tasks, and signing secrets in use per
 * endpoint (each one more HMAC and `v1=` per delivery). Counted safely under
 * concurrent creates, on PGlite and on a PostgreSQL server.
 */
import { assert, describe, layer } from "@effect/vitest"
import { Effect } from "effect"
import { createHmac } from "node:crypto"
import { SvcTest, type TestOrg } from "../../../src/testing.ts"
import { raw } from "../../support/http.ts"
import { HttpsReceiver } from "../../support/HttpsReceiver.ts"
import { eventBody, insertEvents, webhookService } from "./support.ts"

const MAX_ENDPOINTS = 5
const MAX_POLICIES = 3
const MAX_TASKS = 3
/** `SVC_WEBHOOK_MAX_SIGNING_SECRETS` by default. */
const MAX_SIGNING_SECRETS = 3

/** Which of `secrets` signed a delivery's `X-Svc-Signature` (HMAC-SHA256 of `t.body`, keyed with the secret string). */
const signedBy = (
  request: { readonly headers: Record<string, string | undefined>; readonly body: Uint8Array },
  secrets: ReadonlyArray<string>
) => {
  const header = request.headers["x-svc-signature"]!
  const t = /t=(\d+)/.exec(header)![1]!
  const signatures = [...header.matchAll(/v1=([0-9a-f]+)/g)].map((m) => m[1]!)
  return {
    count: signatures.length,
    by: secrets.map((secret) =>
      signatures.includes(createHmac("sha256", secret).update(`${t}.`).update(request.body).digest("hex"))
    )
  }
}

const send = (org: TestOrg, method: string, path: string, body: unknown) =>
  Effect.flatMap(SvcTest, (svc) =>
    raw(`${svc.baseUrl}${path}`, {
      method,
      headers: { authorization: `Bearer ${org.key}`, "content-type": "application/json" },
      body: JSON.stringify(body)
    }))

const policy = { mode: "allow", review_seconds: 60, expiring_notice_seconds: 0, timeout_action: "reject" }

layer(
  webhookService({
    maxEndpointsPerOrg: MAX_ENDPOINTS,
    maxApprovalPoliciesPerOrg: MAX_POLICIES,
    maxTasksPerOrg: MAX_TASKS
  }),
  { excludeTestServices: true }
)("per-organization caps", (it) => {
  describe("notification endpoints per organization (SVC_MAX_ENDPOINTS_PER_ORG)", () => {
    it.effect("one more than the cap is 409 LIMIT_REACHED naming the limit; deleting one makes room; other organizations are unaffected", () =>
      Effect.gen(function*() {
        const receiver = yield* HttpsReceiver.make()
        const org = yield* SvcTest.org()
        const ids: Array<string> = []
        for (let i = 0; i < MAX_ENDPOINTS; i++) {
          ids.push((yield* org.client.notifications.create({ payload: { url: receiver.url(`/e${i}`) } })).endpoint.id)
        }
        const over = yield* send(org, "POST", "/v1/notification-endpoints", { url: receiver.url("/one-more") })
        assert.strictEqual(over.status, 409)
        assert.strictEqual(over.json.code, "LIMIT_REACHED")
        assert.strictEqual(over.json.limit, "SVC_MAX_ENDPOINTS_PER_ORG")
        assert.strictEqual(over.json.limit_value, MAX_ENDPOINTS)
        assert.notInclude(over.text, "whsec_")
        const typed = yield* org.client.notifications.create({ payload: { url: receiver.url("/typed") } }).pipe(
          Effect.flip
        )
        assert.strictEqual(typed._tag, "LimitReached")

        const other = yield* SvcTest.org()
        yield* other.client.notifications.create({ payload: { url: receiver.url("/other") } })

        yield* org.client.notifications.remove({ params: { id: ids[0]! } })
        yield* org.client.notifications.create({ payload: { url: receiver.url("/after-delete") } })
        const list = yield* org.client.notifications.list()
        assert.strictEqual(list.endpoints.length, MAX_ENDPOINTS)
      }))

    it.effect("concurrent creates never pass the cap", () =>
      Effect.gen(function*() {
        const receiver = yield* HttpsReceiver.make()
        const svc = yield* SvcTest
        const org = yield* SvcTest.org()
        const answers = yield* Effect.forEach(
          Array.from({ length: 4 * MAX_ENDPOINTS }, (_, i) => i),
          (i) => send(org, "POST", "/v1/notification-endpoints", { url: receiver.url(`/race${i}`) }),
          { concurrency: "unbounded" }
        )
        const statuses = answers.map((a) => a.status)
        assert.strictEqual(statuses.filter((s) => s === 201).length, MAX_ENDPOINTS, JSON.stringify(statuses))
        assert.strictEqual(statuses.filter((s) => s === 409).length, 3 * MAX_ENDPOINTS)
        const [row] = yield* svc.sql<
          { n: string | number }
        >`SELECT count(*) AS n FROM notification_endpoints WHERE org_id = ${org.orgId}`.pipe(Effect.orDie)
        assert.strictEqual(Number(row!.n), MAX_ENDPOINTS)
      }))
  })

  describe("approval policies per organization (SVC_MAX_APPROVAL_POLICIES_PER_ORG)", () => {
    it.effect("a policy for one more action class is 409 naming the limit; changing an existing policy still works", () =>
      Effect.gen(function*() {
        const org = yield* SvcTest.org()
        for (let i = 0; i < MAX_POLICIES; i++) {
          const put = yield* send(org, "PUT", `/v1/approval-policies/class.${i}`, policy)
          assert.strictEqual(put.status, 200, put.text)
        }
        const over = yield* send(org, "PUT", "/v1/approval-policies/class.new", policy)
        assert.strictEqual(over.status, 409)
        assert.strictEqual(over.json.code, "LIMIT_REACHED")
        assert.strictEqual(over.json.limit, "SVC_MAX_APPROVAL_POLICIES_PER_ORG")
        const change = yield* send(org, "PUT", "/v1/approval-policies/class.0", { ...policy, mode: "reject" })
        assert.strictEqual(change.status, 200, change.text)
        assert.strictEqual(change.json.mode, "reject")
      }))
  })

  describe("tasks per organization (SVC_MAX_TASKS_PER_ORG)", () => {
    it.effect("one more task than the cap is 409 naming the limit", () =>
      Effect.gen(function*() {
        const org = yield* SvcTest.org()
        const answers = yield* Effect.forEach(
          Array.from({ length: MAX_TASKS + 3 }, (_, i) => i),
          (i) => send(org, "POST", "/v1/tasks", { name: `t${i}`, answer_schema: { type: "object" } }),
          { concurrency: "unbounded" }
        )
        assert.strictEqual(answers.filter((a) => a.status === 201).length, MAX_TASKS)
        const over = answers.find((a) => a.status !== 201)!
        assert.strictEqual(over.status, 409)
        assert.strictEqual(over.json.limit, "SVC_MAX_TASKS_PER_ORG")
        assert.strictEqual(over.json.limit_value, MAX_TASKS)
      }))
  })

  describe(`signing secrets in use per endpoint (SVC_WEBHOOK_MAX_SIGNING_SECRETS, ${MAX_SIGNING_SECRETS} by default)`, () => {
    it.effect("a rotation with overlap 0 ends the secret signing until then, never an older one still in its announced overlap", () =>
      Effect.gen(function*() {
        const receiver = yield* HttpsReceiver.make()
        const org = yield* SvcTest.org()
        const { endpoint, secret: first } = yield* org.client.notifications.create({
          payload: { url: receiver.url("/kept") }
        })
        const params = { id: endpoint.id }
        const second =
          (yield* org.client.notifications.rotateSecret({ params, payload: { overlap_seconds: 86400 } })).secret
        const third = (yield* org.client.notifications.rotateSecret({ params, payload: { overlap_seconds: 0 } })).secret
        yield* insertEvents([eventBody(org.orgId, "approval.requested")])
        const [request] = yield* receiver.waitForRequests(1)
        // The first secret was announced to sign for a day: a receiver still on it verifies.
        assert.deepStrictEqual(signedBy(request!, [third, second, first]), { count: 2, by: [true, false, true] })
      }))

    it.effect(`a rotation that would make more than ${MAX_SIGNING_SECRETS} secrets sign is 409 LIMIT_REACHED naming the setting; expire_previous: "all" ends the oldest instead`, () =>
      Effect.gen(function*() {
        const receiver = yield* HttpsReceiver.make()
        const org = yield* SvcTest.org()
        const { endpoint, secret: first } = yield* org.client.notifications.create({
          payload: { url: receiver.url("/capped") }
        })
        const params = { id: endpoint.id }
        const secrets = [first]
        for (let i = 1; i < MAX_SIGNING_SECRETS; i++) {
          secrets.unshift(
            (yield* org.client.notifications.rotateSecret({ params, payload: { overlap_seconds: 86400 } })).secret
          )
        }
        const over = yield* send(org, "POST", `/v1/notification-endpoints/${endpoint.id}/rotate-secret`, {
          overlap_seconds: 86400
        })
        assert.strictEqual(over.status, 409)
        assert.strictEqual(over.json.code, "LIMIT_REACHED")
        assert.strictEqual(over.json.limit, "SVC_WEBHOOK_MAX_SIGNING_SECRETS")
        assert.strictEqual(over.json.limit_value, MAX_SIGNING_SECRETS)
        assert.include(over.json.detail, "expire_previous")
        assert.notInclude(over.text, "whsec_")

        const newest = (yield* org.client.notifications.rotateSecret({
          params,
          payload: { overlap_seconds: 86400, expire_previous: "all" }
        })).secret
        yield* insertEvents([eventBody(org.orgId, "approval.requested")])
        const [request] = yield* receiver.waitForRequests(1)
        // The newest and the two before it; the first ended at once.
        assert.deepStrictEqual(signedBy(request!, [newest, ...secrets]), {
          count: MAX_SIGNING_SECRETS,
          by: [true, true, true, false]
        })
      }))

    it.effect("expire_previous: \"all\" with overlap 0 ends every earlier secret at once", () =>
      Effect.gen(function*() {
        const receiver = yield* HttpsReceiver.make()
        const org = yield* SvcTest.org()
        const { endpoint, secret: first } = yield* org.client.notifications.create({
          payload: { url: receiver.url("/all") }
        })
        const params = { id: endpoint.id }
        const second =
          (yield* org.client.notifications.rotateSecret({ params, payload: { overlap_seconds: 86400 } })).secret
        const third = (yield* org.client.notifications.rotateSecret({
          params,
          payload: { overlap_seconds: 0, expire_previous: "all" }
        })).secret
        yield* insertEvents([eventBody(org.orgId, "approval.requested")])
        const [request] = yield* receiver.waitForRequests(1)
        assert.deepStrictEqual(signedBy(request!, [third, second, first]), { count: 1, by: [true, false, false] })
      }))

    it.effect(`at the cap, a rotation with overlap 0 is taken: the secret signing until then ends, so no more than ${MAX_SIGNING_SECRETS} sign`, () =>
      Effect.gen(function*() {
        const receiver = yield* HttpsReceiver.make()
        const org = yield* SvcTest.org()
        const { endpoint, secret: first } = yield* org.client.notifications.create({
          payload: { url: receiver.url("/emergency") }
        })
        const params = { id: endpoint.id }
        const second =
          (yield* org.client.notifications.rotateSecret({ params, payload: { overlap_seconds: 86400 } })).secret
        const third =
          (yield* org.client.notifications.rotateSecret({ params, payload: { overlap_seconds: 86400 } })).secret
        const emergency = yield* send(org, "POST", `/v1/notification-endpoints/${endpoint.id}/rotate-secret`, {
          overlap_seconds: 0
        })
        assert.strictEqual(emergency.status, 200, emergency.text)
        const fourth = emergency.json.secret as string
        yield* insertEvents([eventBody(org.orgId, "approval.requested")])
        const [request] = yield* receiver.waitForRequests(1)
        // The third (signing until now) ended at once; the first two keep the end they were announced.
        assert.deepStrictEqual(signedBy(request!, [fourth, third, second, first]), {
          count: 3,
          by: [true, false, true, true]
        })
      }))

    it.effect("at the cap, overlap 0 with expire_previous: \"all\" ends every earlier secret at once", () =>
      Effect.gen(function*() {
        const receiver = yield* HttpsReceiver.make()
        const org = yield* SvcTest.org()
        const { endpoint, secret: first } = yield* org.client.notifications.create({
          payload: { url: receiver.url("/leaked") }
        })
        const params = { id: endpoint.id }
        const earlier = [first]
        for (let i = 1; i < MAX_SIGNING_SECRETS; i++) {
          earlier.unshift(
            (yield* org.client.notifications.rotateSecret({ params, payload: { overlap_seconds: 86400 } })).secret
          )
        }
        const only = yield* org.client.notifications.rotateSecret({
          params,
          payload: { overlap_seconds: 0, expire_previous: "all" }
        })
        yield* insertEvents([eventBody(org.orgId, "approval.requested")])
        const [request] = yield* receiver.waitForRequests(1)
        assert.deepStrictEqual(signedBy(request!, [only.secret, ...earlier]), {
          count: 1,
          by: [true, false, false, false]
        })
      }))

    it.effect(`20 concurrent rotations never leave more than ${MAX_SIGNING_SECRETS} secrets signing, whichever earlier secrets they end`, () =>
      Effect.gen(function*() {
        const receiver = yield* HttpsReceiver.make()
        const org = yield* SvcTest.org()
        const modes = ["latest", "all"] as const
        const rotated: Array<ReadonlyArray<string>> = []
        for (const expire_previous of modes) {
          const { endpoint } = yield* org.client.notifications.create({
            payload: { url: receiver.url(`/concurrent-${expire_previous}`) }
          })
          const path = `/v1/notification-endpoints/${endpoint.id}/rotate-secret`
          const answers = yield* Effect.all(
            Array.from({ length: 20 }, () => send(org, "POST", path, { overlap_seconds: 86400, expire_previous })),
            { concurrency: "unbounded" }
          )
          const statuses = answers.map((answer) => answer.status)
          // `latest` refuses what would pass the cap; `all` ends the oldest instead.
          const allowed = expire_previous === "all" ? [200] : [200, 409]
          assert.isTrue(
            statuses.every((status) => allowed.includes(status)),
            `${expire_previous}: ${statuses.join(" ")}`
          )
          rotated.push(answers.filter((answer) => answer.status === 200).map((answer) => answer.json.secret as string))
        }
        yield* insertEvents([eventBody(org.orgId, "approval.requested")])
        const requests = yield* receiver.waitForRequests(2)
        for (const [i, expire_previous] of modes.entries()) {
          const request = requests.find((r) => r.path.endsWith(`/concurrent-${expire_previous}`))!
          const signed = signedBy(request, rotated[i]!)
          const count = request.headers["x-svc-signature"]!.match(/v1=/g)!.length
          assert.isAtMost(count, MAX_SIGNING_SECRETS, `${expire_previous}: ${count} secrets sign`)
          assert.isTrue(signed.by.some(Boolean), `${expire_previous}: a secret a rotation returned signs`)
        }
      }))

    it.effect("rotating again and again with expire_previous: \"all\" never makes a delivery carry more signatures", () =>
      Effect.gen(function*() {
        const receiver = yield* HttpsReceiver.make()
        const org = yield* SvcTest.org()
        const { endpoint } = yield* org.client.notifications.create({ payload: { url: receiver.url("/rotated") } })
        let newest = ""
        for (let i = 0; i < 6; i++) {
          newest = (yield* org.client.notifications.rotateSecret({
            params: { id: endpoint.id },
            payload: { overlap_seconds: 86400, expire_previous: "all" }
          })).secret
        }
        yield* insertEvents([eventBody(org.orgId, "approval.requested")])
        const [request] = yield* receiver.waitForRequests(1)
        const signature = request!.headers["x-svc-signature"]!
        assert.strictEqual(signature.match(/v1=/g)?.length, MAX_SIGNING_SECRETS)
        assert.isString(newest)
      }))
  })
})
