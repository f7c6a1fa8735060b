import { assert, describe, it } from "@effect/vitest"
import { validate, version } from "uuid"
import { newId } from "../../../src/platform/Ids.ts"

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
