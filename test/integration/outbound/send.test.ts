import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer, Option } from "effect"
import { VERSION } from "../../../src/api/Version.ts"
import { OutboundHttp } from "../../../src/outbound/OutboundHttp.ts"
import { Resolver, type ResolverShape } from "../../../src/outbound/Resolver.ts"
import { SvcConfig } from "../../../src/platform/Config.ts"
import { fixedResolver } from "../../support/dns.ts"
import { HttpsReceiver, Reply } from "../../support/HttpsReceiver.ts"
import { encodedLoopbackUrls } from "../../support/ssrfCorpus.ts"
import { loopbackTargets, TestTls } from "../../support/tls.ts"

interface Setup {
  readonly resolver?: ResolverShape
  readonly allowedTargetCidrs?: ReadonlyArray<string>
  /** Default: the shared test CA. `null`: no extra CA (system store only). */
  readonly extraCaFile?: string | null
}

/** `OutboundHttp` trusting the shared test CA and reaching loopback, unless told otherwise. */
const outbound = (setup: Setup = {}) =>
  Layer.unwrap(Effect.gen(function*() {
    const tls = yield* TestTls.shared
    const base = loopbackTargets(tls)
    const config = SvcConfig.layerWith({
      allowedTargetCidrs: setup.allowedTargetCidrs ?? base.allowedTargetCidrs,
      extraCaFile: setup.extraCaFile === null
        ? Option.none()
        : Option.some(setup.extraCaFile ?? tls.caFile)
    })
    const resolver = setup.resolver === undefined ? Layer.empty : Layer.succeed(Resolver, setup.resolver)
    return OutboundHttp.layer.pipe(Layer.provide(config), Layer.provide(resolver))
  })).pipe(Layer.orDie)

const text = (bytes: Uint8Array) => new TextDecoder().decode(bytes)
const post = (url: string, extra: Partial<Parameters<OutboundHttp["Service"]["send"]>[0]> = {}) =>
  OutboundHttp.use((http) =>
    http.send({
      url,
      method: "POST",
      headers: { "content-type": "application/json" },
      body: "{}",
      timeout: "5 seconds",
      ...extra
    })
  )

