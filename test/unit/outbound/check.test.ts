import { assert, describe, it } from "@effect/vitest"
import { Cause, Effect, Exit, Fiber, Layer, Option } from "effect"
import { TestClock } from "effect/testing"
import { readFileSync } from "node:fs"
import * as tls from "node:tls"
import { OutboundHttp } from "../../../src/outbound/OutboundHttp.ts"
import { trustedCas } from "../../../src/outbound/Pools.ts"
import { Resolver, type ResolverShape } from "../../../src/outbound/Resolver.ts"
import { urlHint } from "../../../src/outbound/TargetUrl.ts"
import { SvcConfig } from "../../../src/platform/Config.ts"
import { fixedResolver } from "../../support/dns.ts"
import { blockedNameUrls, encodedLoopbackUrls, nonPublicCorpus } from "../../support/ssrfCorpus.ts"
import { writePemFile } from "../../support/tls.ts"

/** `OutboundHttp` with a fixed resolver and the given allow-list (no CA file). */
const outbound = (resolver: ResolverShape, allowedTargetCidrs: ReadonlyArray<string> = []) =>
  OutboundHttp.layer.pipe(
    Layer.provide(SvcConfig.layerWith({ allowedTargetCidrs, extraCaFile: Option.none() })),
    Layer.provide(Layer.succeed(Resolver, resolver)),
    Layer.orDie
  )

const dns = fixedResolver({
  "hooks.example.com": ["93.184.215.14"],
  "v6.example.com": ["2606:4700:4700::1111"],
  "loopback.example.com": ["127.0.0.1"],
  "v6-loopback.example.com": ["::1"],
  "mixed.example.com": ["93.184.215.14", "10.0.0.1"],
  "mixed-v6.example.com": ["2606:4700:4700::1111", "fd00::1"],
  "metadata.example.com": ["169.254.169.254"],
  "mapped.example.com": ["::ffff:127.0.0.1"],
  "xn--bcher-kva.example": ["93.184.215.14"]
})

const refusal = (url: string, resolver: ResolverShape = dns, allowed: ReadonlyArray<string> = []) =>
  Effect.gen(function*() {
    const http = yield* OutboundHttp
    return yield* Effect.flip(http.check(url))
  }).pipe(Effect.provide(outbound(resolver, allowed)))

const accepted = (url: string, resolver: ResolverShape = dns, allowed: ReadonlyArray<string> = []) =>
  Effect.gen(function*() {
    const http = yield* OutboundHttp
    return yield* http.check(url)
  }).pipe(Effect.provide(outbound(resolver, allowed)))

describe("check: https only, no credentials", () => {
  for (
    const url of [
      "http://hooks.example.com/",
      "http://2130706433/",
      "ftp://hooks.example.com/",
      "wss://hooks.example.com/"
    ]
  ) {
    it.effect(`refuses a URL that is not https: ${url}`, () =>
      Effect.gen(function*() {
        const error = yield* refusal(url)
        assert.strictEqual(error._tag, "UnsafeUrl")
        assert.include(error.message, "https")
      }))
  }

  it.effect("refuses what is not an absolute URL, without echoing it", () =>
    Effect.gen(function*() {
      for (
        const url of ["", "hooks.example.com/x", "/relative", "https://", "https://exa mple.com/", "https://[::1/"]
      ) {
        const error = yield* refusal(url)
        assert.strictEqual(error._tag, "UnsafeUrl")
        if (url !== "") assert.notInclude(error.message, url)
      }
    }))

  for (
    const url of [
      "https://alice:s3cr3t-pw@hooks.example.com/x",
      "https://alice@hooks.example.com/x",
      "https://:s3cr3t-pw@hooks.example.com/x",
      "https://alice:s3cr3t-pw@127.0.0.1/x",
      "http://alice:s3cr3t-pw@hooks.example.com/x"
    ]
  ) {
    it.effect(`refuses credentials in the URL without echoing them: ${url.replace(/\/\/.*@/, "//…@")}`, () =>
      Effect.gen(function*() {
        const error = yield* refusal(url)
        assert.notInclude(error.message, "alice")
        assert.notInclude(error.message, "s3cr3t")
        assert.notInclude(String(error), "s3cr3t")
        assert.notInclude(JSON.stringify(error), "s3cr3t")
      }))
  }

  it.effect("refuses over-long URLs", () =>
    Effect.gen(function*() {
      const error = yield* refusal(`https://hooks.example.com/${"a".repeat(3000)}`)
      assert.include(error.message, "longer")
    }))
})

