import { assert, describe, it } from "@effect/vitest"
import { OutboundFailure, toFailure } from "../../../src/outbound/Request.ts"

const deadline = () => new OutboundFailure({ reason: "timeout", message: "no complete answer within 1000 ms" })
const thrown = (code: string, wrapped = false) => {
  const error = Object.assign(new Error("undici's text, which may name the host"), { code })
  return wrapped ? new TypeError("fetch failed", { cause: error }) : error
}

describe("what a failed exchange is recorded as", () => {
  it("undici's headers and body timeouts are the deadline's failure, whichever timer fired first", () => {
    for (const code of ["UND_ERR_HEADERS_TIMEOUT", "UND_ERR_BODY_TIMEOUT"]) {
      assert.deepStrictEqual(toFailure(thrown(code), deadline), deadline())
      assert.deepStrictEqual(toFailure(thrown(code, true), deadline), deadline())
    }
  })

  it("other failures name their code, never the library's message", () => {
    const connect = toFailure(thrown("UND_ERR_CONNECT_TIMEOUT"), deadline)
    assert.deepStrictEqual([connect.reason, connect.message], [
      "timeout",
      "the exchange timed out (UND_ERR_CONNECT_TIMEOUT)"
    ])
    const tls = toFailure(thrown("CERT_HAS_EXPIRED", true), deadline)
    assert.deepStrictEqual([tls.reason, tls.message], [
      "tls",
      "TLS verification or handshake failed (CERT_HAS_EXPIRED)"
    ])
    const refused = toFailure(thrown("ECONNREFUSED"), deadline)
    assert.deepStrictEqual([refused.reason, refused.message], ["network", "the connection failed (ECONNREFUSED)"])
  })
})
