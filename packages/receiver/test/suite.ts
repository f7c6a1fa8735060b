/**
 * The receiver kit's test suite, one for every runtime the kit claims (Node,
 * Deno, Bun, Cloudflare's workerd). It gets the kit as published (built,
 * through its package exports) and vectors signed by the service's own
 * signer, and needs nothing but Web Crypto and the fetch types.
 */
import type * as Kit from "../src/index.ts"
import { assert, runCases, type SuiteResult, type TestCase } from "./harness.ts"

/** Deliveries signed by the service (`src/notifications/send/Signing.ts`), made by the test that runs this suite. */
export interface Vectors {
  readonly secret: string
  readonly oldSecret: string
  readonly orgId: string
  /** The receiver's clock for the vectors, unix seconds. */
  readonly now: number
  readonly body: string
  /** `t=<now>,v1=<hmac with secret>`. */
  readonly header: string
  /** One `v1=` per secret, as during a rotation overlap. */
  readonly rotationHeader: string
  readonly signed: Readonly<
    Record<"unknownType" | "notJson" | "array", { readonly body: string; readonly header: string }>
  >
  /** The same delivery's Standard Webhooks headers (`webhook-id`, `webhook-timestamp`, `webhook-signature`). */
  readonly standard: Readonly<Record<string, string>>
  /** Its Standard Webhooks headers during a rotation overlap (one entry per secret). */
  readonly standardRotation: Readonly<Record<string, string>>
  /** A secret of the earlier form (`whsec_` + base64url), and the delivery's Standard Webhooks headers signed with it. */
  readonly legacySecret: string
  readonly legacyStandard: Readonly<Record<string, string>>
}

type Reason = Kit.WebhookVerificationReason | "accepted" | `other: ${string}`

const encoder = new TextEncoder()

const hex = (bytes: ArrayBuffer): string =>
  [...new Uint8Array(bytes)].map((b) => b.toString(16).padStart(2, "0")).join("")

/** An independent signer (Web Crypto), for deliveries the service would never send. */
const sign = async (secret: string, timestamp: number, body: string | Uint8Array): Promise<string> => {
  const key = await crypto.subtle.importKey("raw", encoder.encode(secret), { name: "HMAC", hash: "SHA-256" }, false, [
    "sign"
  ])
  const bytes = typeof body === "string" ? encoder.encode(body) : body
  const prefix = encoder.encode(`${timestamp}.`)
  const signed = new Uint8Array(prefix.length + bytes.length)
  signed.set(prefix)
  signed.set(bytes, prefix.length)
  return hex(await crypto.subtle.sign("HMAC", key, signed))
}

/** Web Crypto that counts what it is asked to do. */
const countingSubtle = () => {
  const calls = { sign: 0, verify: 0, importKey: 0 }
  const real = crypto.subtle
  const subtle = {
    sign: (...args: Parameters<SubtleCrypto["sign"]>) => {
      calls.sign++
      return real.sign(...args)
    },
    verify: (...args: Parameters<SubtleCrypto["verify"]>) => {
      calls.verify++
      return real.verify(...args)
    },
    importKey: (...args: Parameters<SubtleCrypto["importKey"]>) => {
      calls.importKey++
      return (real.importKey as (...a: Parameters<SubtleCrypto["importKey"]>) => Promise<CryptoKey>)(...args)
    }
  } as unknown as SubtleCrypto
  return { calls, subtle }
}

/** A body stream that never ends, counting the bytes it was asked for. */
const endlessStream = (chunkBytes: number) => {
  const state = { pulledBytes: 0, cancelled: false }
  const chunk = new Uint8Array(chunkBytes).fill(0x61)
  const stream = new ReadableStream<Uint8Array>({
    pull(controller) {
      state.pulledBytes += chunk.byteLength
      controller.enqueue(chunk.slice())
    },
    cancel() {
      state.cancelled = true
    }
  })
  return { state, stream }
}

/** A small deterministic PRNG (mulberry32), for the property-style cases. */
const random = (seed: number) => () => {
  seed = (seed + 0x6d2b79f5) | 0
  let t = Math.imul(seed ^ (seed >>> 15), 1 | seed)
  t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296
}

