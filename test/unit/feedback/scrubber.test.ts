import { assert, describe, it } from "@effect/vitest"
import * as fc from "fast-check"
import { type Json, knownNeedles, REDACTION_MARKER, redactRanges, scrub } from "../../../src/feedback/Scrubber.ts"
import { KEY_PREFIX } from "../../../src/identity/KeyFormat.ts"
import { randomToken } from "../../../src/platform/Crypto.ts"
import { sha256Hex } from "../../../src/platform/Digest.ts"
import { appendPath } from "../../../src/tasks/SchemaCompiler.ts"
import { secretSamples } from "../../support/secretSamples.ts"

const liveKey = randomToken(KEY_PREFIX)
const revokedKey = randomToken(KEY_PREFIX)
const strangerKey = randomToken(KEY_PREFIX)
const signingSecret = randomToken("whsec_")
const collectorToken = randomToken("", 24)
const known = {
  keyHashes: new Set([sha256Hex(liveKey), sha256Hex(revokedKey)]),
  values: [signingSecret, `Bearer ${collectorToken}`, "x1"]
}

/** Every string of a document: values and member names. */
const strings = (value: Json, out: Array<string> = []): Array<string> => {
  if (typeof value === "string") out.push(value)
  else if (Array.isArray(value)) { for (const item of value) strings(item, out) }
  else if (value !== null && typeof value === "object") {
    for (const [key, item] of Object.entries(value)) {
      out.push(key)
      strings(item, out)
    }
  }
  return out
}

describe("known organization credentials are removed, whole or embedded", () => {
  it("this organization's API keys (revoked ones too), another organization's, and any string of our key format", async () => {
    const doc = {
      a: liveKey,
      b: `curl -H "Authorization: Bearer ${revokedKey}" ...`,
      c: strangerKey,
      d: `k=svc_${"A".repeat(43)}`
    }
    const { value, fields } = await scrub(doc, known, "correction")
    assert.deepStrictEqual(value, {
      a: REDACTION_MARKER,
      b: `curl -H "Authorization: Bearer ${REDACTION_MARKER}" ...`,
      c: REDACTION_MARKER,
      d: `k=${REDACTION_MARKER}`
    })
    assert.deepStrictEqual(fields, ["correction.a", "correction.b", "correction.c", "correction.d"])
  })

  it("any string of our signing-secret format, whoever it belongs to", async () => {
    const doc = { a: randomToken("whsec_"), b: `x whsec_whsec_${"b".repeat(43)}` }
    const { value } = await scrub(doc, known, "correction")
    // `whsec_` is itself base64url: `whsec_whsec_…` is secret-shaped from its first character.
    assert.deepStrictEqual(value, { a: REDACTION_MARKER, b: `x ${REDACTION_MARKER}` })
  })

  it("property: a key-shaped or secret-shaped string never survives, wherever it is embedded", async () => {
    const b64 = fc.constantFrom(..."ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom("svc_", "whsec_"),
        fc.array(b64, { minLength: 43, maxLength: 43 }).map((cs) => cs.join("")),
        fc.string({ maxLength: 20 }),
        fc.string({ maxLength: 20 }),
        async (prefix, body, before, after) => {
          const secret = prefix + body
          const { value } = await scrub({ note: before + secret + after }, { keyHashes: new Set(), values: [] })
          assert.notInclude((value as { note: string }).note, secret)
        }
      ),
      { numRuns: 100 }
    )
  })

  it("known values that overlap themselves, in a long string, neither throw nor leave a piece behind", async () => {
    const value = "a".repeat(8)
    const text = "a".repeat(300_000)
    const { value: out } = await scrub({ t: text, u: `x${"ab".repeat(100_000)}y` }, {
      keyHashes: new Set(),
      values: [value, "abababab"]
    })
    assert.deepStrictEqual(out, { t: REDACTION_MARKER, u: `x${REDACTION_MARKER}y` })
  })

  it("an API key right after other `svc_`-shaped text is still found (matches may overlap)", async () => {
    // `svc_<key>` or `my_svc_token_<key>`: a scan that only takes
    // non-overlapping `svc_` + 43 matches swallows the key's start into the
    // first match and never sees the key itself.
    const doc = { a: `svc_${liveKey}`, b: `my_svc_token_${revokedKey}.`, c: `${liveKey}${liveKey}` }
    const { value, fields } = await scrub(doc, known, "correction")
    // (`svc_` and `_token_` are base64url too: the key-shaped text starts at the first `svc_`, and goes whole.)
    assert.deepStrictEqual(value, { a: REDACTION_MARKER, b: `my_${REDACTION_MARKER}.`, c: REDACTION_MARKER })
    assert.deepStrictEqual(fields, ["correction.a", "correction.b", "correction.c"])
  })

  it("signing secrets and collector header values, and the token of a `Bearer <token>` header", async () => {
    const doc = { list: [`secret=${signingSecret};`, { deep: { x: `token ${collectorToken} here` } }] }
    const { value, fields } = await scrub(doc, known, "correction")
    assert.deepStrictEqual(value, {
      list: [`secret=${REDACTION_MARKER};`, { deep: { x: `token ${REDACTION_MARKER} here` } }]
    })
    assert.deepStrictEqual(fields, ["correction.list[0]", "correction.list[1].deep.x"])
  })

  it("known values shorter than 8 characters are ignored (they would remove ordinary text)", () => {
    assert.notInclude(knownNeedles(["x1", "Bearer ab"]), "x1")
    assert.include(knownNeedles(["Bearer abcdefgh"]), "abcdefgh")
  })

  it("a broker URL's password and token are looked for alone, as an https URL's long parts are", () => {
    const needles = knownNeedles([
      "amqps://svc:correct-horse-battery-staple@rabbit.example.com/prod?exchange=svc.events",
      "tls://nats-token-0123456789abcdef@nats.example.com?subject=svc.approvals"
    ])
    assert.include(needles, "correct-horse-battery-staple")
    assert.include(needles, "nats-token-0123456789abcdef")
    // Short parts (the user name, the exchange) are ordinary text.
    assert.notInclude(needles, "svc")
    assert.notInclude(needles, "svc.events")
  })

  it("a broker's password or token is removed from 8 characters, as every known value is", async () => {
    const known = {
      keyHashes: new Set<string>(),
      values: [
        "nats://tok-0123456789@nats.example.com?subject=svc.approvals",
        "amqp://svc:pw-12345@rabbit.example.com/?exchange=svc.events"
      ]
    }
    const { value } = await scrub({ note: "connect with tok-0123456789 or pw-12345; user svc" }, known, "correction")
    assert.deepStrictEqual(value, { note: `connect with ${REDACTION_MARKER} or ${REDACTION_MARKER}; user svc` })
    // Shorter than 8: ordinary text.
    assert.notInclude(knownNeedles(["nats://tok-123@nats.example.com?subject=svc.a"]), "tok-123")
  })
})

