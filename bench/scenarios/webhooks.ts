/**
 * Webhooks: events from the outbox to a local HTTPS receiver, through the
 * whole engine (dispatcher → delivery queue → signed sender with the
 * outbound guard), side by side with a bare `undici` sender POSTing the same
 * signed payloads to the same receiver (the network and crypto limit here).
 *
 * - burst: N events written at once; events per second until all received.
 * - paced: events written at a steady rate; p50/p99 from the event's write
 *   (commit + wakeup, as the approvals capability does) to its receipt.
 * - paced with a hanging endpoint: the same, while another endpoint of the
 *   same organization never answers (every attempt runs into the 5 s
 *   deadline); the healthy endpoint's latency is what counts.
 *
 * Embedded PGlite (the default deployment), or a PostgreSQL server with
 * BENCH_DATABASE_URL; figures are reported, never asserted.
 */
import { Context, Duration, Effect, Layer, Option, Redacted, References } from "effect"
import { SqlClient } from "effect/sql"
import { Pool } from "undici"
import { Identity } from "../../src/identity/Identity.ts"
import { EVENTS_TOPIC } from "../../src/notifications/Dispatcher.ts"
import { NotificationEndpoints } from "../../src/notifications/Endpoints.ts"
import { signatureHeader } from "../../src/notifications/Signing.ts"
import { PER_ENDPOINT } from "../../src/notifications/Sender.ts"
import { SvcConfig } from "../../src/platform/Config.ts"
import { SecretBox } from "../../src/platform/Crypto.ts"
import { Database } from "../../src/platform/Database.ts"
import { newId } from "../../src/platform/Ids.ts"
import { Migrations } from "../../src/platform/Migrations.ts"
import { Wakeups } from "../../src/platform/Wakeups.ts"
import { ServicesLive, WorkersLive } from "../../src/server/App.ts"
import { HttpsReceiver, type ReceivedRequest, Reply } from "../../test/support/HttpsReceiver.ts"
import { loopbackTargets, TestTls } from "../../test/support/tls.ts"
import type { ScenarioResult } from "../run.ts"

/** `BENCH_DATABASE_URL=postgres://…` runs the scenario on a scratch database of that server instead of embedded PGlite. */
const databaseUrl = process.env.BENCH_DATABASE_URL
const BURST = 2_000
const PACED_RATE = 100 // events per second
const PACED_SECONDS = 5

const percentile = (values: ReadonlyArray<number>, p: number) => {
  if (values.length === 0) return NaN
  const sorted = [...values].sort((a, b) => a - b)
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!
}

const eventBody = (orgId: string) => {
  const now = new Date().toISOString()
  return {
    id: newId(),
    type: "approval.requested",
    org_id: orgId,
    occurred_at: now,
    approval: {
      approval_id: newId(),
      session_id: newId(),
      step_id: "step-1",
      task_id: null,
      status: "pending",
      deadline_at: now,
      expires_at: now,
      timeout_action: "reject"
    }
  }
}

const waitUntil = (check: () => boolean, timeoutMs: number) =>
  Effect.gen(function*() {
    const deadline = Date.now() + timeoutMs
    while (!check()) {
      if (Date.now() > deadline) return false
      yield* Effect.sleep(Duration.millis(5))
    }
    return true
  })

const round = (n: number) => Math.round(n * 10) / 10