describe("send: real HTTPS to a receiver verified against the extra CA", () => {
  it.live("delivers method, path, query, headers and exact body bytes, and answers status, headers and body", () =>
    Effect.gen(function*() {
      const receiver = yield* HttpsReceiver.make()
      receiver.enqueue(Reply.json({ accepted: true }, 202))
      const body = new Uint8Array([0x7b, 0x22, 0xc3, 0xa9, 0x22, 0x3a, 0x31, 0x7d])
      const response = yield* post(receiver.url("/hooks/abc?x=1#fragment"), {
        headers: { "X-Svc-Event-Id": "evt_1", "content-type": "application/json" },
        body
      })
      assert.strictEqual(response.status, 202)
      assert.strictEqual(response.headers["content-type"], "application/json")
      assert.deepStrictEqual(JSON.parse(text(response.body)), { accepted: true })
      assert.isFalse(response.truncated)
      assert.isAtLeast(response.elapsedMs, 0)
      const [request] = yield* receiver.waitForRequests(1)
      assert.strictEqual(request.method, "POST")
      assert.strictEqual(request.path, "/hooks/abc?x=1")
      assert.strictEqual(request.headers["x-svc-event-id"], "evt_1")
      assert.deepStrictEqual([...request.body], [...body])
      assert.strictEqual(request.headers["accept-encoding"], "identity")
    }).pipe(Effect.scoped, Effect.provide(outbound())))

  it.live("headers go once per name, lower-cased: ours by default, the caller's user-agent instead, accept-encoding always identity", () =>
    Effect.gen(function*() {
      const receiver = yield* HttpsReceiver.make()
      receiver.enqueue(Reply.ok(""), Reply.ok(""))
      yield* post(receiver.url("/a"), {
        headers: { "Accept-Encoding": "gzip", "X-Twice": "first", "x-twice": "second" }
      })
      yield* post(receiver.url("/b"), { headers: { "User-Agent": "theirs/2" } })
      const [a, b] = yield* receiver.waitForRequests(2)
      assert.strictEqual(a!.headers["user-agent"], `svc/${VERSION}`)
      assert.strictEqual(a!.headers["accept-encoding"], "identity")
      assert.strictEqual(a!.headers["x-twice"], "second")
      assert.strictEqual(b!.headers["user-agent"], "theirs/2")
    }).pipe(Effect.scoped, Effect.provide(outbound())))

  it.live("reaches an IPv6 loopback receiver", () =>
    Effect.gen(function*() {
      const receiver = yield* HttpsReceiver.make({ hosts: ["::1"] })
      const response = yield* post(receiver.url("/v6"))
      assert.strictEqual(response.status, 200)
      assert.strictEqual((yield* receiver.waitForRequests(1))[0].localAddress, "::1")
    }).pipe(Effect.scoped, Effect.provide(outbound())))

  it.live("an IPv4-mapped literal reaches the IPv4 address it maps", () =>
    Effect.gen(function*() {
      const receiver = yield* HttpsReceiver.make()
      const response = yield* post(`https://[::ffff:127.0.0.1]:${receiver.port}/mapped`)
      assert.strictEqual(response.status, 200)
      assert.strictEqual((yield* receiver.waitForRequests(1))[0].localAddress, "127.0.0.1")
    }).pipe(Effect.scoped, Effect.provide(outbound())))

  it.live("a name that resolves to IPv6 loopback is reached over IPv6", () =>
    Effect.gen(function*() {
      const receiver = yield* HttpsReceiver.make({ hosts: ["::1"] })
      const response = yield* post(`https://six.svc.test:${receiver.port}/v6`)
      assert.strictEqual(response.status, 200)
      const request = yield* receiver.waitFor((request) => request.path === "/v6")
      assert.strictEqual(request.localAddress, "::1")
      assert.strictEqual(request.servername, "six.svc.test")
    }).pipe(Effect.scoped, Effect.provide(outbound({ resolver: fixedResolver({ "six.svc.test": ["::1"] }) }))))

  it.live("a header the HTTP client refuses fails as network without echoing it", () =>
    Effect.gen(function*() {
      const receiver = yield* HttpsReceiver.make()
      const failure = yield* Effect.flip(
        post(receiver.url("/bad"), { headers: { "x-token": "s3cr3t\r\nx-injected: 1" } })
      )
      assert.strictEqual(failure.reason, "network")
      assert.notInclude(failure.message, "s3cr3t")
      assert.lengthOf(receiver.requests(), 0)
    }).pipe(Effect.scoped, Effect.provide(outbound())))

  it.live("concurrent sends to one receiver share its pool and all arrive", () =>
    Effect.gen(function*() {
      const receiver = yield* HttpsReceiver.make()
      const statuses = yield* Effect.forEach(
        Array.from({ length: 60 }, (_, i) => i),
        (i) => Effect.map(post(receiver.url(`/c/${i}`), { body: `{"i":${i}}` }), (response) => response.status),
        { concurrency: 20 }
      )
      assert.deepStrictEqual(new Set(statuses), new Set([200]))
      const requests = yield* receiver.waitForRequests(60)
      assert.strictEqual(new Set(requests.map((request) => request.path)).size, 60)
      assert.isAtMost(receiver.connections(), 32)
    }).pipe(Effect.scoped, Effect.provide(outbound())))

  it.live("GET without a body works", () =>
    Effect.gen(function*() {
      const receiver = yield* HttpsReceiver.make()
      for (let i = 0; i < 3; i++) {
        const response = yield* OutboundHttp.use((http) =>
          http.send({ url: receiver.url(`/get/${i}`), method: "GET", headers: {}, timeout: "5 seconds" })
        )
        assert.strictEqual(response.status, 200)
      }
      const requests = yield* receiver.waitForRequests(3)
      assert.deepStrictEqual(requests.map((request) => request.method), ["GET", "GET", "GET"])
      assert.deepStrictEqual(requests.map((request) => request.body.length), [0, 0, 0])
    }).pipe(Effect.scoped, Effect.provide(outbound())))

  it.live("a host name is verified against the certificate (SNI) while the connection goes to the resolved address", () =>
    Effect.gen(function*() {
      const material = yield* TestTls.shared
      const certificate = yield* Effect.promise(() => material.issue({ dnsNames: ["receiver.svc.test"], ips: [] }))
      const receiver = yield* HttpsReceiver.make({ certificate })
      const response = yield* post(`https://receiver.svc.test:${receiver.port}/named`)
      assert.strictEqual(response.status, 200)
      const [request] = yield* receiver.waitForRequests(1)
      assert.strictEqual(request.servername, "receiver.svc.test")
      assert.strictEqual(request.headers.host, `receiver.svc.test:${receiver.port}`)
    }).pipe(
      Effect.scoped,
      Effect.provide(outbound({ resolver: fixedResolver({ "receiver.svc.test": ["127.0.0.1"] }) }))
    ))

  it.live("a certificate for another name fails as tls", () =>
    Effect.gen(function*() {
      const material = yield* TestTls.shared
      const certificate = yield* Effect.promise(() => material.issue({ dnsNames: ["other.svc.test"], ips: [] }))
      const receiver = yield* HttpsReceiver.make({ certificate })
      const failure = yield* Effect.flip(post(`https://receiver.svc.test:${receiver.port}/named`))
      assert.strictEqual(failure.reason, "tls")
      assert.lengthOf(receiver.requests(), 0)
    }).pipe(
      Effect.scoped,
      Effect.provide(outbound({ resolver: fixedResolver({ "receiver.svc.test": ["127.0.0.1"] }) }))
    ))
})