describe("the key name alone never triggers removal; keys holding secrets are scrubbed", () => {
  it("token, session, secret_word, password_hint keep ordinary values", async () => {
    const doc = { token: "abc", session: "s-1", secret_word: "banana", password_hint: "first pet", api_key: "see docs" }
    const { value, fields } = await scrub(doc, known)
    assert.deepStrictEqual(value, doc)
    assert.deepStrictEqual(fields, [])
  })

  it("a secret used as a member name is replaced in the name; the path names the new member", async () => {
    const { value, fields, collisions } = await scrub({ m: { [liveKey]: 1, ok: 2 } }, known, "correction")
    assert.deepStrictEqual(value, { m: { [REDACTION_MARKER]: 1, ok: 2 } })
    assert.deepStrictEqual(fields, ["correction.m[\"[REDACTED]\"]"])
    assert.deepStrictEqual(collisions, [])
  })

  it("two member names that become the same are reported as a collision", async () => {
    const { collisions } = await scrub({ m: { [liveKey]: 1, [revokedKey]: 2 } }, known, "correction")
    assert.deepStrictEqual(collisions, ["correction.m"])
  })

  it("a __proto__ member stays a plain member", async () => {
    const doc = JSON.parse(`{"__proto__": {"x": "${liveKey}"}}`) as Json
    const { value } = await scrub(doc, known)
    assert.strictEqual(JSON.stringify(value), `{"__proto__":{"x":"${REDACTION_MARKER}"}}`)
  })
})

