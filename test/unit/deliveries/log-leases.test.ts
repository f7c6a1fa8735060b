/**
 * What a process knows of its leases on the log decides how far a target's
 * cursor may move: never past a row handed out and not yet settled, so a
 * row a process dies holding is handed out again by the next lease.
 */
import { describe, expect, it } from "@effect/vitest"
import fc from "fast-check"
import { makeLogLeases } from "../../../src/deliveries/log/HeldLeases.ts"

const target = "t"

describe("the log's leases as a process knows them", () => {
  it("the cursor stays below the lowest row still in flight, whatever order sends finish in", () =>
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 40 }),
        fc.integer({ min: 0, max: 1_000 }),
        fc.array(fc.nat(), { maxLength: 60 }),
        (n, start, order) => {
          const leases = makeLogLeases()
          const seqs = Array.from({ length: n }, (_, i) => BigInt(start + 1 + i * 3))
          const mark = seqs[seqs.length - 1]!
          leases.taken(target, "L", mark, seqs, 30)
          const pending = new Set(seqs)
          // Settle in an arbitrary order, a few at a time.
          const remaining = [...seqs]
          for (const pick of order) {
            if (remaining.length === 0) break
            const [seq] = remaining.splice(pick % remaining.length, 1)
            pending.delete(seq!)
            const { cursor } = leases.settle(target, "L", [seq!])!
            const low = [...pending].reduce<bigint | undefined>((a, b) => a === undefined || b < a ? b : a, undefined)
            expect(cursor).toBe(low === undefined ? mark : low - 1n)
          }
        }
      )
    ))

  it("rows of a batch the database refused hold the cursor back until they are settled", () => {
    const leases = makeLogLeases()
    leases.taken(target, "L", 30n, [10n, 20n, 30n], 30)
    expect(leases.settle(target, "L", [10n])!.cursor).toBe(19n)
    leases.keep(target, "L", [10n])
    expect(leases.settle(target, "L", [20n, 30n])!.cursor).toBe(9n)
    // The refused batch written at last.
    expect(leases.settle(target, "L", [10n])!.cursor).toBe(30n)
  })

  it("a new lease of the target replaces what was known; the old lease moves nothing", () => {
    const leases = makeLogLeases()
    leases.taken(target, "old", 5n, [4n, 5n], 30)
    leases.taken(target, "new", 3n, [4n], 30)
    expect(leases.settle(target, "old", [4n, 5n])).toBeUndefined()
    expect(leases.settle(target, "new", [4n])!.cursor).toBe(4n)
    leases.forget(target, "old")
    expect(leases.size()).toBe(1)
    leases.forget(target, "new")
    expect(leases.size()).toBe(0)
  })
})