describe("send: TLS is verified", () => {
  it.live("a self-signed certificate that is not in the extra CA fails as tls, and nothing is sent", () =>
    Effect.gen(function*() {
      const certificate = yield* TestTls.selfSigned()
      const receiver = yield* HttpsReceiver.make({ certificate })
      const failure = yield* Effect.flip(post(receiver.url("/hook"), {
        headers: { authorization: "Bearer top-secret-token" },
        body: "payload-never-echoed"
      }))
      assert.strictEqual(failure._tag, "OutboundFailure")
      assert.strictEqual(failure.reason, "tls")
      assert.notInclude(failure.message, "top-secret-token")
      assert.notInclude(failure.message, "payload-never-echoed")
      assert.lengthOf(receiver.requests(), 0)
    }).pipe(Effect.scoped, Effect.provide(outbound())))

  it.live("without SVC_EXTRA_CA_FILE the test CA is not trusted (system store only)", () =>
    Effect.gen(function*() {
      const receiver = yield* HttpsReceiver.make()
      const failure = yield* Effect.flip(post(receiver.url("/hook")))
      assert.strictEqual(failure.reason, "tls")
    }).pipe(Effect.scoped, Effect.provide(outbound({ extraCaFile: null }))))
})

describe("send: redirects are never followed", () => {
  it.live("a 302 to the metadata address is answered as a 302 and not followed", () =>
    Effect.gen(function*() {
      const receiver = yield* HttpsReceiver.make()
      receiver.respond((request) =>
        request.path === "/hook"
          ? Reply.redirect("https://169.254.169.254/latest/meta-data/iam/security-credentials/")
          : Reply.ok("followed!")
      )
      const response = yield* post(receiver.url("/hook"))
      assert.strictEqual(response.status, 302)
      assert.strictEqual(
        response.headers.location,
        "https://169.254.169.254/latest/meta-data/iam/security-credentials/"
      )
      const again = yield* post(receiver.url("/hook"), { method: "GET", body: undefined })
      assert.strictEqual(again.status, 302)
      // Also a redirect to a receiver path that would succeed is not followed.
      receiver.respond((request) =>
        request.path === "/hook" ? Reply.redirect(receiver.url("/elsewhere"), 307) : Reply.ok()
      )
      assert.strictEqual((yield* post(receiver.url("/hook"))).status, 307)
      assert.deepStrictEqual(receiver.requests().map((request) => request.path), ["/hook", "/hook", "/hook"])
    }).pipe(Effect.scoped, Effect.provide(outbound())))
})