export const suite = (kit: typeof Kit, v: Vectors): ReadonlyArray<TestCase> => {
  const at = (seconds: number) => ({ now: seconds * 1000 })
  const reason = (promise: Promise<unknown>): Promise<Reason> =>
    promise.then(
      () => "accepted" as const,
      (error: unknown) =>
        error instanceof kit.WebhookVerificationError ? error.reason : `other: ${String(error)}` as const
    )
  const cases: Array<TestCase> = []
  const test = (name: string, run: () => Promise<void> | void) => cases.push({ name, run })

  test("accepts what the service signs and decodes the event, from a string or bytes", async () => {
    const event = await kit.constructEvent(v.body, v.header, v.secret, { ...at(v.now), expectedOrgId: v.orgId })
    assert.deepEqual(event, JSON.parse(v.body))
    const fromBytes = await kit.constructEvent(encoder.encode(v.body), v.header, v.secret, at(v.now))
    assert.equal(fromBytes.id, event.id)
    const fromBuffer = await kit.constructEvent(encoder.encode(v.body).buffer, v.header, v.secret, at(v.now))
    assert.equal(fromBuffer.type, "approval.requested")
  })

  test("any of several v1= values may match (rotation), and several secrets may be tried", async () => {
    assert.equal(await reason(kit.verifySignature(v.body, v.rotationHeader, v.oldSecret, at(v.now))), "accepted")
    assert.equal(await reason(kit.verifySignature(v.body, v.rotationHeader, v.secret, at(v.now))), "accepted")
    assert.equal(await reason(kit.verifySignature(v.body, v.header, [v.oldSecret, v.secret], at(v.now))), "accepted")
    assert.equal(
      await reason(kit.verifySignature(v.body, v.rotationHeader, "whsec_someone_else", at(v.now))),
      "bad_signature"
    )
  })

  test("refuses a changed body, a changed timestamp, and a digest of the wrong length", async () => {
    assert.equal(await reason(kit.verifySignature(`${v.body} `, v.header, v.secret, at(v.now))), "bad_signature")
    const later = v.header.replace(`t=${v.now}`, `t=${v.now + 1}`)
    assert.equal(await reason(kit.verifySignature(v.body, later, v.secret, at(v.now))), "bad_signature")
    assert.equal(await reason(kit.verifySignature(v.body, `t=${v.now},v1=abcd`, v.secret, at(v.now))), "bad_signature")
  })

  test("the timestamp must be within 300 s of the receiver's clock, both ways, unless configured otherwise", async () => {
    for (
      const [offset, expected] of [[299, "accepted"], [-299, "accepted"], [301, "timestamp_outside_tolerance"], [
        -301,
        "timestamp_outside_tolerance"
      ]] as const
    ) {
      assert.equal(
        await reason(kit.verifySignature(v.body, v.header, v.secret, at(v.now + offset))),
        expected,
        `offset ${offset}`
      )
    }
    assert.equal(
      await reason(kit.verifySignature(v.body, v.header, v.secret, { ...at(v.now + 400), toleranceSeconds: 600 })),
      "accepted"
    )
    assert.equal(
      await reason(
        kit.verifySignature(v.body, v.header, v.secret, { now: () => (v.now + 10) * 1000, toleranceSeconds: 5 })
      ),
      "timestamp_outside_tolerance"
    )
  })

  test("says why: malformed header, unknown event type, unexpected organization, not an event", async () => {
    for (const header of [undefined, null, "", "v1=00", `t=${v.now}`, "t=abc,v1=00", "garbage"]) {
      assert.equal(
        await reason(kit.verifySignature(v.body, header, v.secret, at(v.now))),
        "malformed_header",
        String(header)
      )
    }
    const { array, notJson, unknownType } = v.signed
    assert.equal(
      await reason(kit.constructEvent(unknownType.body, unknownType.header, v.secret, at(v.now))),
      "unknown_event_type"
    )
    assert.equal(
      await reason(kit.constructEvent(v.body, v.header, v.secret, { ...at(v.now), expectedOrgId: "someone-else" })),
      "unexpected_org"
    )
    assert.equal(await reason(kit.constructEvent(notJson.body, notJson.header, v.secret, at(v.now))), "invalid_body")
    assert.equal(await reason(kit.constructEvent(array.body, array.header, v.secret, at(v.now))), "invalid_body")
  })

  test("property: arbitrary headers and bodies are refused with a reason, never accepted or thrown otherwise", async () => {
    const next = random(12345)
    const alphabet = "t=v1,0123456789abcdef ;=\u00e9\u{1F600}"
    const text = (length: number) =>
      Array.from({ length }, () => alphabet[Math.floor(next() * alphabet.length)]).join("")
    for (let i = 0; i < 300; i++) {
      const header = i % 3 === 0 ? `t=${v.now},v1=${text(64)}` : text(Math.floor(next() * 80))
      const result = await reason(kit.constructEvent(text(Math.floor(next() * 200)), header, v.secret, at(v.now)))
      assert.ok(result === "malformed_header" || result === "bad_signature", `${JSON.stringify(header)}: ${result}`)
    }
  })

  test("one HMAC per secret per delivery, however many v1= values the header holds", async () => {
    const { calls, subtle } = countingSubtle()
    const candidates = Array.from(
      { length: kit.MAX_SIGNATURES - 1 },
      (_, i) => `v1=${String(i).repeat(64).slice(0, 64)}`
    )
    const header = [`t=${v.now}`, ...candidates, v.header.split(",")[1]].join(",")
    assert.equal(
      await reason(kit.verifySignature(v.body, header, [v.oldSecret, v.secret], { ...at(v.now), subtle })),
      "accepted"
    )
    assert.equal(calls.sign, 2, "HMACs computed")
    assert.equal(calls.verify, 0, "no subtle.verify (it recomputes the HMAC per candidate)")
    assert.equal(calls.importKey, 2, "keys imported")
    const bad = countingSubtle()
    assert.equal(
      await reason(
        kit.verifySignature(v.body, [`t=${v.now}`, ...candidates].join(","), v.secret, {
          ...at(v.now),
          subtle: bad.subtle
        })
      ),
      "bad_signature"
    )
    assert.equal(bad.calls.sign, 1)
  })

  test("at most MAX_SIGNATURES v1= values and MAX_SIGNATURE_HEADER_LENGTH characters, refused before any HMAC", async () => {
    const { calls, subtle } = countingSubtle()
    const valid = v.header.split(",")[1]!
    const many = [`t=${v.now}`, ...Array.from({ length: kit.MAX_SIGNATURES }, () => `v1=${"0".repeat(64)}`), valid]
      .join(",")
    assert.equal(
      await reason(kit.verifySignature(v.body, many, v.secret, { ...at(v.now), subtle })),
      "malformed_header"
    )
    const exactly = [
      `t=${v.now}`,
      ...Array.from({ length: kit.MAX_SIGNATURES - 1 }, () => `v1=${"0".repeat(64)}`),
      valid
    ].join(",")
    assert.equal(await reason(kit.verifySignature(v.body, exactly, v.secret, at(v.now))), "accepted")
    const long = `${v.header},v0=${"x".repeat(kit.MAX_SIGNATURE_HEADER_LENGTH)}`
    assert.equal(
      await reason(kit.verifySignature(v.body, long, v.secret, { ...at(v.now), subtle })),
      "malformed_header"
    )
    assert.equal(calls.sign, 0)
    try {
      kit.parseSignatureHeader(long)
      assert.ok(false, "a long header parsed")
    } catch (error) {
      assert.ok(error instanceof kit.WebhookVerificationError && /characters/.test(error.message), String(error))
    }
  })

  test("a body over maxBodyBytes (1 MiB by default) is refused as body_too_large before any HMAC", async () => {
    assert.equal(kit.DEFAULT_MAX_BODY_BYTES, 1024 * 1024)
    const { calls, subtle } = countingSubtle()
    const big = "a".repeat(kit.DEFAULT_MAX_BODY_BYTES + 1)
    const header = `t=${v.now},v1=${await sign(v.secret, v.now, big)}`
    assert.equal(await reason(kit.verifySignature(big, header, v.secret, { ...at(v.now), subtle })), "body_too_large")
    assert.equal(
      await reason(kit.verifySignature(encoder.encode(big), header, v.secret, { ...at(v.now), subtle })),
      "body_too_large"
    )
    assert.equal(calls.sign, 0)
    // Configurable, measured in bytes (two-byte characters count twice), the limit itself accepted.
    const small = { ...at(v.now), maxBodyBytes: v.body.length }
    assert.equal(await reason(kit.verifySignature(v.body, v.header, v.secret, small)), "accepted")
    assert.equal(await reason(kit.verifySignature(`${v.body} `, v.header, v.secret, small)), "body_too_large")
    const accented = "\u00e9".repeat(600)
    const accentedHeader = `t=${v.now},v1=${await sign(v.secret, v.now, accented)}`
    assert.equal(
      await reason(kit.verifySignature(accented, accentedHeader, v.secret, { ...at(v.now), maxBodyBytes: 1200 })),
      "accepted"
    )
    assert.equal(
      await reason(kit.verifySignature(accented, accentedHeader, v.secret, { ...at(v.now), maxBodyBytes: 1199 })),
      "body_too_large"
    )
    assert.equal(
      await reason(kit.verifySignature(v.body, v.header, v.secret, { ...at(v.now), maxBodyBytes: 0 })),
      "other: TypeError: maxBodyBytes must be a positive integer"
    )
  })

  test("readRawBody stops reading a stream at the limit and cancels it, never reading it to its end", async () => {
    const { state, stream } = endlessStream(16 * 1024)
    const max = 256 * 1024
    const result = await reason(kit.readRawBody({ headers: new Headers(), body: stream }, { maxBodyBytes: max }))
    assert.equal(result, "body_too_large")
    assert.ok(state.cancelled, "the stream was cancelled")
    assert.atMost(state.pulledBytes, max + 4 * 16 * 1024, "bytes pulled from the stream")
    // A declared Content-Length over the limit is refused without reading at all.
    const declared = endlessStream(16 * 1024)
    const refused = await reason(
      kit.readRawBody({ headers: new Headers({ "content-length": String(max + 1) }), body: declared.stream }, {
        maxBodyBytes: max
      })
    )
    assert.equal(refused, "body_too_large")
    assert.atMost(declared.state.pulledBytes, 16 * 1024, "bytes pulled with a declared length over the limit")
    // Within the limit: the exact bytes.
    const exact = await kit.readRawBody(new Request("https://receiver.test/hook", { method: "POST", body: v.body }))
    assert.equal(new TextDecoder().decode(exact), v.body)
  })

  test("deduplicates by event id with a pluggable store; a failed handler lets the retry through", async () => {
    const store = kit.memoryDedupStore()
    const event = JSON.parse(v.body)
    let calls = 0
    assert.deepEqual(await kit.deduplicate(store, event, async () => ++calls), { duplicate: false, value: 1 })
    assert.deepEqual(await kit.deduplicate(store, event, async () => ++calls), { duplicate: true })
    const other = { ...event, id: "0193a0a0-0000-7000-8000-0000000000e2" }
    await kit.deduplicate(store, other, async () => {
      throw new Error("disk full")
    }).catch(() => undefined)
    assert.deepEqual(await kit.deduplicate(store, other, async () => ++calls), { duplicate: false, value: 2 })
  })

  test("handleRequest: 202 once saved, 200 for a duplicate, 400 saying why without echoing the body, 405 for GET", async () => {
    const saved: Array<string> = []
    const options = {
      secret: v.secret,
      ...at(v.now),
      dedup: kit.memoryDedupStore(),
      onEvent: async (e: { id: string }) => void saved.push(e.id)
    }
    const request = () =>
      new Request("https://receiver.test/hook", {
        method: "POST",
        headers: { "x-svc-signature": v.header },
        body: v.body
      })
    assert.equal((await kit.handleRequest(request(), options)).status, 202)
    const again = await kit.handleRequest(request(), options)
    assert.equal(again.status, 200)
    assert.deepEqual(await again.json(), { received: true, duplicate: true })
    assert.equal(saved.length, 1)
    const bad = await kit.handleRequest(
      new Request("https://receiver.test/hook", {
        method: "POST",
        body: v.body,
        headers: { "x-svc-signature": `t=${v.now},v1=${"0".repeat(64)}` }
      }),
      options
    )
    assert.equal(bad.status, 400)
    const text = await bad.text()
    assert.ok(text.includes("bad_signature") && !text.includes("approval_id"), text)
    assert.equal((await kit.handleRequest(new Request("https://receiver.test/hook"), options)).status, 405)
  })

  test("handleRequest: 413 body_too_large for an endless body, read only up to the limit; a malformed header is refused unread", async () => {
    const options = { secret: v.secret, ...at(v.now), maxBodyBytes: 64 * 1024, onEvent: async () => undefined }
    const { state, stream } = endlessStream(8 * 1024)
    const response = await kit.handleRequest(
      new Request(
        "https://receiver.test/hook",
        { method: "POST", headers: { "x-svc-signature": v.header }, body: stream, duplex: "half" } as RequestInit
      ),
      options
    )
    assert.equal(response.status, 413)
    assert.equal((await response.json()).error, "body_too_large")
    assert.atMost(state.pulledBytes, 64 * 1024 + 4 * 8 * 1024, "bytes pulled")
    const unread = endlessStream(8 * 1024)
    const malformed = await kit.handleRequest(
      new Request(
        "https://receiver.test/hook",
        {
          method: "POST",
          headers: { "x-svc-signature": "garbage" },
          body: unread.stream,
          duplex: "half"
        } as RequestInit
      ),
      options
    )
    assert.equal(malformed.status, 400)
    assert.equal((await malformed.json()).error, "malformed_header")
    assert.atMost(unread.state.pulledBytes, 8 * 1024 * 2, "bytes pulled before the header was refused")
  })

  test("Standard Webhooks: verifies webhook-signature with the secret as returned, any entry of a rotation, and refuses changes", async () => {
    const ok = await kit.verifyStandardWebhook(v.body, v.standard, v.secret, at(v.now))
    assert.equal(ok.id, JSON.parse(v.body).id)
    assert.equal(ok.timestamp, v.now)
    assert.equal(
      await reason(kit.verifyStandardWebhook(v.body, new Headers(v.standard), v.secret, at(v.now))),
      "accepted"
    )
    for (const secret of [v.secret, v.oldSecret]) {
      assert.equal(await reason(kit.verifyStandardWebhook(v.body, v.standardRotation, secret, at(v.now))), "accepted")
    }
    assert.equal(await reason(kit.verifyStandardWebhook(v.body, v.standard, v.oldSecret, at(v.now))), "bad_signature")
    assert.equal(
      await reason(kit.verifyStandardWebhook(`${v.body} `, v.standard, v.secret, at(v.now))),
      "bad_signature"
    )
    const otherId = { ...v.standard, "webhook-id": "0193a0a0-0000-7000-8000-0000000000e2" }
    assert.equal(await reason(kit.verifyStandardWebhook(v.body, otherId, v.secret, at(v.now))), "bad_signature")
    const later = { ...v.standard, "webhook-timestamp": String(v.now + 1) }
    assert.equal(await reason(kit.verifyStandardWebhook(v.body, later, v.secret, at(v.now))), "bad_signature")
    assert.equal(
      await reason(kit.verifyStandardWebhook(v.body, v.standard, v.secret, at(v.now + 301))),
      "timestamp_outside_tolerance"
    )
    for (const missing of ["webhook-id", "webhook-timestamp", "webhook-signature"]) {
      const headers = Object.fromEntries(Object.entries(v.standard).filter(([key]) => key !== missing))
      assert.equal(
        await reason(kit.verifyStandardWebhook(v.body, headers, v.secret, at(v.now))),
        "malformed_header",
        missing
      )
    }
    const many = {
      ...v.standard,
      "webhook-signature": Array.from({ length: kit.MAX_SIGNATURES + 1 }, () => v.standard["webhook-signature"]).join(
        " "
      )
    }
    assert.equal(await reason(kit.verifyStandardWebhook(v.body, many, v.secret, at(v.now))), "malformed_header")
  })

  test("Standard Webhooks: a secret of the earlier base64url form is keyed with the bytes it decodes to", async () => {
    assert.equal(
      await reason(kit.verifyStandardWebhook(v.body, v.legacyStandard, v.legacySecret, at(v.now))),
      "accepted"
    )
    assert.equal(
      await reason(kit.verifyStandardWebhook(v.body, v.legacyStandard, v.secret, at(v.now))),
      "bad_signature"
    )
  })

  test("constructEventFromHeaders and handleRequest take either scheme; with Standard Webhooks the body's id must be webhook-id", async () => {
    const viaSvc = await kit.constructEventFromHeaders(
      v.body,
      new Headers({ "x-svc-signature": v.header }),
      v.secret,
      at(v.now)
    )
    const viaStandard = await kit.constructEventFromHeaders(v.body, new Headers(v.standard), v.secret, at(v.now))
    assert.deepEqual(viaSvc, viaStandard)
    assert.equal(
      await reason(kit.constructEventFromHeaders(v.body, new Headers(), v.secret, at(v.now))),
      "malformed_header"
    )
    const options = { secret: v.secret, ...at(v.now), onEvent: async () => undefined }
    const response = await kit.handleRequest(
      new Request("https://receiver.test/hook", { method: "POST", headers: v.standard, body: v.body }),
      options
    )
    assert.equal(response.status, 202)
    const unsigned = await kit.handleRequest(
      new Request("https://receiver.test/hook", { method: "POST", body: v.body }),
      options
    )
    assert.equal(unsigned.status, 400)
    assert.equal((await unsigned.json()).error, "malformed_header")
  })

  return cases
}

/** Runs the suite; what each runtime's entry point calls. */
export const runSuite = (runtime: string, kit: typeof Kit, vectors: Vectors): Promise<SuiteResult> =>
  runCases(runtime, suite(kit, vectors))
