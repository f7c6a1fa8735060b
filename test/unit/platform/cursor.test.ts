import { assert, describe, it } from "@effect/vitest"
import { Option } from "effect"
import * as fc from "fast-check"
import { decodeCursor, encodeCursor, page } from "../../../src/platform/Cursor.ts"

describe("keyset cursors", () => {
  it("round-trips any sequence number", () => {
    fc.assert(fc.property(fc.bigInt({ min: 0n, max: 2n ** 63n - 1n }), (seq) => {
      assert.deepStrictEqual(decodeCursor(encodeCursor(seq)), Option.some(seq.toString()))
    }))
  })

  it("refuses cursors it did not issue", () => {
    fc.assert(fc.property(fc.string(), (junk) => {
      const decoded = decodeCursor(junk)
      if (Option.isSome(decoded)) assert.match(decoded.value, /^\d+$/)
    }))
    assert.isTrue(Option.isNone(decodeCursor("not-a-cursor")))
    assert.isTrue(Option.isNone(decodeCursor(Buffer.from(JSON.stringify({ s: "1; DROP" })).toString("base64url"))))
  })

  it("pages newest first without skipping or repeating while new rows arrive", () => {
    fc.assert(fc.property(fc.integer({ min: 0, max: 60 }), fc.integer({ min: 1, max: 10 }), fc.integer({ min: 0, max: 20 }), (n, limit, arrivals) => {
      let rows = Array.from({ length: n }, (_, i) => ({ seq: i + 1 }))
      const fetch = (below: number | undefined) =>
        rows.filter((row) => below === undefined || row.seq < below).sort((a, b) => b.seq - a.seq).slice(0, limit + 1)
      const seen: Array<number> = []
      let cursor: string | null = null
      let first = true
      while (first || cursor !== null) {
        const below: number | undefined = cursor === null ? undefined : Number(Option.getOrThrow(decodeCursor(cursor)))
        const result: { items: ReadonlyArray<{ seq: number }>; next_cursor: string | null } = page(fetch(below), limit)
        seen.push(...result.items.map((row) => row.seq))
        cursor = result.next_cursor
        if (first) {
          // newer rows arrive after the first page was read
          rows = [...rows, ...Array.from({ length: arrivals }, (_, i) => ({ seq: n + i + 1 }))]
          first = false
        }
      }
      assert.deepStrictEqual(seen, Array.from({ length: n }, (_, i) => n - i))
    }))
  })
})
