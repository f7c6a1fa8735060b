import { assert, describe, it } from "@effect/vitest"
import {
  argumentsDigest,
  canonicalJson,
  changedPointers,
  MAX_CHANGED_CHARACTERS,
  MAX_CHANGED_POINTERS
} from "../../../src/approvals/ArgumentsDiff.ts"

describe("what an edit changed", () => {
  it("lists the deepest members and items added, removed or replaced, as JSON Pointers", () => {
    assert.deepStrictEqual(
      changedPointers({ amount: 120, note: "x", to: { iban: "A" } }, { amount: 100, to: { iban: "B" }, memo: "m" }),
      [
        "/amount",
        "/memo",
        "/note",
        "/to/iban"
      ]
    )
    assert.deepStrictEqual(changedPointers({ items: [1, 2, 3] }, { items: [1, 5] }), ["/items/1", "/items/2"])
    assert.deepStrictEqual(changedPointers({ "a/b": 1, "c~d": 1 }, { "a/b": 2, "c~d": 2 }), ["/a~1b", "/c~0d"])
    assert.deepStrictEqual(changedPointers({ a: 1 }, [1]), [""])
    assert.deepStrictEqual(changedPointers({ a: { b: [1] } }, { a: { b: [1] } }), [])
    assert.deepStrictEqual(changedPointers({ a: null }, { a: {} }), ["/a"])
  })
})

describe("what an edit changed is bounded", () => {
  it(`past ${MAX_CHANGED_POINTERS} pointers the list collapses to the top-level members that differ`, () => {
    const before = { items: Array.from({ length: 500 }, (_, i) => i), keep: 1, note: "a" }
    const after = { items: Array.from({ length: 500 }, (_, i) => i + 1), keep: 1, note: "b" }
    assert.deepStrictEqual(changedPointers(before, after), ["/items", "/note"])
    const exactly = { items: Array.from({ length: MAX_CHANGED_POINTERS }, (_, i) => i) }
    assert.strictEqual(
      changedPointers(exactly, { items: exactly.items.map((i) => i + 1) }).length,
      MAX_CHANGED_POINTERS
    )
  })

  it(`past ${MAX_CHANGED_CHARACTERS} characters of pointers, or with too many top-level changes, it is the whole value [""]`, () => {
    // Long member names: each pointer repeats them (the shape that grew a 240 KB edit into a 48 MB approval).
    const key = "k".repeat(400)
    const before = { [key]: Array.from({ length: 60 }, () => 1) }
    const after = { [key]: Array.from({ length: 60 }, () => 2) }
    assert.deepStrictEqual(changedPointers(before, after), [`/${key}`])
    const wide = Object.fromEntries(Array.from({ length: 300 }, (_, i) => [`m${i}`, i]))
    assert.deepStrictEqual(
      changedPointers(wide, Object.fromEntries(Object.entries(wide).map(([k, v]) => [k, v + 1]))),
      [""]
    )
    assert.deepStrictEqual(
      changedPointers(Array.from({ length: 300 }, () => 0), Array.from({ length: 300 }, () => 1)),
      [""]
    )
  })

  it("the largest edit the schema admits yields a small list, quickly", () => {
    const key = "k".repeat(1000)
    const before = { [key]: Array.from({ length: 60_000 }, () => 1) }
    const after = { [key]: Array.from({ length: 60_000 }, () => 2) }
    // The fastest of three: a shared machine preempts single runs.
    let took = Infinity
    for (let i = 0; i < 3; i++) {
      const started = performance.now()
      assert.deepStrictEqual(changedPointers(before, after), [`/${key}`])
      took = Math.min(took, performance.now() - started)
    }
    assert.isBelow(took, 300)
  })
})

describe("the arguments digest", () => {
  it("is the SHA-256 of the JSON with members sorted by name: member order does not change it, a value does", () => {
    assert.strictEqual(
      canonicalJson({ b: [1, { d: true, c: null }], a: "é" }),
      "{\"a\":\"é\",\"b\":[1,{\"c\":null,\"d\":true}]}"
    )
    assert.strictEqual(
      argumentsDigest({ amount: 100, currency: "EUR" }),
      argumentsDigest({ currency: "EUR", amount: 100 })
    )
    assert.notStrictEqual(argumentsDigest({ amount: 100 }), argumentsDigest({ amount: 101 }))
    assert.match(argumentsDigest({}), /^[0-9a-f]{64}$/)
    assert.strictEqual(argumentsDigest({}), "44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a")
  })
})
