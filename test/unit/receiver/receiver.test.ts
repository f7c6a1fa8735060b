/**
 * The receiver kit (`@svc/receiver`) on Node under vitest:
 * its portable suite (signature, tolerance, reasons, limits, deduplication,
 * the fetch handler; also run on Deno, Bun and workerd by test/runtimes/receiver.test.ts)
 * on the TypeScript source, a property test of header parsing, and the
 * Effect variant.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { HttpServerRequest } from "effect/http"
import * as fc from "fast-check"
import { readdirSync, readFileSync } from "node:fs"
import { SvcWebhooks } from "../../../packages/receiver/src/effect.ts"
import * as kit from "../../../packages/receiver/src/index.ts"
import {
  constructEvent,
  EVENT_TYPES,
  parseSignatureHeader,
  WebhookVerificationError
} from "../../../packages/receiver/src/index.ts"
import { runSuite } from "../../../packages/receiver/test/suite.ts"
import { EventTypes } from "../../../src/api/Notifications.ts"
import { newSigningSecret, signatureHeader } from "../../../src/notifications/send/Signing.ts"
import { eventBody, receiverOrgId, signedVectors } from "../../support/receiverVectors.ts"

const orgId = receiverOrgId
const event = eventBody
const secret = newSigningSecret()
const now = 1_800_000_000
const at = (seconds: number) => ({ now: seconds * 1000 })

const reason = (promise: Promise<unknown>) =>
  promise.then(
    () => "accepted",
    (error: unknown) => error instanceof WebhookVerificationError ? error.reason : `other: ${String(error)}`
  )

describe("@svc/receiver", () => {
  it("imports nothing but its own modules: nothing at run time beyond Web Crypto (the Effect entry point aside)", () => {
    const dir = new URL("../../../packages/receiver/src/", import.meta.url)
    const files = readdirSync(dir).filter((name) => name.endsWith(".ts") && name !== "effect.ts")
    assert.includeMembers(files, ["index.ts", "events.ts", "verify.ts"])
    for (const name of files) {
      const source = readFileSync(new URL(name, dir), "utf8")
      for (const match of source.matchAll(/^\s*(?:import|export)\b[^"']*?from\s+["']([^"']+)["']/gm)) {
        assert.match(match[1]!, /^\.\/[\w-]+\.ts$/, `${name} imports ${match[1]}`)
      }
      assert.notMatch(source, /require\(|import\(/, name)
    }
    assert.deepStrictEqual([...EVENT_TYPES], [...EventTypes])
  })

  it("the portable suite passes on the TypeScript source too (it runs on every runtime in test/runtimes/receiver.test.ts)", async () => {
    const result = await runSuite("vitest", kit, signedVectors(secret, now))
    assert.deepStrictEqual(result.failed, [])
    assert.isAbove(result.passed.length, 10)
  })

  it("property: arbitrary headers and bodies are refused with a WebhookVerificationError, never accepted or thrown otherwise", async () => {
    await fc.assert(
      fc.asyncProperty(fc.string(), fc.string(), async (header, body) => {
        const result = await reason(constructEvent(body, header, secret, at(now)))
        return result === "malformed_header" || result === "bad_signature"
      }),
      { numRuns: 300 }
    )
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: 99_999_999_999 }),
        fc.array(fc.stringMatching(/^[0-9a-f]{64}$/), { minLength: 1, maxLength: 3 }),
        (t, sigs) => {
          const parsed = parseSignatureHeader([`t=${t}`, ...sigs.map((s) => `v1=${s}`), "v0=ignored"].join(","))
          return parsed.timestamp === t && parsed.signatures.join() === sigs.join()
        }
      )
    )
  })

  it.effect("the Effect variant fails with a typed WebhookRejected", () =>
    Effect.gen(function*() {
      const body = event()
      const ok = yield* SvcWebhooks.constructEvent(body, signatureHeader([secret], now, body), secret, at(now))
      assert.strictEqual(ok.type, "approval.requested")
      const rejected = yield* Effect.flip(
        SvcWebhooks.constructEvent(body, signatureHeader([secret], now + 1000, body), secret, at(now))
      )
      assert.strictEqual(rejected._tag, "WebhookRejected")
      assert.strictEqual(rejected.reason, "timestamp_outside_tolerance")
      // In an Effect HTTP handler: the raw body and header of the current request.
      const request = HttpServerRequest.fromWeb(
        new Request("https://receiver.example/hook", {
          method: "POST",
          headers: { "x-svc-signature": signatureHeader([secret], now, body) },
          body
        })
      )
      const fromRequest = yield* SvcWebhooks.fromRequest({ secret, ...at(now), expectedOrgId: orgId }).pipe(
        Effect.provideService(HttpServerRequest.HttpServerRequest, request)
      )
      assert.strictEqual(fromRequest.id, JSON.parse(body).id)
    }))

  it.effect("the Effect variant reads at most maxBodyBytes of the request and says body_too_large", () =>
    Effect.gen(function*() {
      const body = event()
      let pulled = 0
      const endless = new ReadableStream<Uint8Array>({
        pull(controller) {
          pulled += 4096
          controller.enqueue(new Uint8Array(4096))
        }
      })
      const request = HttpServerRequest.fromWeb(
        new Request("https://receiver.example/hook", {
          method: "POST",
          headers: { "x-svc-signature": signatureHeader([secret], now, body) },
          body: endless,
          duplex: "half"
        } as RequestInit)
      )
      const rejected = yield* Effect.flip(
        SvcWebhooks.fromRequest({ secret, ...at(now), maxBodyBytes: 64 * 1024 }).pipe(
          Effect.provideService(HttpServerRequest.HttpServerRequest, request)
        )
      )
      assert.strictEqual(rejected.reason, "body_too_large")
      assert.isAtMost(pulled, 64 * 1024 + 4 * 4096)
    }))
})