describe("paths and ranges", () => {
  it("paths: identifiers dotted, indexes bracketed, other names as JSON strings in brackets", () => {
    assert.strictEqual(appendPath("correction", "items"), "correction.items")
    assert.strictEqual(appendPath("correction.items", 2), "correction.items[2]")
    assert.strictEqual(appendPath("correction", "two words"), "correction[\"two words\"]")
    assert.strictEqual(appendPath("correction", "a.b"), "correction[\"a.b\"]")
    assert.strictEqual(appendPath("", "x"), "x")
  })

  it("overlapping ranges merge into one marker", () => {
    assert.strictEqual(redactRanges("abcdefgh", [[1, 4], [3, 6]]), `a${REDACTION_MARKER}gh`)
    assert.strictEqual(redactRanges("abcdefgh", [[0, 2], [6, 8]]), `${REDACTION_MARKER}cdef${REDACTION_MARKER}`)
  })
})

// Generated documents: arbitrary JSON with planted secrets at random depths.
const plainString = fc.string({ maxLength: 12 }).filter((s) => !s.includes(" ") && s.length < 12)
const plainJson: fc.Arbitrary<Json> = fc.letrec<{ value: Json }>((tie) => ({
  value: fc.oneof(
    { depthSize: "small", withCrossShrink: true },
    fc.constant(null),
    fc.boolean(),
    fc.integer(),
    plainString,
    fc.array(tie("value"), { maxLength: 4 }),
    fc.dictionary(plainString, tie("value"), { maxKeys: 4 })
  )
})).value

/** [what is planted, the secret in it that must disappear] */
const plantedSecrets: ReadonlyArray<readonly [string, string]> = [
  ...secretSamples(11).map((s) => [s.text, s.secret] as const),
  ...[liveKey, revokedKey, signingSecret, collectorToken].map((s) => [s, s] as const)
]

/** Puts `secret` (embedded in text, or as a member name) at a random place of `doc`. */
const plant = (doc: Json, secret: string, path: ReadonlyArray<number>, asKey: boolean, prefix: string): Json => {
  const text = `${prefix} ${secret} tail`
  const [step, ...rest] = path
  if (Array.isArray(doc) && doc.length > 0 && step !== undefined) {
    const i = step % doc.length
    return doc.map((item, j) => j === i ? plant(item, secret, rest, asKey, prefix) : item)
  }
  if (doc !== null && typeof doc === "object" && !Array.isArray(doc)) {
    const keys = Object.keys(doc)
    if (keys.length > 0 && step !== undefined && step % 3 !== 0) {
      const key = keys[step % keys.length]!
      return Object.fromEntries(
        Object.entries(doc).map(([k, v]) => [k, k === key ? plant(v, secret, rest, asKey, prefix) : v])
      )
    }
    return asKey ? { ...doc, [text]: 1 } : { ...doc, planted: text }
  }
  return asKey ? { [text]: doc } : { wrapped: doc, planted: text }
}

describe("property: planted secrets never survive; documents without secrets pass through unchanged", () => {
  it("no planted value (ruleset or the org's own credentials) survives, at any depth", async () => {
    await fc.assert(
      fc.asyncProperty(
        plainJson,
        fc.array(
          fc.tuple(
            fc.constantFrom(...plantedSecrets),
            fc.array(fc.nat(), { maxLength: 5 }),
            fc.boolean(),
            fc.constantFrom("", "see:", "note", "x=")
          ),
          { minLength: 1, maxLength: 4 }
        ),
        async (base, plants) => {
          let doc = base
          for (const [[planted], path, asKey, prefix] of plants) doc = plant(doc, planted, path, asKey, prefix)
          const { value, fields } = await scrub(doc, known, "correction")
          for (const text of strings(value)) {
            for (const [[, secret]] of plants) assert.notInclude(text, secret)
          }
          assert.isAbove(fields.length, 0)
        }
      ),
      { numRuns: 150 }
    )
  })

  it("documents without secrets come back as they are (not copied), with no warning", async () => {
    await fc.assert(
      fc.asyncProperty(plainJson, async (doc) => {
        const { value, fields } = await scrub(doc, known, "correction")
        assert.strictEqual(value, doc)
        assert.deepStrictEqual(fields, [])
      }),
      { numRuns: 200 }
    )
  })
})
