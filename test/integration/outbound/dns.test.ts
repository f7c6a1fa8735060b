/**
 * One organization whose receivers' names never answer in DNS must not
 * delay other organizations' deliveries, telemetry export or the thread
 * pool's work (gzip, files): outbound names are resolved by c-ares against
 * `SVC_DNS_SERVERS` (here a DNS server on loopback that answers some names
 * and silently drops queries for others), with lookups bounded per
 * organization.
 */
import { assert, describe, layer } from "@effect/vitest"
import { Duration, Effect, Layer } from "effect"
import { readFile } from "node:fs/promises"
import { fileURLToPath } from "node:url"
import { gzip } from "node:zlib"
import { SvcTest } from "../../../src/testing.ts"
import { makeDnsServer, type TestDnsServer } from "../../support/dns.ts"
import { eventually } from "../../support/http.ts"
import { HttpsReceiver } from "../../support/HttpsReceiver.ts"
import { deliveryRows, eventBody, insertEvents, webhookService } from "../webhooks/support.ts"

const DNS_TIMEOUT_MS = 2_000
const DNS_TRIES = 2
const HOSTILE_ENDPOINTS = 6

/** The DNS server lives for the whole file: the service is configured with its address. */
let dns: TestDnsServer
const DnsLive = Layer.effectDiscard(Effect.gen(function*() {
  dns = yield* makeDnsServer
}))

const service = Layer.unwrap(Effect.gen(function*() {
  return webhookService({
    dnsServers: [dns.address],
    dnsTimeoutMs: DNS_TIMEOUT_MS,
    dnsTries: DNS_TRIES,
    dnsLookupsPerOrg: 2,
    // One attempt in this test's time: no retry sends a second lookup.
    webhookRetrySchedule: [Duration.minutes(10)]
  })
})).pipe(Layer.provideMerge(DnsLive))

const elapsed = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  Effect.gen(function*() {
    const started = performance.now()
    const value = yield* effect
    return { value, ms: performance.now() - started }
  })

layer(service, { excludeTestServices: true })("DNS of one organization never holds up the others", (it) => {
  describe("names are resolved off the thread pool, with timeouts that end the work and a bound per organization", () => {
    it.effect(
      "while one organization's receiver names never answer, another's delivery and telemetry export arrive on time",
      () =>
        Effect.gen(function*() {
          const receiver = yield* HttpsReceiver.make()
          const collector = yield* HttpsReceiver.make()
          dns.answer("good.svc.test", ["127.0.0.1"])
          const honest = yield* SvcTest.org()
          const hostile = yield* SvcTest.org()
          const { endpoint: honestEndpoint } = yield* honest.client.notifications.create({
            payload: { url: `https://good.svc.test:${receiver.port}/hook` }
          })
          const destination = yield* honest.client.telemetry.create({
            payload: { url: `https://good.svc.test:${collector.port}/v1/traces` }
          })

          // The hostile organization's names resolve while it creates its
          // endpoints, then their DNS goes silent.
          const hostileIds: Array<string> = []
          for (let i = 0; i < HOSTILE_ENDPOINTS; i++) {
            dns.answer(`bad${i}.svc.test`, ["127.0.0.1"])
            const { endpoint } = yield* hostile.client.notifications.create({
              payload: { url: `https://bad${i}.svc.test:${receiver.port}/bad` }
            })
            hostileIds.push(endpoint.id)
            dns.ignore(`bad${i}.svc.test`)
          }

          const started = Date.now()
          yield* insertEvents([
            eventBody(hostile.orgId, "approval.requested"),
            eventBody(hostile.orgId, "approval.expiring")
          ])
          // The hostile deliveries are under way: some lookups hang, the rest are refused at once.
          const busy = yield* eventually(
            Effect.map(
              Effect.forEach(hostileIds, deliveryRows),
              (rows) => rows.flat().find((row) => /DNS busy/.test(row.last_error ?? ""))
            ),
            { what: "a hostile delivery refused as DNS busy", timeoutMs: 20_000 }
          )
          assert.strictEqual(busy.status, "retrying")
          assert.match(busy.last_error!, /SVC_DNS_LOOKUPS_PER_ORG/)
          const firstQuery = Math.min(
            ...dns.queries().filter((q) => q.name.startsWith("bad") && q.at >= started).map((q) => q.at)
          )
          const busyAfter = Date.now() - firstQuery
          assert.isBelow(
            busyAfter,
            DNS_TIMEOUT_MS * DNS_TRIES,
            "the busy refusal comes before any hanging lookup ended"
          )

          // Now, with the hostile organization's lookups hanging: the honest
          // organization's delivery, telemetry test export, and thread-pool work.
          const honestStarted = Date.now()
          yield* insertEvents([eventBody(honest.orgId, "approval.requested")])
          yield* receiver.waitFor((request) => request.path === "/hook", "20 seconds")
          const delivered = Date.now() - honestStarted
          const exported = yield* elapsed(honest.client.telemetry.test({ params: { id: destination.id } }))
          assert.isTrue(exported.value.delivered)
          const threadPool = yield* elapsed(Effect.promise(() =>
            Promise.all([
              ...Array.from(
                { length: 8 },
                () =>
                  new Promise((resolve, reject) =>
                    gzip(Buffer.alloc(64 * 1024, 7), (e, out) => e ? reject(e) : resolve(out))
                  )
              ),
              ...Array.from({ length: 8 }, () => readFile(fileURLToPath(import.meta.url)))
            ])
          ))
          console.log(
            `DNS isolation: busy refusal after ${busyAfter} ms, honest delivery ${delivered} ms, ` +
              `telemetry test export ${exported.ms.toFixed(0)} ms, 8 gzip + 8 file reads ${threadPool.ms.toFixed(0)} ms`
          )
          // Relative bounds: each finished before one hostile DNS query could even time out.
          assert.isBelow(delivered, DNS_TIMEOUT_MS)
          assert.isBelow(exported.ms, DNS_TIMEOUT_MS)
          assert.isBelow(threadPool.ms, DNS_TIMEOUT_MS)
          const honestRows = yield* deliveryRows(honestEndpoint.id)
          assert.strictEqual(honestRows[0]?.status, "delivered")

          // The hanging lookups end by their own timeouts, and are retried like network failures.
          const timedOut = yield* eventually(
            Effect.map(
              Effect.forEach(hostileIds, deliveryRows),
              (rows) => rows.flat().find((row) => /DNS timeout/.test(row.last_error ?? ""))
            ),
            { what: "a hostile delivery failed as DNS timeout", timeoutMs: 30_000 }
          )
          assert.strictEqual(timedOut.status, "retrying")
          // Once every lookup ended, no more queries are sent for those names.
          yield* eventually(
            Effect.sync(() => {
              const last = Math.max(0, ...dns.queries().filter((q) => q.name.startsWith("bad")).map((q) => q.at))
              return Date.now() - last > DNS_TIMEOUT_MS * DNS_TRIES ? true : undefined
            }),
            { what: "DNS queries for the silent names to stop", timeoutMs: 30_000, intervalMs: 250 }
          )
          const silentQueries = dns.queries().filter((q) => q.name.startsWith("bad") && q.at > started)
          // Each lookup: two families, at most DNS_TRIES queries each; at most one lookup per delivery.
          assert.isAtMost(silentQueries.length, HOSTILE_ENDPOINTS * 2 * 2 * DNS_TRIES)
        }),
      { timeout: 120_000 }
    )
  })
})