describe("send: one deadline over the whole exchange", () => {
  it.live("an answer after 4.5 s succeeds with a 5 s timeout", () =>
    Effect.gen(function*() {
      const receiver = yield* HttpsReceiver.make()
      receiver.enqueue(Reply.delayed(4500, { status: 204 }))
      const response = yield* post(receiver.url("/slow"), { timeout: "5 seconds" })
      assert.strictEqual(response.status, 204)
      assert.isAtLeast(response.elapsedMs, 4400)
    }).pipe(Effect.scoped, Effect.provide(outbound())))

  it.live("an answer after 6 s fails as timeout with a 5 s timeout", () =>
    Effect.gen(function*() {
      const receiver = yield* HttpsReceiver.make()
      receiver.enqueue(Reply.delayed(6000, { status: 204 }))
      const failure = yield* Effect.flip(post(receiver.url("/slow"), { timeout: "5 seconds" }))
      assert.strictEqual(failure.reason, "timeout")
    }).pipe(Effect.scoped, Effect.provide(outbound())))

  it.live("slow headers fail: the status line arrives after the deadline", () =>
    Effect.gen(function*() {
      const receiver = yield* HttpsReceiver.make()
      receiver.enqueue(Reply.delayed(1500))
      const failure = yield* Effect.flip(post(receiver.url("/slow-headers"), { timeout: "1 second" }))
      assert.strictEqual(failure.reason, "timeout")
    }).pipe(Effect.scoped, Effect.provide(outbound())))

  it.live("a body trickled past the deadline fails, although every chunk arrives quickly after the last", () =>
    Effect.gen(function*() {
      const receiver = yield* HttpsReceiver.make()
      // Headers at once, then 8 chunks 250 ms apart: 2 s for a 1 s deadline.
      receiver.enqueue(Reply.trickle("x".repeat(800), 8, 250))
      const failure = yield* Effect.flip(post(receiver.url("/trickle"), { timeout: "1 second" }))
      assert.strictEqual(failure.reason, "timeout")
    }).pipe(Effect.scoped, Effect.provide(outbound())))

  it.live("a trickled body that ends before the deadline succeeds", () =>
    Effect.gen(function*() {
      const receiver = yield* HttpsReceiver.make()
      receiver.enqueue(Reply.trickle("y".repeat(40), 4, 50))
      const response = yield* post(receiver.url("/trickle"), { timeout: "5 seconds" })
      assert.strictEqual(text(response.body), "y".repeat(40))
    }).pipe(Effect.scoped, Effect.provide(outbound())))

  it.live("a server that never answers fails as timeout and the connection is abandoned", () =>
    Effect.gen(function*() {
      const receiver = yield* HttpsReceiver.make()
      receiver.enqueue(Reply.hang())
      const failure = yield* Effect.flip(post(receiver.url("/hang"), { timeout: "500 millis" }))
      assert.strictEqual(failure.reason, "timeout")
      // The next request is answered (over a new connection).
      const response = yield* post(receiver.url("/after"))
      assert.strictEqual(response.status, 200)
      const requests = yield* receiver.waitForRequests(2)
      assert.notStrictEqual(requests[0].connectionId, requests[1].connectionId)
    }).pipe(Effect.scoped, Effect.provide(outbound())))
})

describe("send: the response body is read up to maxResponseBytes only", () => {
  it.live("keeps the first 4 KiB by default and says it truncated", () =>
    Effect.gen(function*() {
      const receiver = yield* HttpsReceiver.make()
      receiver.enqueue(Reply.ok("a".repeat(4096) + "b".repeat(60_000)))
      const response = yield* post(receiver.url("/big"))
      assert.strictEqual(response.body.length, 4096)
      assert.strictEqual(text(response.body), "a".repeat(4096))
      assert.isTrue(response.truncated)
    }).pipe(Effect.scoped, Effect.provide(outbound())))

  it.live("keeps maxResponseBytes when given, and a short body whole", () =>
    Effect.gen(function*() {
      const receiver = yield* HttpsReceiver.make()
      receiver.enqueue(Reply.ok("0123456789"), Reply.ok("short"), Reply.ok("anything"))
      const cut = yield* post(receiver.url("/a"), { maxResponseBytes: 4 })
      assert.strictEqual(text(cut.body), "0123")
      assert.isTrue(cut.truncated)
      const whole = yield* post(receiver.url("/b"), { maxResponseBytes: 4096 })
      assert.strictEqual(text(whole.body), "short")
      assert.isFalse(whole.truncated)
      const none = yield* post(receiver.url("/c"), { maxResponseBytes: 0 })
      assert.strictEqual(none.body.length, 0)
    }).pipe(Effect.scoped, Effect.provide(outbound())))

  it.live("stops reading an endless body instead of waiting for its end", () =>
    Effect.gen(function*() {
      const receiver = yield* HttpsReceiver.make()
      // 5000 bytes at once, then the rest would trickle for a minute.
      receiver.enqueue(Reply.trickle("z".repeat(600_000), 120, 500))
      const response = yield* post(receiver.url("/endless"), { timeout: "5 seconds" })
      assert.strictEqual(response.body.length, 4096)
      assert.isTrue(response.truncated)
    }).pipe(Effect.scoped, Effect.provide(outbound())))

  it.live("a compressed answer is never decompressed", () =>
    Effect.gen(function*() {
      const receiver = yield* HttpsReceiver.make()
      const gzipped = new Uint8Array([0x1f, 0x8b, 0x08, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x03])
      receiver.enqueue({ status: 200, headers: { "content-encoding": "gzip" }, body: gzipped })
      const response = yield* post(receiver.url("/gz"))
      assert.deepStrictEqual([...response.body], [...gzipped])
    }).pipe(Effect.scoped, Effect.provide(outbound())))
})

