import { assert, describe, it } from "@effect/vitest"
import fc from "fast-check"
import { maskSettingText } from "../../../src/platform/SettingText.ts"

describe("a message about a setting shows no URL's user name or password", () => {
  it("well-formed and mistyped URLs, passwords holding @ or /, a token alone: all become ***", () => {
    const cases: ReadonlyArray<readonly [string, string]> = [
      ["smtp://svc:hunter2@mail.example.com:587", "smtp://***@mail.example.com:587"],
      ["SVC_SMTP_URL: \"smtp//svc:hunter2@mail.example.com\"", "SVC_SMTP_URL: \"smtp//***@mail.example.com\""],
      ["htp://svc:hunter2@mail.example.com", "htp://***@mail.example.com"],
      ["svc:hunter2@db.example", "***@db.example"],
      ["postgres://svc:hun@ter/2@db.example/svc", "postgres://***@db.example/svc"],
      ["nats://tok3n-hunter2@nats.example", "nats://***@nats.example"]
    ]
    for (const [text, masked] of cases) assert.strictEqual(maskSettingText(text), masked)
  })

  it("text without user information is left as it is (an address, a port, a time)", () => {
    for (const text of ["mail ana@example.com", "http://127.0.0.1:4318", "at 09:00 the port 5432"]) {
      assert.strictEqual(maskSettingText(text), text)
    }
  })

  it("property: a password planted after user: in any URL-like word never survives", () => {
    const scheme = fc.stringMatching(/^([a-z]{1,6}(:\/\/|\/\/|:))?$/)
    const user = fc.stringMatching(/^[a-zA-Z0-9._-]{1,12}$/)
    const password = fc.stringMatching(/^[a-zA-Z0-9!$&()*+,;=@/.~-]{6,20}$/)
    fc.assert(
      fc.property(scheme, user, password, (prefix, name, secret) => {
        const text = `x "${prefix}${name}:${secret}X@host.example:25/path" y`
        assert.notInclude(maskSettingText(text), `${secret}X`)
      })
    )
  })
})