export default async (): Promise<ScenarioResult> =>
  Effect.runPromise(Effect.scoped(Effect.gen(function*() {
    const tls = yield* TestTls.shared
    const receiver = yield* HttpsReceiver.make({
      respond: (request: ReceivedRequest) => (request.path === "/hang" ? Reply.hang() : Reply.status(204))
    })
    const config = SvcConfig.layerWith({
      ...loopbackTargets(tls),
      webhookRetrySchedule: [Duration.seconds(1), Duration.seconds(1), Duration.seconds(1)],
      smtpUrl: Option.none()
    })
    const App = Layer.mergeAll(WorkersLive).pipe(
      Layer.provideMerge(ServicesLive),
      Layer.provideMerge(Migrations.layer),
      Layer.provideMerge(databaseUrl ? Database.scratch(Redacted.make(databaseUrl)) : Database.memory),
      Layer.provideMerge(SecretBox.layerEphemeral),
      Layer.provideMerge(config),
      Layer.provide(Layer.succeed(References.MinimumLogLevel, "Warn"))
    )
    const context = yield* Layer.build(App)

    const identity = Context_get(context, Identity)
    const endpoints = Context_get(context, NotificationEndpoints)
    const wakeups = Context_get(context, Wakeups)
    const sql = Context_get(context, SqlClient.SqlClient)

    const org = yield* identity.createOrg("bench")
    const { secret } = yield* endpoints.create(org.id, "bench", { url: receiver.url("/svc") }).pipe(Effect.orDie)
    const written = new Map<string, number>()

    const write = (events: ReadonlyArray<ReturnType<typeof eventBody>>) =>
      Effect.gen(function*() {
        const rows = events.map((event): Record<string, unknown> => ({
          id: event.id,
          org_id: event.org_id,
          type: event.type,
          occurred_at: event.occurred_at,
          body: JSON.stringify(event)
        }))
        const now = Date.now()
        for (let i = 0; i < rows.length; i += 500) {
          const chunk = rows.slice(i, i + 500) as [Record<string, unknown>, ...Array<Record<string, unknown>>]
          yield* sql`INSERT INTO events ${sql.insert(chunk)}`
        }
        for (const event of events) written.set(event.id, now)
        yield* wakeups.signal(EVENTS_TOPIC)
      }).pipe(Effect.orDie)

    const received = (path: string) => receiver.requests().filter((r) => r.path === path)
    const latencies = (path: string, ids: ReadonlySet<string>) =>
      received(path)
        .filter((r) => ids.has(r.headers["x-svc-event-id"]!))
        .map((r) => r.completedAt - written.get(r.headers["x-svc-event-id"]!)!)

    // --- svc burst
    const burst = Array.from({ length: BURST }, () => eventBody(org.id))
    const burstStart = Date.now()
    yield* write(burst)
    yield* waitUntil(() => received("/svc").length >= BURST, 120_000)
    const svcBurstSeconds = (Date.now() - burstStart) / 1000
    const svcRate = BURST / svcBurstSeconds
    // Where the burst's time goes: until the first receipt (write, first
    // fan-out, first claim, TLS handshakes), and the rate once under way.
    const receipts = received("/svc").map((r) => r.completedAt).sort((a, b) => a - b)
    const firstReceiptMs = receipts[0]! - burstStart
    const lastQuarterRate = (BURST / 4) / ((receipts[BURST - 1]! - receipts[Math.floor((BURST * 3) / 4) - 1]!) / 1000)

    // --- svc paced
    const paced = (path: string) =>
      Effect.gen(function*() {
        const ids = new Set<string>()
        const before = received(path).length
        const total = PACED_RATE * PACED_SECONDS
        const start = Date.now()
        for (let i = 0; i < total; i++) {
          const due = start + (i * 1000) / PACED_RATE
          const wait = due - Date.now()
          if (wait > 0) yield* Effect.sleep(Duration.millis(wait))
          const event = eventBody(org.id)
          ids.add(event.id)
          yield* write([event])
        }
        yield* waitUntil(() => received(path).length >= before + total, 60_000)
        return latencies(path, ids)
      })
    const svcPaced = yield* paced("/svc")

    // --- svc paced while another endpoint of the organization hangs
    yield* endpoints.create(org.id, "bench", { url: receiver.url("/hang") }).pipe(Effect.orDie)
    const svcWithHang = yield* paced("/svc")

    // --- bare undici sender: the same signed bodies, the same receiver, the same per-endpoint concurrency
    const pool = new Pool(receiver.url("/").replace(/\/$/, ""), { connections: PER_ENDPOINT, connect: { ca: [tls.caCert] } })
    yield* Effect.addFinalizer(() => Effect.promise(() => pool.close()))
    const bareSend = (body: string, id: string) =>
      Effect.promise(async () => {
        const t = Math.floor(Date.now() / 1000)
        const response = await pool.request({
          path: "/bare",
          method: "POST",
          headers: {
            "content-type": "application/json",
            "x-svc-event-id": id,
            "x-svc-event-type": "approval.requested",
            "x-svc-signature": signatureHeader([secret], t, body)
          },
          body
        })
        await response.body.dump()
      })
    const bareBurst = Array.from({ length: BURST }, () => eventBody(org.id))
    const bareStart = Date.now()
    for (const event of bareBurst) written.set(event.id, bareStart)
    yield* Effect.forEach(bareBurst, (event) => bareSend(JSON.stringify(event), event.id), {
      concurrency: PER_ENDPOINT,
      discard: true
    })
    const bareSeconds = (Date.now() - bareStart) / 1000
    const bareRate = BURST / bareSeconds
    // Paced bare sends: each sent the moment it is "written".
    const barePacedIds = new Set<string>()
    const barePacedStart = Date.now()
    const fibers = []
    for (let i = 0; i < PACED_RATE * PACED_SECONDS; i++) {
      const due = barePacedStart + (i * 1000) / PACED_RATE
      const wait = due - Date.now()
      if (wait > 0) yield* Effect.sleep(Duration.millis(wait))
      const event = eventBody(org.id)
      barePacedIds.add(event.id)
      written.set(event.id, Date.now())
      fibers.push(yield* Effect.forkChild(bareSend(JSON.stringify(event), event.id)))
    }
    yield* waitUntil(() => latencies("/bare", barePacedIds).length >= barePacedIds.size, 30_000)
    const barePaced = latencies("/bare", barePacedIds)

    const hangAttempts = received("/hang").length
    return {
      name: "webhooks",
      rows: [
        {
          variant: "svc (outbox → dispatcher → queue → signed send)",
          "burst events/s": round(svcRate),
          [`p50 ms @${PACED_RATE}/s`]: percentile(svcPaced, 50),
          [`p99 ms @${PACED_RATE}/s`]: percentile(svcPaced, 99),
          "p99 ms, other endpoint hanging": percentile(svcWithHang, 99),
          "p50 ms, other endpoint hanging": percentile(svcWithHang, 50)
        },
        {
          variant: `bare undici (${PER_ENDPOINT} connections, same signed bodies)`,
          "burst events/s": round(bareRate),
          [`p50 ms @${PACED_RATE}/s`]: percentile(barePaced, 50),
          [`p99 ms @${PACED_RATE}/s`]: percentile(barePaced, 99),
          "p99 ms, other endpoint hanging": "-",
          "p50 ms, other endpoint hanging": "-"
        }
      ],
      notes: [
        `burst of ${BURST} events; paced ${PACED_RATE} events/s for ${PACED_SECONDS} s; ${databaseUrl ? "PostgreSQL server" : "embedded PGlite"}; receiver answers 204 at once`,
        `svc / bare throughput: ${round((svcRate / bareRate) * 100)} %`,
        `svc burst: first event received after ${firstReceiptMs} ms; last quarter of the burst at ${round(lastQuarterRate)} events/s (${round((lastQuarterRate / bareRate) * 100)} % of bare)`,
        `healthy endpoint p99 with a hanging endpoint beside it: ${percentile(svcWithHang, 99)} ms vs ${percentile(svcPaced, 99)} ms without (hanging endpoint got ${hangAttempts} attempts)`
      ]
    } satisfies ScenarioResult
  })))

const Context_get = <I, S>(context: Context.Context<any>, tag: Context.Key<I, S>): S => Context.get(context, tag)