describe("send: network failures", () => {
  it.live("a refused connection fails as network", () =>
    Effect.gen(function*() {
      const receiver = yield* HttpsReceiver.make()
      const url = receiver.url("/gone")
      yield* Effect.scoped(Effect.void)
      const closedPort = yield* Effect.scoped(Effect.map(HttpsReceiver.make(), (other) => other.url("/gone")))
      const failure = yield* Effect.flip(post(closedPort))
      assert.strictEqual(failure.reason, "network")
      assert.include(failure.message, "ECONNREFUSED")
      assert.strictEqual((yield* post(url)).status, 200)
    }).pipe(Effect.scoped, Effect.provide(outbound())))

  it.live("a dropped connection fails as network", () =>
    Effect.gen(function*() {
      const receiver = yield* HttpsReceiver.make()
      receiver.enqueue(Reply.drop())
      const failure = yield* Effect.flip(post(receiver.url("/drop")))
      assert.strictEqual(failure.reason, "network")
    }).pipe(Effect.scoped, Effect.provide(outbound())))

  it.live("a name that does not resolve at send time fails as network", () =>
    Effect.gen(function*() {
      const failure = yield* Effect.flip(post("https://nowhere.svc.test/hook"))
      assert.strictEqual(failure.reason, "network")
      assert.include(failure.message, "ENOTFOUND")
    }).pipe(Effect.provide(outbound({ resolver: fixedResolver({}) }))))

  it.live("proxies from the environment are never used", () =>
    Effect.gen(function*() {
      const receiver = yield* HttpsReceiver.make()
      const saved = { https: process.env.HTTPS_PROXY, all: process.env.ALL_PROXY }
      process.env.HTTPS_PROXY = "http://127.0.0.1:9"
      process.env.ALL_PROXY = "http://127.0.0.1:9"
      const response = yield* post(receiver.url("/direct")).pipe(
        Effect.ensuring(Effect.sync(() => {
          if (saved.https === undefined) delete process.env.HTTPS_PROXY
          else process.env.HTTPS_PROXY = saved.https
          if (saved.all === undefined) delete process.env.ALL_PROXY
          else process.env.ALL_PROXY = saved.all
        }))
      )
      assert.strictEqual(response.status, 200)
      assert.lengthOf(yield* receiver.waitForRequests(1), 1)
    }).pipe(Effect.scoped, Effect.provide(outbound())))
})

