import { assert, describe, it } from "vitest"
import { jsonDiff } from "../../../console/src/diff.ts"

describe("the Review screen's structural diff", () => {
  it("names changed, added and removed members by JSON path", () => {
    assert.deepStrictEqual(
      jsonDiff(
        { category: "sales", items: [{ sku: "a", price: 1 }, { sku: "b" }], notes: "x", "odd key": 1 },
        { category: "billing", items: [{ sku: "a", price: 2 }], tags: ["t"], "odd key": 1 }
      ),
      [
        { path: "$.category", kind: "changed", before: "sales", after: "billing" },
        { path: "$.items[0].price", kind: "changed", before: 1, after: 2 },
        { path: "$.items[1]", kind: "removed", before: { sku: "b" } },
        { path: "$.notes", kind: "removed", before: "x" },
        { path: "$.tags", kind: "added", after: ["t"] }
      ]
    )
  })

  it("reports nothing for equal values, and a change of type at the path where it happens", () => {
    assert.deepStrictEqual(jsonDiff({ a: [1, { b: null }] }, { a: [1, { b: null }] }), [])
    assert.deepStrictEqual(jsonDiff({ a: { b: 1 } }, { a: [1] }), [{
      path: "$.a",
      kind: "changed",
      before: { b: 1 },
      after: [1]
    }])
    assert.deepStrictEqual(jsonDiff({ "x y": 1 }, { "x y": 2 }), [{
      path: "$[\"x y\"]",
      kind: "changed",
      before: 1,
      after: 2
    }])
  })
})
