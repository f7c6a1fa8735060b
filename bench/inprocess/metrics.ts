/**
 * `npm run bench -- metrics`: what `/metrics` costs and what the metrics add
 * to requests.
 *
 * 1. Scrape cost with 1 000 webhook endpoints (100 deactivated, 100 cooling
 *    down) and 10 000 queued deliveries (plus 20 000 delivered ones, which
 *    the reads must not walk): the time and size of a scrape that reads the
 *    database (the cache expired) and of one answered from the cache, the
 *    CPU time of each, and the plans of the database reads.
 * 2. Request latency, metrics on (`SVC_METRICS_TOKEN` set, scraped every
 *    second) versus off (neither setting: nothing is recorded): two
 *    servers in this process, `GET /v1/tasks` sequentially against each in
 *    alternating blocks (ABBA), after a warm-up.
 *
 * Both servers and the client share this process (and, on two cores, the
 * machine with whatever else runs): compare the two columns of one run.
 * `BENCH_DATABASE_URL` puts both on scratch databases of that PostgreSQL
 * server instead of embedded PGlite.
 */
import { Context, Effect, Fiber, Layer, Option, Redacted, type Scope } from "effect"
import type { SqlClient } from "effect/sql"
import { DATABASE_READ_EVERY_MS } from "../../src/observability/Scrape.ts"
import { SvcTest } from "../../src/testing.ts"

const TOKEN = "bench-metrics-token-0123456789"
const ENDPOINTS = 1_000
const QUEUED_PER_ENDPOINT = 10
const DELIVERED_PER_ENDPOINT = 20
const COLD_SCRAPES = Number(process.env.BENCH_METRICS_COLD_SCRAPES ?? 4)
const WARM_SCRAPES = 100
const LATENCY_BLOCKS = ["off", "on", "on", "off", "off", "on", "on", "off"] as const
const LATENCY_REQUESTS_PER_BLOCK = Number(process.env.BENCH_METRICS_REQUESTS_PER_BLOCK ?? 500)

const server = (metrics: boolean) => {
  const url = process.env.BENCH_DATABASE_URL
  if (url !== undefined && url !== "") process.env.TEST_DATABASE_URL = url
  return Layer.build(SvcTest.layer({
    config: metrics ? { metricsToken: Option.some(Redacted.make(TOKEN)) } : {}
  }))
}

const seed = (sql: SqlClient.SqlClient, orgId: string) =>
  Effect.gen(function*() {
    yield* sql`
      INSERT INTO notification_endpoints (id, org_id, url, url_hint, events, active, deactivated_at, created_by)
      SELECT gen_random_uuid(), ${orgId}, 'https://hooks.example.com/' || i, 'https://hooks.example.com/…',
             '["approval.requested"]'::jsonb, i % 10 <> 0, CASE WHEN i % 10 = 0 THEN now() END, 'bench'
      FROM generate_series(1, ${ENDPOINTS}) AS i
    `
    // Never due during the run: the worker leaves them queued.
    yield* sql`
      INSERT INTO deliveries (id, org_id, kind, target_id, status, next_attempt_at, created_at)
      SELECT gen_random_uuid(), ${orgId}, 'webhook', e.id, 'queued', now() + interval '1 day', now() - g * interval '1 second'
      FROM notification_endpoints e, generate_series(1, ${QUEUED_PER_ENDPOINT}) AS g
      WHERE e.org_id = ${orgId}
    `
    yield* sql`
      INSERT INTO deliveries (id, org_id, kind, target_id, status, attempts, created_at, finished_at)
      SELECT gen_random_uuid(), ${orgId}, 'webhook', e.id, 'delivered', 1, now() - interval '2 days', now() - interval '2 days'
      FROM notification_endpoints e, generate_series(1, ${DELIVERED_PER_ENDPOINT}) AS g
      WHERE e.org_id = ${orgId}
    `
    // The targets' rows and undelivered counts, as the enqueue statement keeps them.
    yield* sql`
      INSERT INTO delivery_targets (id, org_id, kind, undelivered)
      SELECT e.id, ${orgId}, 'webhook', ${QUEUED_PER_ENDPOINT} FROM notification_endpoints e WHERE e.org_id = ${orgId}
      ON CONFLICT (id) DO UPDATE SET undelivered = EXCLUDED.undelivered
    `
    yield* sql`
      UPDATE delivery_targets SET cooldown_until = now() + interval '1 hour'
      WHERE id IN (SELECT id FROM delivery_targets ORDER BY id LIMIT ${ENDPOINTS / 10})
    `
    yield* sql`ANALYZE deliveries`
    yield* sql`ANALYZE delivery_targets`
    yield* sql`ANALYZE notification_endpoints`
  }).pipe(Effect.orDie)

