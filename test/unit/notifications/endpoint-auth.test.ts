/**
 * The pure parts of endpoint authentication (docs/webhooks.md, "Endpoint
 * authentication"): how a client certificate is checked, how the token
 * request is made, how a token endpoint's answer is read, and how long a
 * token is reused.
 */
import { assert, describe, it } from "@effect/vitest"
import fc from "fast-check"
import { checkClientCertificate } from "../../../src/notifications/auth/ClientCertificate.ts"
import {
  DEFAULT_LIFETIME_SECONDS,
  parseTokenAnswer,
  refreshMarginSeconds,
  tokenRequest
} from "../../../src/notifications/auth/Tokens.ts"
import { OutboundFailure } from "../../../src/outbound/OutboundHttp.ts"
import { makeTestTls } from "../../support/tls.ts"

const json = (value: unknown) => new TextEncoder().encode(JSON.stringify(value))
const DAY = 86_400_000

describe("a client certificate is checked when set", () => {
  it("parses, its key matches, it is valid now and for client authentication; else the field at fault", async () => {
    const tls = await makeTestTls()
    const now = Date.now()
    const client = await tls.issueClient("svc-client")
    const other = await tls.issueClient("other")
    const checked = checkClientCertificate(`${client.cert}\n${tls.caCert}`, client.key, now)
    assert.isFalse("field" in checked)
    if ("field" in checked) return
    assert.strictEqual(checked.view.subject, "CN=svc-client")
    assert.strictEqual(checked.view.issuer, "CN=svc test CA")
    assert.isAbove(Date.parse(checked.view.not_after), now)
    assert.strictEqual(checked.certificate.match(/BEGIN CERTIFICATE/g)?.length, 2)

    const field = (certificate: string, key: string, at = now) => {
      const refused = checkClientCertificate(certificate, key, at)
      return "field" in refused ? refused.field : undefined
    }
    assert.strictEqual(field("no PEM here", client.key), "tls_client_certificate.certificate")
    assert.strictEqual(
      field("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----", client.key),
      "tls_client_certificate.certificate"
    )
    assert.strictEqual(
      field(client.cert, "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----"),
      "tls_client_certificate.private_key"
    )
    assert.strictEqual(field(client.cert, other.key), "tls_client_certificate.private_key")
    // Expired, or not yet valid, on the caller's clock.
    assert.strictEqual(field(client.cert, client.key, now + 31 * DAY), "tls_client_certificate.certificate")
    assert.strictEqual(field(client.cert, client.key, now - 2 * DAY), "tls_client_certificate.certificate")
    // A server certificate (extended key usage serverAuth only) is not a client certificate.
    assert.strictEqual(field(tls.cert, tls.key), "tls_client_certificate.certificate")
    // A refusal never quotes the key.
    const refused = checkClientCertificate(client.cert, other.key, now)
    assert.notInclude(JSON.stringify(refused), other.key.split("\n")[1]!)
  })
})

describe("the token request", () => {
  const target = {
    key: "k",
    tokenUrl: "https://login.example.com/token",
    clientId: "svc client:1",
    clientSecret: "s3cr+t/=%",
    scope: "a b",
    audience: undefined,
    method: "client_secret_basic" as const
  }

  it("client_secret_basic: each part form-encoded, then Basic (RFC 6749, section 2.3.1); the secret not in the body", () => {
    const request = tokenRequest(target)
    const decoded = Buffer.from(request.headers["authorization"]!.slice("Basic ".length), "base64").toString()
    assert.strictEqual(decoded, "svc+client%3A1:s3cr%2Bt%2F%3D%25")
    assert.deepStrictEqual(Object.fromEntries(new URLSearchParams(request.body)), {
      grant_type: "client_credentials",
      scope: "a b"
    })
  })

  it("client_secret_post: the credentials in the form, no Authorization header", () => {
    const request = tokenRequest({ ...target, method: "client_secret_post", audience: "https://api" })
    assert.isUndefined(request.headers["authorization"])
    assert.deepStrictEqual(Object.fromEntries(new URLSearchParams(request.body)), {
      grant_type: "client_credentials",
      scope: "a b",
      audience: "https://api",
      client_id: "svc client:1",
      client_secret: "s3cr+t/=%"
    })
  })
})

describe("a token endpoint's answer", () => {
  it("a Bearer access_token with its lifetime; without expires_in the default one", () => {
    assert.deepStrictEqual(
      parseTokenAnswer(200, json({ access_token: "t1", token_type: "bearer", expires_in: 60 }), false),
      {
        token: "t1",
        lifetime: 60
      }
    )
    assert.deepStrictEqual(parseTokenAnswer(200, json({ access_token: "t1" }), false), {
      token: "t1",
      lifetime: DEFAULT_LIFETIME_SECONDS
    })
  })

  it("refused answers say why without quoting the body, but a registered OAuth error code", () => {
    const message = (status: number, body: unknown, truncated = false) => {
      const answer = parseTokenAnswer(status, json(body), truncated)
      return answer instanceof OutboundFailure ? answer.message : "accepted"
    }
    assert.strictEqual(
      message(401, { error: "invalid_client" }),
      "OAuth token request failed: the token endpoint answered HTTP 401 (invalid_client)"
    )
    assert.strictEqual(
      message(400, { error: "s3cret-echoed" }),
      "OAuth token request failed: the token endpoint answered HTTP 400"
    )
    assert.match(message(200, { access_token: "t" }, true), /over SVC_WEBHOOK_TOKEN_MAX_BYTES/)
    assert.match(message(200, { access_token: "two words" }), /no usable access_token/)
    assert.match(message(200, { access_token: "t\r\nX-Injected: 1" }), /no usable access_token/)
    assert.match(message(200, { access_token: "t", token_type: "mac" }), /token_type other than Bearer/)
    assert.match(message(200, "not an object"), /no usable access_token/)
  })
})

describe("how long a token is reused", () => {
  it("until 10 % of its lifetime before it ends, at least 30 s before, at most half of it", () => {
    assert.strictEqual(refreshMarginSeconds(3600), 360)
    assert.strictEqual(refreshMarginSeconds(120), 30)
    assert.strictEqual(refreshMarginSeconds(10), 5)
    fc.assert(fc.property(fc.double({ min: 0.001, max: 1e7, noNaN: true }), (lifetime) => {
      const margin = refreshMarginSeconds(lifetime)
      return margin > 0 && margin <= lifetime / 2 && margin >= Math.min(30, lifetime / 2) &&
        margin >= Math.min(lifetime / 10, lifetime / 2)
    }))
  })
})
