/**
 * Masking in text that came from elsewhere: the user information of a URL
 * echoed in a broker's or a library's message is masked whatever its length
 * (a one-character password included), and text without a URL is left as it is.
 */
import { assert, describe, it } from "@effect/vitest"
import fc from "fast-check"
import {
  fromOutside,
  MASK,
  maskNeedles,
  maskUserinfo,
  MAX_OUTSIDE_TEXT,
  urlNeedles
} from "../../../src/secrets/Masking.ts"

const userinfoChar = fc.constantFrom(
  ..."abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._~%!$&'()*+,;="
)

describe("masking", () => {
  it("masks a URL's user and password however short, in any scheme, and keeps the rest of the message", () => {
    fc.assert(
      fc.property(
        fc.constantFrom("amqp", "amqps", "nats", "tls", "https"),
        fc.string({ unit: userinfoChar, minLength: 1, maxLength: 12 }),
        fc.string({ unit: userinfoChar, minLength: 1, maxLength: 12 }),
        (scheme, user, password) => {
          const message =
            `connect failed for ${scheme}://${user}:${password}@broker.example.com:5672/vhost (ACCESS_REFUSED)`
          const masked = maskUserinfo(message)
          assert.strictEqual(
            masked,
            `connect failed for ${scheme}://${MASK}@broker.example.com:5672/vhost (ACCESS_REFUSED)`
          )
        }
      )
    )
    assert.strictEqual(
      maskUserinfo("nats://t@127.0.0.1:4222 and amqp://u:p@h/"),
      `nats://${MASK}@127.0.0.1:4222 and amqp://${MASK}@h/`
    )
  })

  it("masks a megabyte of text of the shape that makes a scheme search quadratic, in one pass", () => {
    // Every `.` starts another candidate scheme: an unbounded scheme pattern
    // read the rest of the text from each, minutes for this much.
    for (const filler of ["a.".repeat(500_000), "a".repeat(1_000_000), "x://" + "b:".repeat(500_000)]) {
      const masked = maskUserinfo(`${filler} amqp://u:p@broker.example.com/`)
      assert.isTrue(masked.endsWith(` amqp://${MASK}@broker.example.com/`))
    }
    const longScheme = "a".repeat(40)
    assert.strictEqual(maskUserinfo(`${longScheme}://u:p@h`), `${longScheme}://${MASK}@h`)
  })

  it("leaves text without user information alone", () => {
    for (
      const text of [
        "no route to amqp://broker.example.com/",
        "mail me at ops@example.com",
        "ACCESS_REFUSED - Login was refused"
      ]
    ) {
      assert.strictEqual(maskUserinfo(text), text)
    }
  })

  it("searches a URL's credentials alone when they have four characters or more; shorter ones only in the URL", () => {
    const needles = urlNeedles("amqp://svc-user:abc@broker.example.com/?exchange=x")
    assert.include(needles, "svc-user")
    assert.notInclude(needles, "abc")
    assert.strictEqual(maskNeedles("user svc-user refused", needles), `user ${MASK} refused`)
    assert.strictEqual(maskUserinfo("the abc of amqp://svc-user:abc@broker"), `the abc of amqp://${MASK}@broker`)
  })

  it("text from outside is cut to MAX_OUTSIDE_TEXT characters before it is masked, marked with an ellipsis", () => {
    const huge = `refused by amqp://svc:pw@broker ${"x".repeat(20_000_000)}`
    const kept = fromOutside(huge, ["svc-secret"])
    assert.isAtMost(kept.length, MAX_OUTSIDE_TEXT + 1)
    assert.isTrue(kept.endsWith("…"))
    assert.isTrue(kept.startsWith(`refused by amqp://${MASK}@broker x`))
    assert.strictEqual(fromOutside("short and plain"), "short and plain")
    // A secret or user information running past the cut leaves nothing of itself behind.
    const needle = "token-0123456789"
    const atCut = fromOutside(`${"y".repeat(MAX_OUTSIDE_TEXT - 6)}${needle} more`, [needle])
    assert.notInclude(atCut, "token-")
    assert.isTrue(atCut.endsWith("…"))
    assert.isAtMost(atCut.length, MAX_OUTSIDE_TEXT + 1)
    const openUserinfo = fromOutside(`${"z ".repeat(MAX_OUTSIDE_TEXT / 2 - 10)}nats://user:secretpass@host`)
    assert.notInclude(openUserinfo, "secret")
    assert.notInclude(openUserinfo, "user:")
    // Never half a surrogate pair.
    const emoji = fromOutside(`${"a".repeat(MAX_OUTSIDE_TEXT - 1)}😀 and more`)
    assert.strictEqual(emoji, `${"a".repeat(MAX_OUTSIDE_TEXT - 1)}…`)
  })

  it("masks user information in one pass over ten megabytes of any shape, which a search reading on from every start could not finish", () => {
    // A quadratic scan of these is ~10^13 steps: far past the test's timeout.
    for (const filler of ["a://".repeat(2_500_000), "a.a:/".repeat(2_000_000), `x://${"b".repeat(10_000_000)}`]) {
      const masked = maskUserinfo(`${filler} nats://u:p@broker.example.com/`)
      assert.isTrue(masked.endsWith(` nats://${MASK}@broker.example.com/`))
    }
  })
})
