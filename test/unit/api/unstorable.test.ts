import { assert, describe, it } from "@effect/vitest"
import * as fc from "fast-check"
import { findUnstorableStrings, isUnstorableString } from "../../../src/api/Common.ts"

const BAD = fc.constantFrom("\u0000", "\ud800", "\udbff", "\udc00", "\udfff")

/** A string of whole code points, with `bad` inserted between two of them. */
const withBad = fc.tuple(fc.string({ unit: "grapheme" }), BAD, fc.nat()).map(([s, bad, at]) => {
  const points = Array.from(s)
  const i = at % (points.length + 1)
  return [...points.slice(0, i), bad, ...points.slice(i)].join("")
})

describe("strings PostgreSQL cannot store", () => {
  it("any string holding NUL or an unpaired surrogate is unstorable; any well-formed string without NUL is storable", () => {
    fc.assert(fc.property(withBad, (s) => assert.isTrue(isUnstorableString(s))), { numRuns: 2000 })
    fc.assert(
      fc.property(
        fc.string({ unit: "binary" }).filter((s) => !s.includes("\u0000")),
        (s) => assert.isFalse(isUnstorableString(s))
      ),
      { numRuns: 2000 }
    )
    assert.isFalse(isUnstorableString("😀\ud83d\ude00\u{10FFFF}\ufffd"))
  })

  it("found wherever it is in a JSON value, member names included, at its path; nothing else is reported", () => {
    const key = fc.string({ unit: "grapheme", maxLength: 5 })
    fc.assert(
      fc.property(
        fc.jsonValue({ maxDepth: 4 }),
        fc.array(fc.oneof(fc.nat({ max: 5 }), key), { maxLength: 5 }),
        withBad,
        fc.boolean(),
        (base, steps, bad, asName) => {
          // Plant `bad` at the first container reachable along `steps`.
          const root: { value: unknown } = { value: structuredClone(base) }
          let holder: Record<string, unknown> | Array<unknown> = root as unknown as Record<string, unknown>
          let slot: string | number = "value"
          const path: Array<string | number> = []
          for (const step of steps) {
            const current: unknown = (holder as Record<string | number, unknown>)[slot]
            if (Array.isArray(current) && current.length > 0) {
              const i = (typeof step === "number" ? step : step.length) % current.length
              holder = current
              slot = i
              path.push(i)
            } else if (current !== null && typeof current === "object" && Object.keys(current).length > 0) {
              const names = Object.keys(current)
              const name = names[(typeof step === "number" ? step : step.length) % names.length]!
              holder = current as Record<string, unknown>
              slot = name
              path.push(name)
            } else break
          }
          if (asName) {
            const object: Record<string, unknown> = {}
            Object.defineProperty(object, bad, { value: 1, enumerable: true, writable: true, configurable: true })
            ;(holder as Record<string | number, unknown>)[slot] = object
            path.push(bad)
          } else {
            ;(holder as Record<string | number, unknown>)[slot] = bad
          }
          const found = findUnstorableStrings(root.value)
          assert.deepStrictEqual(found, [path])
        }
      ),
      { numRuns: 1000 }
    )
  })

  it("a document without one reports nothing", () => {
    fc.assert(
      fc.property(fc.jsonValue({ maxDepth: 5 }), (value) => assert.deepStrictEqual(findUnstorableStrings(value), [])),
      { numRuns: 1000 }
    )
  })
})