/** The plans of the scrape's reads (the statements of src/observability/Scrape.ts). */
const plans = (sql: SqlClient.SqlClient) =>
  Effect.gen(function*() {
    const explain = (text: string) =>
      Effect.map(
        sql.unsafe<{ "QUERY PLAN": string }>(`EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY ON) ${text}`),
        (rows) => rows.map((row) => row["QUERY PLAN"])
      )
    const queues = yield* explain(`
      WITH targets AS (
        SELECT kind, sum(undelivered)::int AS depth, (count(*) FILTER (WHERE cooldown_until > now()))::int AS cooling
        FROM delivery_targets GROUP BY kind
      )
      SELECT k.kind, coalesce(t.depth, 0), coalesce(t.cooling, 0),
             extract(epoch FROM now() - (SELECT d.created_at FROM deliveries d
               WHERE d.kind = k.kind AND d.status IN ('queued', 'sending', 'retrying') ORDER BY d.created_at LIMIT 1))::float8
      FROM (VALUES ('webhook'), ('telemetry'), ('email')) AS k (kind) LEFT JOIN targets t ON t.kind = k.kind`)
    const deactivated = yield* explain(`SELECT count(*)::int FROM notification_endpoints WHERE NOT active`)
    return { queues, deactivated }
  }).pipe(Effect.orDie)

const cpuMs = (since: NodeJS.CpuUsage) => {
  const used = process.cpuUsage(since)
  return (used.user + used.system) / 1000
}

const timedScrape = async (url: string) => {
  const cpu = process.cpuUsage()
  const t0 = performance.now()
  const response = await fetch(url, { headers: { authorization: `Bearer ${TOKEN}` } })
  const body = await response.text()
  if (response.status !== 200) throw new Error(`scrape answered ${response.status}`)
  return { ms: performance.now() - t0, cpuMs: cpuMs(cpu), bytes: Buffer.byteLength(body) }
}

const percentile = (values: ReadonlyArray<number>, p: number) => {
  const sorted = [...values].sort((a, b) => a - b)
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!
}
const median = (values: ReadonlyArray<number>) => percentile(values, 50)
const round = (value: number) => Math.round(value * 100) / 100

