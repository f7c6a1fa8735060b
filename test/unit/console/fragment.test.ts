import { assert, describe, it } from "vitest"
import { fragmentToken } from "../../../console/src/fragment.ts"

describe("the token in a mailed link's fragment", () => {
  it("is the decoded fragment without its #", () => {
    assert.strictEqual(fragmentToken("#svr_abc-DEF_123"), "svr_abc-DEF_123")
    assert.strictEqual(fragmentToken("#svl_a%2Db"), "svl_a-b")
  })

  it("is empty without a fragment", () => {
    assert.strictEqual(fragmentToken(""), "")
    assert.strictEqual(fragmentToken("#"), "")
  })

  it("is empty, not a failure, for a fragment that is not valid percent-encoding (a mangled link must not stop the console loading)", () => {
    assert.strictEqual(fragmentToken("#%"), "")
    assert.strictEqual(fragmentToken("#svr_%E0%A4%A"), "")
  })
})
