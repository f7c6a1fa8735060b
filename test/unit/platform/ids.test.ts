import { assert, describe, it } from "@effect/vitest"
import { randomBytes } from "node:crypto"
import { validate, version } from "uuid"
import { newId, uuidText } from "../../../src/platform/Ids.ts"

describe("newId", () => {
  it("makes valid v7 UUIDs, strictly increasing within a process and unique, across pool refills", () => {
    const ids = Array.from({ length: 10_000 }, newId)
    for (const id of ids) {
      assert.isTrue(validate(id), id)
      assert.strictEqual(version(id), 7)
    }
    for (let i = 1; i < ids.length; i++) assert.isTrue(ids[i - 1]! < ids[i]!, `${ids[i - 1]} then ${ids[i]}`)
    assert.strictEqual(new Set(ids).size, ids.length)
  })

  it("carries the current time in its first 48 bits", () => {
    const before = Date.now()
    const id = newId()
    const millis = parseInt(id.slice(0, 8) + id.slice(9, 13), 16)
    assert.isAtLeast(millis, before)
    assert.isAtMost(millis, Date.now() + 1)
  })
})

/** The 8-4-4-4-12 text of 16 bytes, from Node's own hex encoding. */
const reference = (bytes: Uint8Array) => {
  const hex = Buffer.from(bytes).toString("hex")
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`
}

describe("uuidText", () => {
  it("writes the lowercase 8-4-4-4-12 hex text of its bytes, for every byte value in every position", () => {
    const bytes = new Uint8Array(16)
    for (let value = 0; value < 256; value++) {
      bytes.fill(value)
      assert.strictEqual(uuidText(bytes), reference(bytes))
    }
    for (let i = 0; i < 1_000; i++) {
      const random = new Uint8Array(randomBytes(16))
      assert.strictEqual(uuidText(random), reference(random))
    }
  })

  it("returns a new string each time, not a view of its reused buffer", () => {
    const first = uuidText(new Uint8Array(16).fill(1))
    uuidText(new Uint8Array(16).fill(2))
    assert.strictEqual(first, "01010101-0101-0101-0101-010101010101")
  })
})