const program = Effect.gen(function*() {
  const onContext = yield* server(true)
  const offContext = yield* server(false)
  const on = Context.get(onContext, SvcTest)
  const off = Context.get(offContext, SvcTest)
  const org = yield* on.provisionOrg()
  yield* seed(on.sql, org.orgId)
  const metricsUrl = `${on.baseUrl}/metrics`

  // 1. Scrape cost.
  const cold: Array<Awaited<ReturnType<typeof timedScrape>>> = []
  for (let i = 0; i < COLD_SCRAPES; i++) {
    yield* Effect.sleep(DATABASE_READ_EVERY_MS + 200)
    cold.push(yield* Effect.promise(() => timedScrape(metricsUrl)))
  }
  const warm: Array<Awaited<ReturnType<typeof timedScrape>>> = []
  for (let i = 0; i < WARM_SCRAPES; i++) warm.push(yield* Effect.promise(() => timedScrape(metricsUrl)))
  const plan = yield* plans(on.sql)
  const body = yield* Effect.promise(() =>
    fetch(metricsUrl, { headers: { authorization: `Bearer ${TOKEN}` } }).then((r) => r.text())
  )
  const svcBytes = body.split("\n").filter((line) =>
    line.startsWith("svc_") || line.startsWith("http_") || line.startsWith("# HELP svc_") ||
    line.startsWith("# TYPE svc_") || line.startsWith("# HELP http_") || line.startsWith("# TYPE http_")
  ).join("\n").length

  // 2. Request latency, metrics on versus off, with a scrape every second on the "on" server.
  const offOrg = yield* off.provisionOrg()
  const keys = { on: org.key, off: offOrg.key }
  const urls = { on: on.baseUrl, off: off.baseUrl }
  const get = (which: "on" | "off") =>
    Effect.promise(async () => {
      const t0 = performance.now()
      const response = await fetch(`${urls[which]}/v1/tasks`, { headers: { authorization: `Bearer ${keys[which]}` } })
      await response.text()
      return performance.now() - t0
    })
  for (let i = 0; i < 300; i++) {
    yield* get("on")
    yield* get("off")
  }
  let scraping = true
  const scraper = Effect.promise(async () => {
    while (scraping) {
      await timedScrape(metricsUrl)
      await new Promise((resolve) =>
        setTimeout(resolve, 1000)
      )
    }
  })
  const scraperFiber = yield* Effect.forkChild(scraper)
  const latencies = { on: [] as Array<number>, off: [] as Array<number> }
  const cpu = { on: 0, off: 0 }
  for (const which of LATENCY_BLOCKS) {
    const since = process.cpuUsage()
    for (let i = 0; i < LATENCY_REQUESTS_PER_BLOCK; i++) latencies[which].push(yield* get(which))
    cpu[which] += cpuMs(since)
  }
  scraping = false
  yield* Fiber.join(scraperFiber)

  const loadavg = (yield* Effect.promise(() => import("node:os"))).loadavg().map((n) => n.toFixed(2)).join(" ")

  // 3. What recording one request costs, alone.
  const { makeMetrics } = yield* Effect.promise(() => import("../../src/observability/Metrics.ts"))
  const registry = makeMetrics({ processMetrics: false })
  const routes = ["/v1/tasks", "/v1/tasks/:task_id", "/v1/feedback", "/v1/agent-sessions/:session_id/steps", undefined]
  const calls = 200_000
  const recordCpu = process.cpuUsage()
  for (let i = 0; i < calls; i++) {
    registry.httpRequest(
      i % 7 === 0 ? "POST" : "GET",
      routes[i % routes.length],
      i % 11 === 0 ? 404 : 200,
      (i % 100) / 1000
    )
  }
  const recordUs = (cpuMs(recordCpu) * 1000) / calls
  return {
    name: "metrics",
    rows: [
      {
        variant: "scrape, database read (cache expired)",
        "median (ms)": round(median(cold.map((s) => s.ms))),
        "max (ms)": round(Math.max(...cold.map((s) => s.ms))),
        "median CPU (ms)": round(median(cold.map((s) => s.cpuMs))),
        bytes: cold[0]!.bytes,
        scrapes: cold.length
      },
      {
        variant: "scrape from the cache",
        "median (ms)": round(median(warm.map((s) => s.ms))),
        "max (ms)": round(percentile(warm.map((s) => s.ms), 99)),
        "median CPU (ms)": round(median(warm.map((s) => s.cpuMs))),
        bytes: warm[0]!.bytes,
        scrapes: warm.length
      },
      {
        variant: "GET /v1/tasks, metrics off",
        "p50 (ms)": round(percentile(latencies.off, 50)),
        "p99 (ms)": round(percentile(latencies.off, 99)),
        "CPU per request (µs)": Math.round((cpu.off * 1000) / latencies.off.length),
        requests: latencies.off.length
      },
      {
        variant: "GET /v1/tasks, metrics on (scraped every 1 s)",
        "p50 (ms)": round(percentile(latencies.on, 50)),
        "p99 (ms)": round(percentile(latencies.on, 99)),
        "CPU per request (µs)": Math.round((cpu.on * 1000) / latencies.on.length),
        requests: latencies.on.length
      },
      { variant: "recording one request's duration alone", "CPU per request (µs)": round(recordUs), requests: calls }
    ],
    notes: [
      `${ENDPOINTS} endpoints (${ENDPOINTS / 10} deactivated, ${ENDPOINTS / 10} cooling down), ${
        ENDPOINTS * QUEUED_PER_ENDPOINT
      } queued and ${ENDPOINTS * DELIVERED_PER_ENDPOINT} delivered deliveries; database: ${on.database}.`,
      `Body: ${body.length} bytes, of which svc_* and http_* families ${svcBytes} bytes (the rest: prom-client's process_* and nodejs_* metrics).`,
      `Latency on/off: p50 ${
        ((percentile(latencies.on, 50) / percentile(latencies.off, 50) - 1) * 100).toFixed(1)
      } %, p99 ${
        ((percentile(latencies.on, 99) / percentile(latencies.off, 99) - 1) * 100).toFixed(1)
      } % (${LATENCY_BLOCKS.length} blocks of ${LATENCY_REQUESTS_PER_BLOCK} sequential requests, ABBA order, after 300 warm-up requests each).`,
      "CPU per request: this process's CPU time over each block (client, server, and on the \"on\" side its share of the 1 s scrapes), divided by its requests.",
      `Load average at the end: ${loadavg}.`,
      "Plan of the queue read:",
      ...plan.queues.map((line) => `  ${line}`),
      "Plan of the deactivated-endpoints read:",
      ...plan.deactivated.map((line) => `  ${line}`)
    ]
  }
})

const scenario = () => Effect.runPromise(Effect.scoped(program as Effect.Effect<any, unknown, Scope.Scope>))

export default scenario
