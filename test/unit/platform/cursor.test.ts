import { assert, describe, it } from "@effect/vitest"
import { Option } from "effect"
import * as fc from "fast-check"
import crypto from "node:crypto"
import { SecretBox } from "../../../src/platform/Crypto.ts"
import { type CursorScope, decodeCursor, encodeCursor, isSeq, page } from "../../../src/platform/Cursor.ts"

const box = SecretBox.make(crypto.randomBytes(32))
const mac = (message: string) => box.mac("cursor", message)
const scope: CursorScope = { orgId: "org-a", list: "runs", filters: ["task-1"] }
const MAX = 2n ** 63n - 1n

describe("keyset cursors", () => {
  it("round-trips any sequence number a bigint holds", () => {
    fc.assert(fc.property(fc.bigInt({ min: 0n, max: MAX }), (seq) => {
      assert.deepStrictEqual(decodeCursor(mac, scope, encodeCursor(mac, scope, seq)), Option.some(seq.toString()))
    }))
  })

  it("refuses anything it did not issue: junk, edits, sequences outside bigint", () => {
    fc.assert(fc.property(fc.string(), (junk) => {
      assert.isTrue(Option.isNone(decodeCursor(mac, scope, junk)))
    }))
    fc.assert(
      fc.property(fc.bigInt({ min: 0n, max: MAX }), fc.nat(), fc.integer({ min: 1, max: 63 }), (seq, at, flip) => {
        const cursor = encodeCursor(mac, scope, seq)
        const i = at % cursor.length
        const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_."
        const replaced = alphabet[(alphabet.indexOf(cursor[i]!) + flip) % alphabet.length]!
        const edited = cursor.slice(0, i) + replaced + cursor.slice(i + 1)
        if (edited !== cursor) assert.isTrue(Option.isNone(decodeCursor(mac, scope, edited)))
      })
    )
    // A sequence outside bigint, even with a valid MAC, is never a bound.
    fc.assert(fc.property(fc.bigInt({ min: MAX + 1n, max: 10n ** 30n }), (seq) => {
      assert.isFalse(isSeq(seq.toString()))
      assert.isTrue(Option.isNone(decodeCursor(mac, scope, encodeCursor(mac, scope, seq))))
    }))
    for (const bad of ["-1", "01", "1.5", "1e3", " 1", "", "9223372036854775808", "99999999999999999999"]) {
      assert.isFalse(isSeq(bad), bad)
      assert.isTrue(Option.isNone(decodeCursor(mac, scope, encodeCursor(mac, scope, bad))), bad)
    }
    assert.isTrue(isSeq("9223372036854775807"))
  })

  it("is bound to the organization, the list and its filters that issued it", () => {
    fc.assert(fc.property(fc.bigInt({ min: 0n, max: MAX }), (seq) => {
      const cursor = encodeCursor(mac, scope, seq)
      for (
        const other of [
          { ...scope, orgId: "org-b" },
          { ...scope, list: "tasks" },
          { ...scope, filters: ["task-2"] },
          { ...scope, filters: [] }
        ]
      ) {
        assert.isTrue(Option.isNone(decodeCursor(mac, other, cursor)))
      }
      // another master key: another installation's cursor
      const stranger = SecretBox.make(crypto.randomBytes(32))
      assert.isTrue(Option.isNone(decodeCursor((m) => stranger.mac("cursor", m), scope, cursor)))
    }))
  })

  it("pages newest first without skipping or repeating while new rows arrive", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: 60 }),
        fc.integer({ min: 1, max: 10 }),
        fc.integer({ min: 0, max: 20 }),
        (n, limit, arrivals) => {
          let rows = Array.from({ length: n }, (_, i) => ({ seq: i + 1 }))
          const fetch = (below: number | undefined) =>
            rows.filter((row) => below === undefined || row.seq < below).sort((a, b) => b.seq - a.seq).slice(
              0,
              limit + 1
            )
          const seen: Array<number> = []
          let cursor: string | null = null
          let first = true
          while (first || cursor !== null) {
            const below: number | undefined = cursor === null
              ? undefined
              : Number(Option.getOrThrow(decodeCursor(mac, scope, cursor)))
            const result: { items: ReadonlyArray<{ seq: number }>; next_cursor: string | null } = page(
              fetch(below),
              limit,
              (seq) => encodeCursor(mac, scope, seq)
            )
            seen.push(...result.items.map((row) => row.seq))
            cursor = result.next_cursor
            if (first) {
              // newer rows arrive after the first page was read
              rows = rows.concat(Array.from({ length: arrivals }, (_, i) => ({ seq: n + i + 1 })))
              first = false
            }
          }
          assert.deepStrictEqual(seen, Array.from({ length: n }, (_, i) => n - i))
        }
      )
    )
  })
})