describe("check: every non-public address class, as a literal host, is refused", () => {
  for (const [range, text] of nonPublicCorpus) {
    const url = text.includes(":") ? `https://[${text}]:8443/hook` : `https://${text}/hook`
    it.effect(`${range}: ${url}`, () =>
      Effect.gen(function*() {
        const error = yield* refusal(url)
        assert.include(error.message, "non-public")
      }))
  }
})

describe("check: encoded forms are normalised by the URL parser, then refused", () => {
  for (const url of encodedLoopbackUrls) {
    it.effect(url, () =>
      Effect.gen(function*() {
        const error = yield* refusal(url)
        assert.include(error.message, "non-public")
      }))
  }

  it("the URL parser turns every IPv4 spelling into the same dotted quad", () => {
    for (const host of ["2130706433", "0177.0.0.1", "0x7f.1", "127.1", "0x7f000001", "017700000001", "127.0.0.1."]) {
      assert.strictEqual(new URL(`https://${host}/`).hostname, "127.0.0.1", host)
    }
    assert.strictEqual(new URL("https://[::ffff:127.0.0.1]/").hostname, "[::ffff:7f00:1]")
  })
})

describe("check: metadata and local names are refused by name", () => {
  for (const url of blockedNameUrls) {
    it.effect(`${url} (without asking DNS)`, () =>
      Effect.gen(function*() {
        const resolver = fixedResolver({})
        const error = yield* refusal(url, resolver, ["127.0.0.0/8", "169.254.0.0/16"])
        assert.include(error.message, "local or metadata name")
        assert.strictEqual(resolver.calls(new URL(url).hostname), 0)
      }))
  }
})