describe("send: the target is checked again at every send", () => {
  it.live("refuses an unsafe target as unsafe_target without connecting", () =>
    Effect.gen(function*() {
      for (
        const url of [...encodedLoopbackUrls, "https://localhost/", "http://example.com/", "https://u:p@example.com/"]
      ) {
        const failure = yield* Effect.flip(post(url))
        assert.strictEqual(failure.reason, "unsafe_target", url)
        assert.notInclude(failure.message, "u:p")
      }
    }).pipe(Effect.provide(outbound({ allowedTargetCidrs: [] }))))

  it.live("without an allowed CIDR, a loopback receiver is unreachable", () =>
    Effect.gen(function*() {
      const receiver = yield* HttpsReceiver.make()
      const failure = yield* Effect.flip(post(receiver.url("/hook")))
      assert.strictEqual(failure.reason, "unsafe_target")
      assert.lengthOf(receiver.requests(), 0)
    }).pipe(Effect.scoped, Effect.provide(outbound({ allowedTargetCidrs: [] }))))

  it.live("DNS rebinding: the connection goes to the address that was checked, resolved once per send", () =>
    Effect.gen(function*() {
      // 127.0.0.1 is "public" here (allowed); 127.0.0.2 is not. The name first
      // answers the allowed address, then the forbidden one.
      const resolver = fixedResolver({
        "rebind.svc.test": (call) => (call === 1 ? ["127.0.0.1"] : ["127.0.0.2"])
      })
      const receiver = yield* HttpsReceiver.make({ hosts: ["127.0.0.1", "127.0.0.2"] })
      const url = `https://rebind.svc.test:${receiver.port}/hook`
      const first = yield* post(url).pipe(Effect.provide(outbound({ resolver, allowedTargetCidrs: ["127.0.0.1/32"] })))
      assert.strictEqual(first.status, 200)
      // One resolution for the whole send: no second lookup that could rebind.
      assert.strictEqual(resolver.calls("rebind.svc.test"), 1)
      assert.strictEqual((yield* receiver.waitForRequests(1))[0].localAddress, "127.0.0.1")
      const second = yield* Effect.flip(
        post(url).pipe(Effect.provide(outbound({ resolver, allowedTargetCidrs: ["127.0.0.1/32"] })))
      )
      assert.strictEqual(second.reason, "unsafe_target")
      assert.strictEqual(resolver.calls("rebind.svc.test"), 2)
      assert.lengthOf(receiver.requests(), 1)
    }).pipe(Effect.scoped))

  it.live("the system resolver is never asked again: a name only the injected resolver knows is reached", () =>
    Effect.gen(function*() {
      const receiver = yield* HttpsReceiver.make({ hosts: ["127.0.0.2"] })
      const response = yield* post(`https://pinned.svc.test:${receiver.port}/hook`)
      assert.strictEqual(response.status, 200)
      assert.strictEqual((yield* receiver.waitForRequests(1))[0].localAddress, "127.0.0.2")
    }).pipe(
      Effect.scoped,
      Effect.provide(outbound({ resolver: fixedResolver({ "pinned.svc.test": ["127.0.0.2"] }) }))
    ))

  it.live("keep-alive connections are never shared between different checked addresses", () =>
    Effect.gen(function*() {
      const resolver = fixedResolver({
        "moving.svc.test": (call) => (call % 2 === 1 ? ["127.0.0.1"] : ["127.0.0.2"])
      })
      const receiver = yield* HttpsReceiver.make({ hosts: ["127.0.0.1", "127.0.0.2"] })
      const url = `https://moving.svc.test:${receiver.port}/hook`
      yield* Effect.provide(
        Effect.gen(function*() {
          for (let i = 0; i < 4; i++) {
            const http = yield* OutboundHttp
            const response = yield* http.send({ url, method: "POST", headers: {}, body: "x", timeout: "5 seconds" })
            assert.strictEqual(response.status, 200)
          }
        }),
        outbound({ resolver })
      )
      const requests = yield* receiver.waitForRequests(4)
      assert.deepStrictEqual(requests.map((request) => request.localAddress), [
        "127.0.0.1",
        "127.0.0.2",
        "127.0.0.1",
        "127.0.0.2"
      ])
      const [a1, b1, a2, b2] = requests.map((request) => request.connectionId)
      assert.notStrictEqual(a1, b1)
      // Reuse happens, but only for the same checked address.
      assert.strictEqual(a1, a2)
      assert.strictEqual(b1, b2)
    }).pipe(Effect.scoped))

  // A server that closes an idle connection (Node's and Apache's after 5 s)
  // just as the next request arrives on it answers that request with a
  // reset, and a POST is never sent again: svc gives an idle connection up
  // before such a server would. The MCP SDK's server sets `Connection`
  // itself, so Node names no keep-alive time (`Keep-Alive: timeout=5`).
  it.live(
    "a connection idle for 5 s is not reused when the server names no keep-alive time",
    () =>
      Effect.gen(function*() {
        const receiver = yield* HttpsReceiver.make({
          respond: () => ({ status: 200, headers: { connection: "keep-alive" }, body: "ok" })
        })
        const first = yield* post(receiver.url("/hook"))
        assert.strictEqual(first.headers["connection"], "keep-alive")
        assert.isUndefined(first.headers["keep-alive"])
        yield* Effect.sleep("1 second")
        yield* post(receiver.url("/hook"))
        yield* Effect.sleep("5 seconds")
        yield* post(receiver.url("/hook"))
        const [a, b, c] = (yield* receiver.waitForRequests(3)).map((request) => request.connectionId)
        assert.strictEqual(a, b, "one idle for 1 s is reused")
        assert.notStrictEqual(b, c, "one idle for 5 s is not")
      }).pipe(Effect.scoped, Effect.provide(outbound())),
    15_000
  )
})
