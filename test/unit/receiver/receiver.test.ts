/**
 * The receiver kit (`svc/receiver`, issue 5 rule 11): signature on the raw
 * body (constant-time, any of several v1=, timestamp tolerance both ways),
 * event validation, deduplication, the fetch handler and the Effect variant.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { HttpServerRequest } from "effect/http"
import * as fc from "fast-check"
import { readFileSync } from "node:fs"
import { EventTypes } from "../../../src/api/Notifications.ts"
import { newSigningSecret, signatureHeader } from "../../../src/notifications/Signing.ts"
import { SvcWebhooks } from "../../../src/receiver/effect.ts"
import {
  constructEvent,
  deduplicate,
  EVENT_TYPES,
  handleRequest,
  memoryDedupStore,
  parseSignatureHeader,
  verifySignature,
  WebhookVerificationError
} from "../../../src/receiver/index.ts"

const orgId = "0193a0a0-0000-7000-8000-00000000000a"
const event = (type = "approval.requested", org = orgId) =>
  JSON.stringify({
    id: "0193a0a0-0000-7000-8000-0000000000e1",
    type,
    org_id: org,
    occurred_at: "2026-11-22T12:00:00.000Z",
    approval: { approval_id: "0193a0a0-0000-7000-8000-0000000000a1", session_id: "s", step_id: "1", task_id: null, status: "pending", deadline_at: null, expires_at: null }
  })
const secret = newSigningSecret()
const now = 1_800_000_000
const at = (seconds: number) => ({ now: seconds * 1000 })

const reason = (promise: Promise<unknown>) =>
  promise.then(() => "accepted", (error: unknown) => error instanceof WebhookVerificationError ? error.reason : `other: ${String(error)}`)

describe("svc/receiver", () => {
  it("has no imports at all: nothing at run time beyond Web Crypto", () => {
    const source = readFileSync(new URL("../../../src/receiver/index.ts", import.meta.url), "utf8")
    assert.notMatch(source, /^\s*import\s/m)
    assert.notMatch(source, /require\(/)
    assert.deepStrictEqual([...EVENT_TYPES], [...EventTypes])
  })

  it("accepts what the service signs and decodes the event", async () => {
    const body = event()
    const decoded = await constructEvent(body, signatureHeader([secret], now, body), secret, { ...at(now), expectedOrgId: orgId })
    assert.deepStrictEqual(decoded, JSON.parse(body))
    // Bytes or string, same answer.
    await constructEvent(new TextEncoder().encode(body), signatureHeader([secret], now, body), secret, at(now))
  })

  it("any of several v1= values may match (rotation), and several secrets may be tried", async () => {
    const body = event()
    const old = newSigningSecret()
    const header = signatureHeader([secret, old], now, body)
    assert.strictEqual(await reason(verifySignature(body, header, old, at(now))), "accepted")
    assert.strictEqual(await reason(verifySignature(body, header, secret, at(now))), "accepted")
    assert.strictEqual(await reason(verifySignature(body, signatureHeader([old], now, body), [secret, old], at(now))), "accepted")
    assert.strictEqual(await reason(verifySignature(body, header, newSigningSecret(), at(now))), "bad_signature")
  })

  it("refuses a changed body, a changed timestamp, and a digest of the wrong length", async () => {
    const body = event()
    const header = signatureHeader([secret], now, body)
    assert.strictEqual(await reason(verifySignature(`${body} `, header, secret, at(now))), "bad_signature")
    assert.strictEqual(await reason(verifySignature(body, header.replace(`t=${now}`, `t=${now + 1}`), secret, at(now))), "bad_signature")
    assert.strictEqual(await reason(verifySignature(body, `t=${now},v1=abcd`, secret, at(now))), "bad_signature")
  })

  it("the timestamp must be within 300 s of the receiver's clock, in both directions, unless configured otherwise", async () => {
    const body = event()
    const header = signatureHeader([secret], now, body)
    for (const [offset, expected] of [[299, "accepted"], [-299, "accepted"], [301, "timestamp_outside_tolerance"], [-301, "timestamp_outside_tolerance"]] as const) {
      assert.strictEqual(await reason(verifySignature(body, header, secret, at(now + offset))), expected, `offset ${offset}`)
    }
    assert.strictEqual(await reason(verifySignature(body, header, secret, { ...at(now + 400), toleranceSeconds: 600 })), "accepted")
    assert.strictEqual(await reason(verifySignature(body, header, secret, { now: () => (now + 10) * 1000, toleranceSeconds: 5 })), "timestamp_outside_tolerance")
  })

  it("says why: malformed header, unknown event type, unexpected organization, not an event", async () => {
    const body = event()
    for (const header of [undefined, null, "", "v1=00", `t=${now}`, "t=abc,v1=00", "garbage"]) {
      assert.strictEqual(await reason(verifySignature(body, header, secret, at(now))), "malformed_header", String(header))
    }
    const unknown = event("approval.deleted")
    assert.strictEqual(await reason(constructEvent(unknown, signatureHeader([secret], now, unknown), secret, at(now))), "unknown_event_type")
    assert.strictEqual(
      await reason(constructEvent(body, signatureHeader([secret], now, body), secret, { ...at(now), expectedOrgId: "someone-else" })),
      "unexpected_org"
    )
    const notJson = "{not json"
    assert.strictEqual(await reason(constructEvent(notJson, signatureHeader([secret], now, notJson), secret, at(now))), "invalid_body")
    const array = "[1]"
    assert.strictEqual(await reason(constructEvent(array, signatureHeader([secret], now, array), secret, at(now))), "invalid_body")
  })

  it("property: arbitrary headers and bodies are refused with a WebhookVerificationError, never accepted or thrown otherwise", async () => {
    await fc.assert(fc.asyncProperty(fc.string(), fc.string(), async (header, body) => {
      const result = await reason(constructEvent(body, header, secret, at(now)))
      return result === "malformed_header" || result === "bad_signature"
    }), { numRuns: 300 })
    fc.assert(fc.property(fc.integer({ min: 0, max: 99_999_999_999 }), fc.array(fc.stringMatching(/^[0-9a-f]{64}$/), { minLength: 1, maxLength: 3 }), (t, sigs) => {
      const parsed = parseSignatureHeader([`t=${t}`, ...sigs.map((s) => `v1=${s}`), "v0=ignored"].join(","))
      return parsed.timestamp === t && parsed.signatures.join() === sigs.join()
    }))
  })

  it("deduplicates by event id with a pluggable store; a failed handler lets the retry through", async () => {
    const store = memoryDedupStore()
    const decoded = JSON.parse(event())
    let calls = 0
    assert.deepStrictEqual(await deduplicate(store, decoded, async () => ++calls), { duplicate: false, value: 1 })
    assert.deepStrictEqual(await deduplicate(store, decoded, async () => ++calls), { duplicate: true })
    const other = { ...decoded, id: "0193a0a0-0000-7000-8000-0000000000e2" }
    await deduplicate(store, other, async () => {
      throw new Error("disk full")
    }).catch(() => undefined)
    assert.deepStrictEqual(await deduplicate(store, other, async () => ++calls), { duplicate: false, value: 2 })
  })

  it("handleRequest: 202 once saved, 200 for a duplicate, 400 saying why without echoing the body", async () => {
    const body = event()
    const saved: Array<string> = []
    const options = { secret, ...at(now), dedup: memoryDedupStore(), onEvent: async (e: { id: string }) => void saved.push(e.id) }
    const request = () =>
      new Request("https://receiver.example/hook", {
        method: "POST",
        headers: { "x-svc-signature": signatureHeader([secret], now, body) },
        body
      })
    assert.strictEqual((await handleRequest(request(), options)).status, 202)
    assert.strictEqual((await handleRequest(request(), options)).status, 200)
    assert.strictEqual(saved.length, 1)
    const bad = await handleRequest(new Request("https://receiver.example/hook", { method: "POST", body, headers: { "x-svc-signature": `t=${now},v1=${"0".repeat(64)}` } }), options)
    assert.strictEqual(bad.status, 400)
    const text = await bad.text()
    assert.include(text, "bad_signature")
    assert.notInclude(text, "approval_id")
  })

  it.effect("the Effect variant fails with a typed WebhookRejected", () =>
    Effect.gen(function*() {
      const body = event()
      const ok = yield* SvcWebhooks.constructEvent(body, signatureHeader([secret], now, body), secret, at(now))
      assert.strictEqual(ok.type, "approval.requested")
      const rejected = yield* Effect.flip(SvcWebhooks.constructEvent(body, signatureHeader([secret], now + 1000, body), secret, at(now)))
      assert.strictEqual(rejected._tag, "WebhookRejected")
      assert.strictEqual(rejected.reason, "timestamp_outside_tolerance")
      // In an Effect HTTP handler: the raw body and header of the current request.
      const request = HttpServerRequest.fromWeb(new Request("https://receiver.example/hook", {
        method: "POST",
        headers: { "x-svc-signature": signatureHeader([secret], now, body) },
        body
      }))
      const fromRequest = yield* SvcWebhooks.fromRequest({ secret, ...at(now), expectedOrgId: orgId }).pipe(
        Effect.provideService(HttpServerRequest.HttpServerRequest, request)
      )
      assert.strictEqual(fromRequest.id, JSON.parse(body).id)
    }))
})