describe("check: a host name must resolve to public addresses only", () => {
  it.effect("accepts a name whose every address is public (IPv4 and IPv6)", () =>
    Effect.gen(function*() {
      const checked = yield* accepted("https://hooks.example.com/a")
      assert.strictEqual(checked.url, "https://hooks.example.com/a")
      yield* accepted("https://v6.example.com/a")
    }))

  for (
    const name of ["loopback.example.com", "v6-loopback.example.com", "metadata.example.com", "mapped.example.com"]
  ) {
    it.effect(`refuses a name that resolves to a non-public address: ${name}`, () =>
      Effect.gen(function*() {
        const error = yield* refusal(`https://${name}/hook`)
        assert.strictEqual(error.message, "the host resolves to a non-public address")
        // The resolved address is not disclosed to the caller.
        assert.notMatch(error.message, /127\.|::1|169\.254/)
      }))
  }

  it.effect("refuses a name with one private address among public ones", () =>
    Effect.gen(function*() {
      yield* refusal("https://mixed.example.com/")
      yield* refusal("https://mixed-v6.example.com/")
    }))

  it.effect("refuses a name that does not resolve", () =>
    Effect.gen(function*() {
      const error = yield* refusal("https://nowhere.example.com/")
      assert.include(error.message, "does not resolve")
    }))

  it.effect("refuses a name whose resolution does not answer within 5 s", () =>
    Effect.gen(function*() {
      const silent: ResolverShape = { resolve: () => Effect.never }
      const fiber = yield* Effect.forkChild(refusal("https://silent.example.com/", silent))
      yield* TestClock.adjust("6 seconds")
      const error = yield* Fiber.join(fiber)
      assert.include(error.message, "does not resolve")
    }))

  it.effect("send counts resolution inside its deadline: a silent resolver fails as timeout", () =>
    Effect.gen(function*() {
      const silent: ResolverShape = { resolve: () => Effect.never }
      const fiber = yield* Effect.forkChild(Effect.flip(
        OutboundHttp.use((http) =>
          http.send({ url: "https://silent.example.com/", method: "POST", headers: {}, timeout: "5 seconds" })
        ).pipe(Effect.provide(outbound(silent)))
      ))
      yield* TestClock.adjust("5 seconds")
      const failure = yield* Fiber.join(fiber)
      assert.strictEqual(failure.reason, "timeout")
    }))

  it.effect("IDN host names are checked (and kept) in their punycode form", () =>
    Effect.gen(function*() {
      const checked = yield* accepted("https://bücher.example/hook")
      assert.strictEqual(checked.url, "https://xn--bcher-kva.example/hook")
      const error = yield* refusal("https://ｌｏｃａｌｈｏｓｔ/")
      assert.include(error.message, "local or metadata name")
    }))

  it.effect("the system resolver is used by default: a hosts-file name for loopback is refused", () =>
    Effect.gen(function*() {
      // A name /etc/hosts maps to loopback (other than the localhost family,
      // which is refused by name anyway); the test machines have `vm`, `runsc`.
      const name = readFileSync("/etc/hosts", "utf8").split("\n")
        .map((line) => line.replace(/#.*/, "").trim().split(/\s+/))
        .filter(([address]) => address !== undefined && address.startsWith("127."))
        .flatMap(([, ...names]) => names)
        .find((name) => !/localhost|^ip6-/.test(name))
      if (name === undefined) return
      const http = yield* OutboundHttp
      const error = yield* Effect.flip(http.check(`https://${name}/`))
      assert.strictEqual(error.message, "the host resolves to a non-public address")
    }).pipe(
      Effect.provide(OutboundHttp.layer.pipe(Layer.provide(SvcConfig.layerWith({ allowedTargetCidrs: [] }))))
    ))
})

describe("check: SVC_ALLOWED_TARGET_CIDRS is the only way to a non-public address", () => {
  it.effect("accepts loopback literals and names inside the allowed CIDRs", () =>
    Effect.gen(function*() {
      const allowed = ["127.0.0.0/8", "::1/128"]
      yield* accepted("https://127.0.0.1:8443/hook", dns, allowed)
      yield* accepted("https://127.0.0.2/hook", dns, allowed)
      yield* accepted("https://[::1]:8443/hook", dns, allowed)
      yield* accepted("https://[::ffff:127.0.0.1]/hook", dns, allowed)
      yield* accepted("https://loopback.example.com/hook", dns, allowed)
      yield* accepted("https://v6-loopback.example.com/hook", dns, allowed)
    }))

  it.effect("allows nothing beyond the allowed CIDRs", () =>
    Effect.gen(function*() {
      yield* refusal("https://127.0.0.2/", dns, ["127.0.0.1/32"])
      yield* refusal("https://[::1]/", dns, ["127.0.0.0/8"])
      yield* refusal("https://169.254.169.254/", dns, ["127.0.0.0/8", "::1/128"])
      yield* refusal("https://mixed.example.com/", dns, ["127.0.0.0/8"])
    }))

  it.effect("does not make metadata names reachable", () =>
    Effect.gen(function*() {
      yield* refusal("https://localhost:8443/", dns, ["127.0.0.0/8", "::1/128"])
    }))

  it.effect("an invalid CIDR stops the service from starting, naming the entry", () =>
    Effect.gen(function*() {
      const exit = yield* Effect.exit(Effect.provide(
        Effect.gen(function*() {
          return yield* OutboundHttp
        }),
        outbound(dns, ["127.0.0.0/8", "not-a-cidr"])
      ))
      assert.isTrue(Exit.isFailure(exit))
      if (Exit.isFailure(exit)) {
        assert.include(Cause.pretty(exit.cause), "SVC_ALLOWED_TARGET_CIDRS: not a CIDR: not-a-cidr")
      }
    }))

  it.effect("an unreadable SVC_EXTRA_CA_FILE stops the service from starting", () =>
    Effect.gen(function*() {
      const layer = OutboundHttp.layer.pipe(
        Layer.provide(SvcConfig.layerWith({ extraCaFile: Option.some("/nonexistent/ca.pem") }))
      )
      const exit = yield* Effect.exit(Effect.provide(
        Effect.gen(function*() {
          return yield* OutboundHttp
        }),
        layer
      ))
      assert.isTrue(Exit.isFailure(exit))
      if (Exit.isFailure(exit)) assert.include(Cause.pretty(exit.cause), "SVC_EXTRA_CA_FILE")
    }))
})

describe("check: the normalised URL and its url_hint", () => {
  it.effect("answers the normalised URL (host lower-cased, default port and fragment dropped, query kept)", () =>
    Effect.gen(function*() {
      const checked = yield* accepted("https://HOOKS.Example.COM:443/a/b?x=1#frag")
      assert.strictEqual(checked.url, "https://hooks.example.com/a/b?x=1")
    }))

  it("url_hint is scheme, host and port when not 443; nothing of the path or query", () => {
    const hint = (url: string) => urlHint(new URL(url))
    assert.strictEqual(hint("https://hooks.example.com/secret/path/a1b2?token=abc"), "https://hooks.example.com/…")
    assert.strictEqual(hint("https://hooks.example.com:443/in/abcd"), "https://hooks.example.com/…")
    assert.strictEqual(hint("https://hooks.example.com:8443/in/abcdef/"), "https://hooks.example.com:8443/…")
    assert.strictEqual(hint("https://hooks.example.com/"), "https://hooks.example.com/")
    assert.strictEqual(hint("https://hooks.example.com?token=abc"), "https://hooks.example.com/…")
    assert.strictEqual(hint("https://[2606:4700::1]/v1/traces"), "https://[2606:4700::1]/…")
  })

  it.effect("check answers the url_hint, never the path, the query or credentials", () =>
    Effect.gen(function*() {
      const checked = yield* accepted("https://hooks.example.com/t/0123456789abcdef?token=s3cr3t")
      assert.strictEqual(checked.urlHint, "https://hooks.example.com/…")
      assert.notInclude(checked.urlHint, "s3cr3t")
      assert.notInclude(checked.urlHint, "cdef")
    }))
})

describe("trust: the system roots stay trusted beside SVC_EXTRA_CA_FILE", () => {
  it.effect("the extra bundle is added to Node's root certificates, not put in their place", () =>
    Effect.gen(function*() {
      const extra = "-----BEGIN CERTIFICATE-----\nMIIBfake\n-----END CERTIFICATE-----"
      const file = writePemFile(`# a bundle\n${extra}\n${extra.replace("fake", "fak2")}\n`)
      const cas = yield* trustedCas(file)
      const roots = new Set(tls.rootCertificates)
      assert.isAtLeast(tls.rootCertificates.length, 50)
      for (const root of roots) assert.include(cas, root)
      assert.include(cas, extra)
      assert.strictEqual(cas.length - (yield* trustedCas(undefined)).length, 2)
    }))

  it.effect("a file without any PEM certificate stops the service from starting", () =>
    Effect.gen(function*() {
      const exit = yield* Effect.exit(trustedCas(writePemFile("not a certificate")))
      assert.isTrue(Exit.isFailure(exit))
      if (Exit.isFailure(exit)) assert.include(Cause.pretty(exit.cause), "holds no PEM certificate")
    }))
})
