/**
 * Broker URLs of notification endpoints: what each form means, the hint
 * that hides credentials, virtual host and query, the host normalised as an
 * `https` URL's is before the address checks, and refusals that name the
 * parameter without echoing the URL.
 */
import { assert, describe, it } from "@effect/vitest"
import { type BrokerTarget, parseBrokerUrl, parseEndpointUrl } from "../../../src/brokers/BrokerUrl.ts"

const ok = (raw: string): BrokerTarget => {
  const parsed = parseEndpointUrl(raw)
  if (parsed._tag !== "Ok") throw new Error(`refused ${raw}: ${parsed.message}`)
  return parsed.target as BrokerTarget
}
const refused = (raw: string): string => {
  const parsed = parseBrokerUrl(raw)
  if (parsed._tag !== "Refused") throw new Error(`accepted ${raw}`)
  return parsed.message
}

describe("broker URLs", () => {
  it("amqp: credentials, virtual host, exchange, routing key, default ports; the hint shows scheme, host and port only", () => {
    const target = ok("amqp://svc:p%40ss@Rabbit.Example.com/prod?exchange=svc.events&routing_key=approvals")
    assert.include(target, { kind: "amqp", tls: false, port: 5672, username: "svc", password: "p@ss", vhost: "prod" })
    assert.include(target, { exchange: "svc.events", routingKey: "approvals" })
    assert.strictEqual(target.hint, "amqp://rabbit.example.com/…")
    assert.strictEqual(
      target.url.href,
      "amqp://svc:p%40ss@rabbit.example.com/prod?exchange=svc.events&routing_key=approvals"
    )
    assert.include(ok("amqps://h.example.com?exchange=x"), { tls: true, port: 5671, vhost: "/", routingKey: undefined })
    assert.strictEqual(ok("amqp://h.example.com/%2Fnested?exchange=x").vhost, "/nested")
    assert.strictEqual(ok("amqps://u:p@h.example.com:443/v?exchange=x").port, 443)
    assert.strictEqual(ok("amqps://u:p@h.example.com:443/v?exchange=x").hint, "amqps://h.example.com:443/…")
  })

  it("nats: subject, user and password or a token, default port; tls:// is TLS", () => {
    assert.include(ok("nats://u:p@nats.example.com?subject=svc.approvals"), {
      kind: "nats",
      tls: false,
      port: 4222,
      username: "u",
      password: "p",
      subject: "svc.approvals"
    })
    assert.include(ok("tls://s3cr3ttoken@nats.example.com:4443?subject=a"), {
      tls: true,
      port: 4443,
      username: "s3cr3ttoken",
      password: ""
    })
    assert.strictEqual(ok("tls://s3cr3ttoken@nats.example.com:4443?subject=a").hint, "tls://nats.example.com:4443/…")
  })

  it("the host is normalised as in an https URL before it is checked: other IPv4 spellings, case, IDN", () => {
    assert.strictEqual(ok("amqp://0x7f.1/?exchange=x").host._tag, "Ip")
    assert.strictEqual(String((ok("amqp://2130706433/?exchange=x").host as { address: unknown }).address), "127.0.0.1")
    assert.strictEqual(ok("nats://[::1]?subject=a").host._tag, "Ip")
    for (
      const raw of [
        "amqp://localhost/?exchange=x",
        "nats://ｌｏｃａｌｈｏｓｔ?subject=a",
        "amqp://metadata.google.internal/?exchange=x"
      ]
    ) {
      assert.strictEqual(refused(raw), "the host is a local or metadata name", raw)
    }
  })

  it("refusals name the parameter and never echo the URL or its credentials", () => {
    const cases: ReadonlyArray<readonly [string, string]> = [
      ["amqp://u:s3cret@h.example.com/", "exchange is required"],
      ["amqp://u:s3cret@h.example.com/?exchange=", "exchange is required"],
      ["amqp://u:s3cret@h.example.com/?exchange=has space", "exchange is required"],
      [
        `amqp://u:s3cret@h.example.com/?exchange=x&routing_key=${"k".repeat(256)}`,
        "routing_key is longer than 255 bytes"
      ],
      ["amqp://u:s3cret@h.example.com/?exchange=x&frameMax=1", "unknown query parameter \"frameMax\""],
      ["amqp://u:s3cret@h.example.com/?exchange=x&exchange=y", "exchange is given more than once"],
      ["amqp://u:s3cret@h.example.com/%ZZ?exchange=x", "invalid percent-escape"],
      ["nats://u:s3cret@h.example.com", "subject is required"],
      ["nats://u:s3cret@h.example.com?subject=a..b", "subject is required"],
      ["nats://u:s3cret@h.example.com?subject=a b", "subject is required"],
      ["nats://u:s3cret@h.example.com/x?subject=a", "a nats URL has no path"],
      ["amqp://u:s3cret@h.example.com:0/?exchange=x", "port must not be 0"],
      ["redis://u:s3cret@h.example.com/", "must use https, amqp, amqps, nats or tls"]
    ]
    for (const [raw, text] of cases) {
      const message = refused(raw)
      assert.include(message, text, raw)
      assert.notInclude(message, "s3cret", raw)
    }
  })

  it("https URLs keep their own rules (no credentials)", () => {
    assert.strictEqual(parseEndpointUrl("https://hooks.example.com/x")._tag, "Ok")
    const withCredentials = parseEndpointUrl("https://u:p@hooks.example.com/x")
    assert.deepStrictEqual(withCredentials, { _tag: "Refused", message: "the URL must not contain credentials" })
  })
})
