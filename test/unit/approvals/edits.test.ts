import { assert, describe, it } from "@effect/vitest"
import { argumentsDigest, canonicalJson, changedPointers } from "../../../src/approvals/Edits.ts"

describe("what an edit changed", () => {
  it("lists the deepest members and items added, removed or replaced, as JSON Pointers", () => {
    assert.deepStrictEqual(changedPointers({ amount: 120, note: "x", to: { iban: "A" } }, { amount: 100, to: { iban: "B" }, memo: "m" }), [
      "/amount",
      "/memo",
      "/note",
      "/to/iban"
    ])
    assert.deepStrictEqual(changedPointers({ items: [1, 2, 3] }, { items: [1, 5] }), ["/items/1", "/items/2"])
    assert.deepStrictEqual(changedPointers({ "a/b": 1, "c~d": 1 }, { "a/b": 2, "c~d": 2 }), ["/a~1b", "/c~0d"])
    assert.deepStrictEqual(changedPointers({ a: 1 }, [1]), [""])
    assert.deepStrictEqual(changedPointers({ a: { b: [1] } }, { a: { b: [1] } }), [])
    assert.deepStrictEqual(changedPointers({ a: null }, { a: {} }), ["/a"])
  })
})

describe("the arguments digest", () => {
  it("is the SHA-256 of the JSON with members sorted by name: member order does not change it, a value does", () => {
    assert.strictEqual(canonicalJson({ b: [1, { d: true, c: null }], a: "é" }), '{"a":"é","b":[1,{"c":null,"d":true}]}')
    assert.strictEqual(argumentsDigest({ amount: 100, currency: "EUR" }), argumentsDigest({ currency: "EUR", amount: 100 }))
    assert.notStrictEqual(argumentsDigest({ amount: 100 }), argumentsDigest({ amount: 101 }))
    assert.match(argumentsDigest({}), /^[0-9a-f]{64}$/)
    assert.strictEqual(argumentsDigest({}), "44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a")
  })
})
