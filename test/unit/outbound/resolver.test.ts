/**
 * The network resolver: c-ares against a DNS server on loopback, /etc/hosts
 * and literals handled as getaddrinfo would, timeouts that end the work,
 * and a bound on lookups in flight per organization.
 */
import { assert, describe, it } from "@effect/vitest"
import { Cause, Effect, Exit, Fiber, Layer, Option } from "effect"
import { mkdtempSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { OutboundHttp } from "../../../src/outbound/OutboundHttp.ts"
import { networkResolver, parseHosts } from "../../../src/outbound/Resolver.ts"
import { SvcConfig } from "../../../src/platform/Config.ts"
import { makeDnsServer } from "../../support/dns.ts"

const hostsFile = () => {
  const file = join(mkdtempSync(join(tmpdir(), "svc-hosts-")), "hosts")
  writeFileSync(
    file,
    "# comment\n127.0.0.1 localhost\n10.1.2.3 intranet.test Alias.Test # trailing\nfe80::1%eth0 linklocal.test\nnot-an-ip bogus.test\n"
  )
  return file
}

const elapsed = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  Effect.gen(function*() {
    const started = performance.now()
    const result = yield* Effect.result(effect)
    return { result, ms: performance.now() - started }
  })

describe("the network resolver", () => {
  it("parses a hosts file: names case-insensitive, comments and bad lines skipped", () => {
    const table = parseHosts(
      "# c\n127.0.0.1 localhost\n10.1.2.3 intranet.test Alias.Test # x\nnot-an-ip bogus.test\n::1 localhost\n"
    )
    assert.deepStrictEqual(table.get("alias.test"), ["10.1.2.3"])
    assert.deepStrictEqual(table.get("localhost"), ["127.0.0.1", "::1"])
    assert.isUndefined(table.get("bogus.test"))
  })

  it.live("answers from the configured DNS server, IP literals as themselves, the hosts file and localhost without DNS", () =>
    Effect.gen(function*() {
      const dns = yield* makeDnsServer
      dns.answer("receiver.svc.test", ["127.0.0.7", "::1"])
      const resolver = networkResolver({
        servers: [dns.address],
        timeoutMs: 1000,
        tries: 1,
        lookupsPerOrg: 4,
        hostsFile: hostsFile()
      })
      assert.deepStrictEqual(yield* resolver.resolve("Receiver.svc.test.", "org"), ["127.0.0.7", "::1"])
      assert.deepStrictEqual(yield* resolver.resolve("192.0.2.1", "org"), ["192.0.2.1"])
      assert.deepStrictEqual(yield* resolver.resolve("[2001:db8::1]", "org"), ["2001:db8::1"])
      assert.deepStrictEqual(yield* resolver.resolve("alias.test", "org"), ["10.1.2.3"])
      assert.deepStrictEqual(yield* resolver.resolve("api.localhost", "org"), ["127.0.0.1", "::1"])
      const missing = yield* Effect.flip(resolver.resolve("nowhere.svc.test", "org"))
      assert.strictEqual(missing.code, "ENOTFOUND")
      // Only the one name that needed DNS reached the server (A and AAAA).
      assert.deepStrictEqual([...new Set(dns.queries().map((q) => q.name))].sort(), [
        "nowhere.svc.test",
        "receiver.svc.test"
      ])
    }).pipe(Effect.scoped))

  it.live("a name whose DNS never answers fails with ETIMEOUT after its tries, and no query is sent after that", () =>
    Effect.gen(function*() {
      const dns = yield* makeDnsServer
      dns.ignore("silent.svc.test")
      const resolver = networkResolver({ servers: [dns.address], timeoutMs: 300, tries: 2, lookupsPerOrg: 4 })
      const { result, ms } = yield* elapsed(resolver.resolve("silent.svc.test", "org"))
      assert.isTrue(result._tag === "Failure" && result.failure.code === "ETIMEOUT", JSON.stringify(result))
      assert.isBelow(ms, 300 * 2 + 2000)
      const sent = dns.queries().length
      // Two families, two tries each.
      assert.isAtMost(sent, 4)
      yield* Effect.sleep(1000)
      assert.strictEqual(dns.queries().length, sent)
    }).pipe(Effect.scoped))

  it.live(
    "lookups in flight are bounded per organization: one more fails promptly with EBUSY; other organizations are unaffected",
    () =>
      Effect.gen(function*() {
        const dns = yield* makeDnsServer
        for (const name of ["h1.svc.test", "h2.svc.test", "h3.svc.test"]) dns.ignore(name)
        dns.answer("good.svc.test", ["127.0.0.1"])
        const resolver = networkResolver({ servers: [dns.address], timeoutMs: 2000, tries: 2, lookupsPerOrg: 2 })
        const hanging = yield* Effect.forkChild(Effect.all([
          Effect.result(resolver.resolve("h1.svc.test", "hostile")),
          Effect.result(resolver.resolve("h2.svc.test", "hostile"))
        ], { concurrency: "unbounded" }))
        yield* Effect.sleep(50)
        const busy = yield* elapsed(resolver.resolve("h3.svc.test", "hostile"))
        assert.isTrue(
          busy.result._tag === "Failure" && busy.result.failure.code === "EBUSY",
          JSON.stringify(busy.result)
        )
        assert.isBelow(busy.ms, 1000)
        const honest = yield* elapsed(resolver.resolve("good.svc.test", "honest"))
        assert.deepStrictEqual(honest.result._tag === "Success" ? honest.result.success : honest.result, ["127.0.0.1"])
        assert.isBelow(honest.ms, 1000)
        const ended = yield* Fiber.join(hanging).pipe(Effect.timeout("10 seconds"))
        assert.isTrue(ended.every((r) => r._tag === "Failure"))
        // Slots are free again once the lookups ended.
        dns.answer("h3.svc.test", ["127.0.0.3"])
        assert.deepStrictEqual(yield* resolver.resolve("h3.svc.test", "hostile"), ["127.0.0.3"])
      }).pipe(Effect.scoped),
    30_000
  )

  it.effect("SVC_DNS_SERVERS that are not IP addresses stop the service from starting, saying so", () =>
    Effect.gen(function*() {
      const exit = yield* Effect.exit(
        Layer.build(OutboundHttp.layer.pipe(
          Layer.provide(SvcConfig.layerWith({ dnsServers: ["dns.example.com"], extraCaFile: Option.none() }))
        )).pipe(Effect.scoped)
      )
      assert.isTrue(Exit.isFailure(exit))
      if (Exit.isFailure(exit)) assert.include(Cause.pretty(exit.cause), "SVC_DNS_SERVERS")
    }))
})
