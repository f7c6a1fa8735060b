import { assert, describe, it } from "@effect/vitest"
import fc from "fast-check"
import { MAX_HEADERS } from "../../../src/api/HeaderNames.ts"
import { deliveryHeaders, OWN_HEADERS } from "../../../src/notifications/send/Signing.ts"
import { checkHeaders, headerField, MAX_VALUE_BYTES } from "../../../src/outbound/HeaderRules.ts"
import { invalidNameCorpus, invalidValueCorpus, refusedNameCorpus } from "../../support/headerCorpus.ts"

const refused = (headers: Record<string, string>) => {
  const verdict = checkHeaders(headers)
  assert.strictEqual(verdict._tag, "Refused", JSON.stringify(Object.keys(headers)))
  return verdict as Extract<typeof verdict, { _tag: "Refused" }>
}

describe("header rules (collector and webhook endpoint)", () => {
  it("accepts ordinary authentication headers", () => {
    const verdict = checkHeaders({
      Authorization: "Bearer abc",
      "X-Honeycomb-Team": "k\tey",
      "DD-API-KEY": "v".repeat(MAX_VALUE_BYTES)
    })
    assert.strictEqual(verdict._tag, "Ok")
  })

  it(`at most ${MAX_HEADERS} headers`, () => {
    const ten = Object.fromEntries(Array.from({ length: 10 }, (_, i) => [`X-H${i}`, "v"]))
    assert.strictEqual(checkHeaders(ten)._tag, "Ok")
    const verdict = refused({ ...ten, "X-H10": "v" })
    assert.strictEqual(verdict.field, "headers")
  })

  it("every refused header is reported at once, each with its reason, in the order given", () => {
    const verdict = refused({
      Host: "a",
      Authorization: "Bearer ok",
      "bad name": "b",
      "X-Token": "secret-zz\nbreak",
      Cookie: "c"
    })
    assert.deepStrictEqual(verdict.problems.map((p) => p.field), [
      "headers.Host",
      headerField("bad name"),
      "headers.X-Token",
      "headers.Cookie"
    ])
    assert.strictEqual(verdict.field, "headers.Host")
    for (const problem of verdict.problems) assert.isAbove(problem.message.length, 10)
    assert.notInclude(JSON.stringify(verdict.problems), "secret-zz")
  })

  it("names differing only in case are duplicates and refused", () => {
    const verdict = refused({ "X-Token": "a", "x-token": "b" })
    assert.strictEqual(verdict.field, "headers.x-token")
  })

  for (const [label, names] of refusedNameCorpus) {
    it(`refuses ${label}, naming the header and never its value`, () => {
      for (const name of names) {
        const verdict = refused({ [name]: "secret-value-1" })
        assert.strictEqual(verdict.field, headerField(name))
        assert.include(verdict.field, name)
        assert.notInclude(verdict.message, "secret-value-1")
      }
    })
  }

  it("refuses invalid header names", () => {
    for (const name of invalidNameCorpus) {
      const verdict = refused({ [name]: "v" })
      assert.strictEqual(verdict.field, headerField(name))
    }
  })

  for (const [label, value] of invalidValueCorpus) {
    it(`refuses a value with ${label}, naming the header and never its value`, () => {
      const verdict = refused({ "X-Token": value })
      assert.strictEqual(verdict.field, "headers.X-Token")
      assert.notInclude(verdict.message, value)
    })
  }

  it("property: any accepted set is at most 10 valid, distinct, allowed names with safe values", () => {
    const name = fc.oneof(
      fc.stringMatching(/^[A-Za-z][A-Za-z0-9-]{0,20}$/),
      fc.constantFrom("Host", "cookie", "x-b3-x", "Proxy-A", "traceparent", "X Bad", "Content-Type")
    )
    // Every value carries a mark no name or message text has, so "the message never carries a
    // value" is checked without tripping on values that happen to be ordinary words ("name").
    const value = fc.oneof(fc.string({ maxLength: 50 }), fc.constantFrom("a\r\nb", "\u0000", "ok")).map((v) =>
      `${v}\u00a7`
    )
    fc.assert(fc.property(fc.dictionary(name, value, { maxKeys: 14 }), (headers) => {
      const verdict = checkHeaders(headers)
      const entries = Object.entries(headers)
      if (verdict._tag === "Ok") {
        assert.isAtMost(entries.length, 10)
        assert.strictEqual(new Set(entries.map(([n]) => n.toLowerCase())).size, entries.length)
        for (const [n, v] of entries) {
          assert.match(n, /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/)
          assert.notMatch(n.toLowerCase(), /^(host|cookie|traceparent|content-type|proxy-|x-b3-)/)
          assert.notMatch(v, /[\u0000-\u0008\u000a-\u001f\u007f-\u009f]/)
        }
      } else {
        // A refusal names a header that is present (or the whole set), and never carries a value.
        assert.isTrue(verdict.field === "headers" || entries.some(([n]) => verdict.field === headerField(n)))
        assert.notInclude(verdict.message, "\u00a7")
      }
    }))
  })
})

describe("webhook endpoint header rules (svc's own headers refused too)", () => {
  it("a header a delivery already carries, in any case, is refused; the same name is accepted for a collector", () => {
    for (
      const name of [
        "Content-Type",
        "user-agent",
        "ACCEPT-ENCODING",
        "X-Svc-Signature",
        "x-svc-anything",
        "Webhook-Id",
        "webhook-future"
      ]
    ) {
      const verdict = checkHeaders({ [name]: "v" }, OWN_HEADERS)
      assert.strictEqual(verdict._tag, "Refused", name)
      assert.strictEqual((verdict as Extract<typeof verdict, { _tag: "Refused" }>).field, headerField(name))
    }
    assert.strictEqual(checkHeaders({ "X-Svc-Signature": "v", "Webhook-Id": "v" })._tag, "Ok")
    assert.strictEqual(checkHeaders({ "X-Routing-Key": "eu", Authorization: "Bearer t" }, OWN_HEADERS)._tag, "Ok")
  })

  it("every header a delivery sets is one of OWN_HEADERS", () => {
    const own = Object.keys(deliveryHeaders(["whsec_a"], { id: "e", type: "t" }, 1, "{}"))
    for (const name of [...own, "user-agent", "accept-encoding"]) {
      assert.strictEqual(checkHeaders({ [name]: "v" }, OWN_HEADERS)._tag, "Refused", name)
    }
  })
})
