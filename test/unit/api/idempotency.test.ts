/**
 * `Idempotency-Key` in the contract: every write operation that
 * authenticates documents the header (its rule as the server checks it) and
 * the problems a key can answer; reads and the operations without an
 * organization (sign-in, links) take no key. The typed client sends a key
 * on every write, a new one per call unless one is given, the same on its
 * own retries, and none on reads.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Schema } from "effect"
import { FetchHttpClient, HttpClient } from "effect/http"
import { OpenApi } from "effect/http-api"
import { createServer, type IncomingHttpHeaders } from "node:http"
import type { AddressInfo } from "node:net"
import { Api } from "../../../src/api/Api.ts"
import { IdempotencyKey } from "../../../src/api/Idempotency.ts"
import { make, withIdempotencyKey } from "../../../src/client.ts"

const doc = OpenApi.fromApi(Api) as unknown as Record<string, any>

const operations = Object.entries(doc.paths as Record<string, Record<string, any>>).flatMap(([path, item]) =>
  Object.entries(item).map(([method, op]) => ({ name: `${method.toUpperCase()} ${path}`, method, op }))
)

const headerOf = (op: Record<string, any>) =>
  (op.parameters as Array<Record<string, any>> | undefined)?.find((p) =>
    p.in === "header" && p.name === "Idempotency-Key"
  )

const WITHOUT_ORGANIZATION = [
  "POST /v1/approval-links/open",
  "POST /v1/approval-links/decision",
  "POST /v1/approval-links/address-confirmation",
  "POST /v1/console/sign-in",
  "POST /v1/console/sign-out"
]

describe("the OpenAPI document", () => {
  it("every write operation (POST, PUT, PATCH, DELETE) that authenticates documents the optional Idempotency-Key header", () => {
    const writes = operations.filter(({ method }) => ["post", "put", "patch", "delete"].includes(method))
    assert.isAtLeast(writes.length, 30)
    const missing = writes.filter(({ name, op }) => headerOf(op) === undefined && !WITHOUT_ORGANIZATION.includes(name))
    assert.deepStrictEqual(missing.map(({ name }) => name), [])
    for (const { name, op } of writes) {
      const header = headerOf(op)
      if (header === undefined) {
        assert.lengthOf(op.security ?? [], 0, `${name} authenticates but takes no key`)
        continue
      }
      assert.isFalse(header.required, name)
      assert.deepInclude(header.schema, { type: "string", minLength: 1, maxLength: 255 }, name)
      const codes = (status: string) => JSON.stringify(op.responses[status] ?? {})
      assert.include(codes("422"), "IDEMPOTENCY_KEY_REUSED", name)
      assert.include(codes("409"), "IDEMPOTENCY_KEY_IN_USE", name)
      assert.include(codes("409"), "IDEMPOTENCY_ANSWER_UNAVAILABLE", name)
    }
  })

  it("reads take no key", () => {
    const reads = operations.filter(({ method }) => method === "get")
    assert.deepStrictEqual(reads.filter(({ op }) => headerOf(op) !== undefined).map(({ name }) => name), [])
  })

  it("the documented rule is the schema the server checks", () => {
    const header = headerOf(operations.find(({ name }) => name === "POST /v1/feedback")!.op)!
    const pattern = new RegExp(header.schema.pattern)
    const samples = [
      "a",
      "0f6c8a52-4c1e-4d2a-9a63-2b1f0c7e5d11",
      "~!@#$%^&*()",
      "x".repeat(255),
      "",
      "x".repeat(256),
      "with space",
      "tab\t",
      "é",
      "line\n"
    ]
    for (const sample of samples) {
      const documented = sample.length >= header.schema.minLength && sample.length <= header.schema.maxLength &&
        pattern.test(sample)
      assert.strictEqual(Schema.is(IdempotencyKey)(sample), documented, JSON.stringify(sample))
    }
  })
})

/** A loopback server that records each request's method and headers and answers `status`. */
const recorder = (status: (n: number) => number) =>
  Effect.acquireRelease(
    Effect.promise(() =>
      new Promise<{ url: string; seen: Array<{ method: string; headers: IncomingHttpHeaders }>; close: () => void }>(
        (resolve) => {
          const seen: Array<{ method: string; headers: IncomingHttpHeaders }> = []
          const server = createServer((request, response) => {
            seen.push({ method: request.method!, headers: request.headers })
            request.resume()
            response.writeHead(status(seen.length), { "content-type": "application/problem+json" })
            response.end(
              JSON.stringify({
                type: "urn:svc:problem:service-unavailable",
                status: 503,
                title: "x",
                code: "SERVICE_UNAVAILABLE"
              })
            )
          })
          server.listen(0, "127.0.0.1", () =>
            resolve({
              url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
              seen,
              close: () => server.close()
            }))
        }
      )
    ),
    (server) => Effect.sync(server.close)
  )

describe("the typed client", () => {
  it.effect("sends a new key on each write call, the same key on its own retries, and none on reads", () =>
    Effect.gen(function*() {
      const server = yield* recorder((n) => n === 1 ? 503 : 400)
      const client = yield* make({
        baseUrl: server.url,
        apiKey: "svc_test",
        transformClient: HttpClient.retryTransient({ retryOn: "response-only", times: 1 })
      })
      const payload = { inference_log_id: "0af7651916cd43dd8448eb211c80319c", score: 1 as const }
      yield* Effect.exit(client.feedback.submit({ payload }))
      yield* Effect.exit(client.feedback.submit({ payload }))
      yield* Effect.exit(client.feedback.list({ query: {} }))
      const keys = server.seen.map((request) => request.headers["idempotency-key"])
      assert.strictEqual(server.seen.length, 4)
      assert.isString(keys[0])
      assert.strictEqual(keys[1], keys[0], "the retry of the first call sends its key")
      assert.isString(keys[2])
      assert.notStrictEqual(keys[2], keys[0], "a new call, a new key")
      assert.isUndefined(keys[3], "a read sends none")
    }).pipe(Effect.provide(FetchHttpClient.layer), Effect.scoped))

  it.effect("withIdempotencyKey sends the caller's key", () =>
    Effect.gen(function*() {
      const server = yield* recorder(() => 400)
      const client = yield* make({ baseUrl: server.url, apiKey: "svc_test" })
      const payload = { inference_log_id: "0af7651916cd43dd8448eb211c80319c", score: 1 as const }
      yield* Effect.exit(client.feedback.submit({ payload }).pipe(withIdempotencyKey("order-42-score")))
      assert.strictEqual(server.seen[0]!.headers["idempotency-key"], "order-42-score")
    }).pipe(Effect.provide(FetchHttpClient.layer), Effect.scoped))
})
