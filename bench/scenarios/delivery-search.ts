/**
 * Delivery log search over a large history (server only): the p95 of one
 * filtered page, `GET /v1/deliveries` and `GET
 * /v1/notification-endpoints/:id/deliveries`, through svc, for several
 * filter combinations, with `BENCH_SEARCH_ROWS` delivery records (default
 * 10 000 000) in the database.
 *
 * The history is written by SQL (`generate_series`) into the database svc
 * migrated, with the secondary indexes of `deliveries` dropped during the
 * load and built again after it (as `CREATE INDEX` on a filled table), then
 * `VACUUM ANALYZE` (what autovacuum does to a table this size soon after a
 * bulk load). It is spread over 20 organizations (the measured one holds
 * 40 %, over 20 endpoints, one of them small), 30 days, six approval event
 * types and test deliveries, statuses (about 2 % failed, 0.5 % retrying, a
 * few queued, the newest tenth of the measured organization as a delivered
 * log with its outcome rows, and a backlog of 2 000 logged rows, half of
 * them under a live lease) and HTTP statuses; the measured organization's
 * deliveries name approvals of steps with eight action classes.
 *
 * Each combination is asked `BENCH_SEARCH_REQUESTS` times (default 40,
 * after 3 unmeasured), one at a time, each with other values (another
 * endpoint, window, approval, event); the two slowest combinations'
 * statements are printed with `EXPLAIN (ANALYZE, BUFFERS)`.
 */
import { PgClient } from "@effect/sql-pg"
import { Effect, Redacted } from "effect"
import * as path from "node:path"
import type { SearchInput } from "../../src/deliveries/records/Search.ts"
import { statements } from "../../src/deliveries/records/Search.ts"
import { type BenchClient, freshDatabase, keptDatabase } from "../support/db.ts"
import { atMost, type BenchContext, type ScenarioResult } from "../support/scenario.ts"
import { percentile, round, sorted } from "../support/stats.ts"
import { startSvc } from "../support/svc.ts"

const ORGS = 20
const ENDPOINTS = 20
const DAYS = 30
const CLASSES = [
  "payments.refund",
  "payments.card.capture",
  "payments.payout",
  "deploy.prod",
  "deploy.staging",
  "email.send",
  "crm.update",
  "files.delete"
]

interface Combination {
  readonly name: string
  /** The query (endpoint: the endpoint's list), for request `i`. */
  readonly query: (i: number) => { readonly endpoint?: number; readonly params: Record<string, string> }
}

export default async (context: BenchContext): Promise<ScenarioResult> => {
  if (context.database !== "postgres") {
    return {
      scenario: "delivery-search",
      database: context.database,
      rows: [],
      aims: [],
      notes: ["Server only: ten million records are a server's history; set BENCH_DATABASE_URL."]
    }
  }
  const total = Number(process.env.BENCH_SEARCH_ROWS ?? (context.quick ? 200_000 : 10_000_000))
  const requests = Number(process.env.BENCH_SEARCH_REQUESTS ?? (context.quick ? 10 : 40))
  const keep = process.env.BENCH_SEARCH_DATABASE
  const database = keep === undefined ? await freshDatabase("postgres", "delivery_search") : await keptDatabase(keep)
  const checkout = context.checkouts[0]!
  const svc = await startSvc(checkout, database, {
    SVC_ALLOWED_TARGET_CIDRS: "127.0.0.0/8",
    SVC_EXTRA_CA_FILE: context.tls.caFile
  }, path.join(context.logDir, `delivery-search-${checkout.label}.log`))
  const client = await database.connect()
  const notes: Array<string> = []
  try {
    const kept = "existed" in database && database.existed ? await loaded(client, total) : undefined
    let orgId: string, key: string
    const endpoints: Array<string> = []
    if (kept !== undefined) {
      orgId = kept.orgId
      key = (await svc.cli<{ key: string }>("keys", "create", "--org", orgId, "--scopes", "org_config.read")).key
      endpoints.push(...kept.endpoints)
      notes.push(`History loaded by an earlier run into ${keep} (BENCH_SEARCH_DATABASE): ${kept.records} records now.`)
    } else {
      ;({ orgId, key } = await svc.provision())
      for (let e = 0; e < ENDPOINTS; e++) {
        const created = await svc.api(key, "POST", "/v1/notification-endpoints", {
          url: `https://127.0.0.1:9/search-${e}`
        })
        endpoints.push(created.endpoint.id)
      }
      const t0 = Date.now()
      await load(client, orgId, endpoints, total)
      notes.push(`History of ${total} records written and indexed in ${Math.round((Date.now() - t0) / 1000)} s.`)
    }
    const sizes = await client.query<{ table: string; index: string }>(
      `SELECT pg_size_pretty(pg_table_size('deliveries')) AS table, pg_size_pretty(pg_indexes_size('deliveries')) AS index`
    )
    notes.push(`deliveries: ${sizes.rows[0]!.table} of rows, ${sizes.rows[0]!.index} of indexes.`)

    const day = 86_400_000
    const start = Date.now() - DAYS * day
    const hourAt = (i: number) => new Date(start + ((i * 7919) % (DAYS * 24 - 2) + 1) * 3_600_000).toISOString()
    const plus = (iso: string, ms: number) => new Date(Date.parse(iso) + ms).toISOString()
    const sample = async (sqlText: string, i: number) =>
      (await client.query<{ v: string }>(sqlText, [orgId, i])).rows[0]?.v ?? "00000000-0000-4000-8000-000000000000"
    const approvalOf = (i: number) =>
      sample(
        `SELECT split_part(label, ' ', 2) AS v FROM deliveries WHERE org_id = $1 AND label LIKE 'approval.%' AND seq > $2 * 9973 ORDER BY seq LIMIT 1`,
        i
      )
    const eventOf = (i: number) =>
      sample(`SELECT event_id::text AS v FROM deliveries WHERE org_id = $1 AND seq > $2 * 7919 ORDER BY seq LIMIT 1`, i)
    const approvals: Array<string> = []
    const events: Array<string> = []
    for (let i = 0; i < requests + 3; i++) {
      approvals.push(await approvalOf(i))
      events.push(await eventOf(i))
    }

    const combinations: ReadonlyArray<Combination> = [
      { name: "organization, no filter", query: () => ({ params: {} }) },
      { name: "organization, a day in the past", query: (i) => ({ params: { created_until: hourAt(i) } }) },
      { name: "endpoint, no filter", query: (i) => ({ endpoint: i % ENDPOINTS, params: {} }) },
      { name: "endpoint, status=failed", query: (i) => ({ endpoint: i % ENDPOINTS, params: { status: "failed" } }) },
      {
        name: "organization, status=failed, one hour",
        query: (i) => ({
          params: { status: "failed", created_from: hourAt(i), created_until: plus(hourAt(i), 3_600_000) }
        })
      },
      {
        name: "endpoint, 5xx, one hour, action_class=payments.*",
        query: (i) => ({
          endpoint: i % ENDPOINTS,
          params: {
            status_code: "5xx",
            created_from: hourAt(i),
            created_until: plus(hourAt(i), 3_600_000),
            action_class: "payments.*"
          }
        })
      },
      { name: "organization, status_code=404", query: () => ({ params: { status_code: "404" } }) },
      {
        name: "organization, event_type=approval.expired",
        query: () => ({ params: { event_type: "approval.expired" } })
      },
      { name: "organization, action_class=deploy.prod", query: () => ({ params: { action_class: "deploy.prod" } }) },
      { name: "organization, approval_id", query: (i) => ({ params: { approval_id: approvals[i]! } }) },
      { name: "organization, event_id", query: (i) => ({ params: { event_id: events[i]! } }) },
      { name: "endpoint, status=queued (the backlog)", query: () => ({ endpoint: 1, params: { status: "queued" } }) },
      {
        name: "endpoint, status=delivered, finished in a day",
        query: (i) => ({
          endpoint: i % ENDPOINTS,
          params: { status: "delivered", finished_from: hourAt(i), finished_until: plus(hourAt(i), day) }
        })
      },
      {
        name: "small endpoint, status=failed",
        query: () => ({ endpoint: ENDPOINTS - 1, params: { status: "failed" } })
      },
      { name: "organization, label=test* (rare, no index)", query: () => ({ params: { label: "test*" } }) }
    ]
    const rows: Array<Record<string, string | number>> = []
    const measured: Array<{ name: string; p95: number; combination: Combination }> = []
    for (const combination of combinations) {
      const times: Array<number> = []
      let matched = 0
      for (let i = 0; i < requests + 3; i++) {
        const { endpoint, params } = combination.query(i)
        const route = endpoint === undefined
          ? "/v1/deliveries"
          : `/v1/notification-endpoints/${endpoints[endpoint]}/deliveries`
        const url = `${svc.baseUrl}${route}?${new URLSearchParams(params).toString()}`
        const t = performance.now()
        const response = await fetch(url, { headers: { authorization: `Bearer ${key}` } })
        const body = await response.json() as { deliveries?: Array<unknown> }
        const ms = performance.now() - t
        if (!response.ok) throw new Error(`${combination.name}: ${response.status} ${JSON.stringify(body)}`)
        if (i >= 3) {
          times.push(ms)
          matched += body.deliveries?.length ?? 0
        }
      }
      const ascending = sorted(times)
      const p95 = percentile(ascending, 0.95)
      rows.push({
        filter: combination.name,
        "p50 ms": round(percentile(ascending, 0.5), 1),
        "p95 ms": round(p95, 1),
        "max ms": round(ascending.at(-1)!, 1),
        "rows / page": round(matched / times.length, 1)
      })
      measured.push({ name: combination.name, p95, combination })
    }
    for (const slow of measured.sort((a, b) => b.p95 - a.p95).slice(0, 2)) {
      notes.push(
        `Plans of "${slow.name}" (p95 ${round(slow.p95, 1)} ms):`,
        ...await explain(database.url!, orgId, endpoints, slow.combination)
      )
    }
    const p95s = rows.map((row) => Number(row["p95 ms"]))
    return {
      scenario: "delivery-search",
      database: context.database,
      rows,
      aims: [atMost("slowest filter combination's p95 of one page", Math.max(...p95s), 50, " ms")],
      notes: [
        `${total} delivery records over ${ORGS} organizations (the measured one ${ENDPOINTS} endpoints, 40 % of the records), ${DAYS} days; ${requests} requests per combination, one at a time, through svc's HTTP API (wall time at the client, the machine's load included).`,
        ...notes
      ]
    }
  } finally {
    await client.end()
    await svc.stop()
    if (keep === undefined) await database.drop()
  }
}

/**
 * What an earlier run with the same `BENCH_SEARCH_DATABASE` loaded: the
 * measured organization and its endpoints in the order they were made.
 * Refuses a database holding fewer than `total` records.
 */
const loaded = async (client: BenchClient, total: number) => {
  const org = await client.query<{ id: string; records: string }>(
    `SELECT o.id, (SELECT count(*) FROM deliveries) AS records FROM orgs o WHERE o.name = 'bench'`
  )
  const row = org.rows[0]
  // The retention sweeper of an earlier run's svc pruned what finished over 30 days ago meanwhile: about 0.1 % an hour.
  if (org.rows.length !== 1 || Number(row!.records) < total * 0.98) {
    throw new Error(`BENCH_SEARCH_DATABASE: no complete history of ${total} records there; drop it and run again`)
  }
  const endpoints = await client.query<{ id: string }>(
    `SELECT id FROM notification_endpoints WHERE org_id = $1 ORDER BY seq`,
    [row!.id]
  )
  return { orgId: row!.id, endpoints: endpoints.rows.map((e) => e.id), records: Number(row!.records) }
}

/** The history, by SQL. */
const load = async (
  client: BenchClient,
  orgId: string,
  endpoints: ReadonlyArray<string>,
  total: number
) => {
  const q = (text: string, params?: ReadonlyArray<unknown>) => client.query(text, params)
  await q(`SET maintenance_work_mem = '512MB'`)
  // The bulk load skips the count triggers and foreign keys (the counts are set below).
  // Ids derived from numbers, as UUIDs of version 4 (what the API's schemas check).
  await q(`
    CREATE FUNCTION bench_uuid(t text) RETURNS uuid LANGUAGE sql IMMUTABLE
    AS $$ SELECT (substr(md5(t), 1, 12) || '4' || substr(md5(t), 14, 3) || '8' || substr(md5(t), 18))::uuid $$`)
  await q(`SET session_replication_role = replica`)
  const indexes = (await q(
    `SELECT indexname AS name, indexdef AS def FROM pg_indexes WHERE tablename = 'deliveries' AND indexname NOT IN ('deliveries_pkey')`
  )).rows as Array<{ name: string; def: string }>
  for (const index of indexes) {
    await q(`ALTER TABLE deliveries DROP CONSTRAINT IF EXISTS ${index.name}`).then(() =>
      q(`DROP INDEX IF EXISTS ${index.name}`)
    )
  }
  await q(
    `INSERT INTO orgs (id, name) SELECT bench_uuid('org' || g), 'bench ' || g FROM generate_series(1, ${ORGS - 1}) g`
  )
  // The measured organization's approvals: one per five of its deliveries, a step each with one of the action classes.
  const perOrg = Math.ceil(total * 0.4)
  await q(
    `INSERT INTO agent_sessions (id, org_id) SELECT bench_uuid('s' || g), $1 FROM generate_series(0, ${
      Math.ceil(perOrg / 5 / 1000)
    }) g`,
    [orgId]
  )
  await q(
    `
    INSERT INTO agent_steps (session_id, step_id, org_id, tool, action_class, arguments, decision, approval_id, resolution)
    SELECT bench_uuid('s' || (k / 1000)), 'step-' || k, $1, 'tool', ($2::text[])[1 + k % 8], '{}'::jsonb, 'pending', bench_uuid('a' || k), 'pending'
    FROM generate_series(0, ${Math.ceil(perOrg / 5)}) k`,
    [orgId, CLASSES]
  )
  await q(
    `
    INSERT INTO approvals (id, org_id, session_id, step_id, status, deadline_at, expires_at, timeout_action, created_at)
    SELECT bench_uuid('a' || k), $1, bench_uuid('s' || (k / 1000)), 'step-' || k, 'approved', now(), now(), 'reject', now()
    FROM generate_series(0, ${Math.ceil(perOrg / 5)}) k`,
    [orgId]
  )
  // Row i: the measured organization when i % 5 < 2 (its n-th row n = 2 * (i / 5) + i % 5), else one of the others.
  await q(
    `
    INSERT INTO deliveries (id, org_id, kind, target_id, status, label, event_id, meta, attempts, replays, last_error,
                            next_attempt_at, created_at, finished_at, status_code)
    SELECT gen_random_uuid(), x.org, 'webhook', x.target, x.status,
           CASE WHEN x.t >= 99 THEN 'test approval.requested'
                ELSE (ARRAY['approval.requested', 'approval.approved', 'approval.rejected', 'approval.expiring',
                            'approval.escalated', 'approval.expired'])[CASE WHEN x.t < 40 THEN 1 WHEN x.t < 65 THEN 2 WHEN x.t < 75 THEN 3
                                                                        WHEN x.t < 85 THEN 4 WHEN x.t < 90 THEN 5 ELSE 6 END]
                     || ' ' || CASE WHEN x.mine THEN bench_uuid('a' || (x.n / 5)) ELSE bench_uuid('x' || (x.i / 5)) END END,
           bench_uuid('e' || (x.i / 2)), '{}'::jsonb,
           CASE x.status WHEN 'failed' THEN 8 WHEN 'retrying' THEN 3 WHEN 'queued' THEN 0 ELSE 1 END, 0,
           CASE x.status WHEN 'failed' THEN 'HTTP error' WHEN 'retrying' THEN 'HTTP 503' END,
           CASE WHEN x.status IN ('retrying', 'queued') THEN now() + interval '365 days' ELSE x.at END,
           x.at,
           CASE x.status WHEN 'delivered' THEN x.at + interval '2 seconds' WHEN 'failed' THEN x.at + interval '10 hours' END,
           CASE x.status WHEN 'delivered' THEN 200 + 4 * (x.i % 2)
                         WHEN 'failed' THEN (ARRAY[500, 503, 404, NULL])[1 + (x.i / 1000) % 4]
                         WHEN 'retrying' THEN 503 END
    FROM (
      SELECT i, mine, n, t, at, org, target,
             CASE WHEN r < 20 THEN 'failed' WHEN r < 25 THEN 'retrying' WHEN r < 26 THEN 'queued'
                  WHEN mine AND n > ${Math.floor(perOrg * 0.9)} THEN 'logged' ELSE 'delivered' END AS status
      FROM (
        SELECT g AS i, g % 5 < 2 AS mine, 2 * (g / 5) + g % 5 AS n, (g * 13) % 100 AS t, (g * 7907) % 1000 AS r,
               now() - interval '${DAYS} days' + (g::float8 / ${total}) * interval '${DAYS} days' AS at,
               CASE WHEN g % 5 < 2 THEN $1::uuid ELSE bench_uuid('org' || (1 + g % ${ORGS - 1})) END AS org,
               CASE WHEN g % 5 >= 2 THEN bench_uuid('t' || (g % ${(ORGS - 1) * 5}))
                    WHEN g % 1000 = 0 THEN ($2::uuid[])[${ENDPOINTS}]
                    ELSE ($2::uuid[])[1 + (g / 5) % ${ENDPOINTS - 1}] END AS target
        FROM generate_series(1::bigint, ${total}) g
      ) y
    ) x`,
    [orgId, endpoints]
  )
  // The log's delivered rows: outcome rows of up to 100 seqs each, the cursor past them.
  await q(
    `
    INSERT INTO delivery_outcomes (target_id, to_seq, from_seq, org_id, at, seqs, status_codes, durations_ms)
    SELECT target_id, max(seq), min(seq), $1, max(created_at) + interval '1 second', array_agg(seq ORDER BY seq),
           array_agg(204 ORDER BY seq), array_agg(30 ORDER BY seq)
    FROM (SELECT target_id, seq, created_at, row_number() OVER (PARTITION BY target_id ORDER BY seq) / 100 AS batch
          FROM deliveries WHERE status = 'logged') l
    GROUP BY target_id, batch`,
    [orgId]
  )
  // A backlog on the second endpoint: 2 000 logged rows past its cursor, the first half under a live lease.
  await q(
    `
    INSERT INTO deliveries (id, org_id, kind, target_id, status, label, event_id, created_at, next_attempt_at)
    SELECT gen_random_uuid(), $1, 'webhook', $2, 'logged', 'approval.requested ' || bench_uuid('a' || g), gen_random_uuid(),
           now() - interval '1 minute' + g * interval '10 milliseconds', now() + interval '365 days'
    FROM generate_series(1, 2000) g`,
    [orgId, endpoints[1]]
  )
  await q(`
    INSERT INTO delivery_targets AS t (id, org_id, kind, cursor, leased_to, log_pending, undelivered)
    SELECT d.target_id, (array_agg(d.org_id))[1], 'webhook',
           coalesce(max(d.seq) FILTER (WHERE o.seq IS NOT NULL), 0), coalesce(max(d.seq) FILTER (WHERE o.seq IS NOT NULL), 0),
           (count(*) FILTER (WHERE d.status = 'logged' AND o.seq IS NULL))::int,
           (count(*) FILTER (WHERE d.status IN ('queued', 'sending', 'retrying') OR (d.status = 'logged' AND o.seq IS NULL)))::int
    FROM deliveries d LEFT JOIN (SELECT unnest(seqs) AS seq FROM delivery_outcomes) o ON o.seq = d.seq
    GROUP BY d.target_id
    ON CONFLICT (id) DO UPDATE SET cursor = EXCLUDED.cursor, leased_to = EXCLUDED.leased_to,
      log_pending = EXCLUDED.log_pending, undelivered = EXCLUDED.undelivered`)
  await q(
    `
    UPDATE delivery_targets SET lease_owner = gen_random_uuid(), lease_id = gen_random_uuid(), lease_until = now() + interval '365 days',
           leased_to = cursor + 1000
    WHERE id = $1`,
    [endpoints[1]]
  )
  await q(`RESET session_replication_role`)
  for (const index of indexes) await q(index.def)
  for (const index of indexes) {
    // A unique index that backed a constraint is one again.
    if (index.def.startsWith("CREATE UNIQUE INDEX") && index.name.endsWith("_key")) {
      await q(`ALTER TABLE deliveries ADD CONSTRAINT ${index.name} UNIQUE USING INDEX ${index.name}`)
    }
  }
  await q(`VACUUM ANALYZE deliveries`)
  await q(`VACUUM ANALYZE delivery_outcomes`)
  await q(`ANALYZE approvals`)
  await q(`ANALYZE agent_steps`)
  await q(`ANALYZE delivery_targets`)
}

/** `EXPLAIN (ANALYZE, BUFFERS)` of the statements of one request of `combination`, as svc's search builds them. */
const explain = (url: string, orgId: string, endpoints: ReadonlyArray<string>, combination: Combination) =>
  Effect.gen(function*() {
    const sql = yield* PgClient.PgClient
    const { endpoint, params } = combination.query(5)
    const code = params.status_code
    const input: SearchInput = {
      orgId,
      kind: "webhook",
      targetId: endpoint === undefined ? undefined : endpoints[endpoint],
      statuses: params.status === undefined ? undefined : [params.status as "failed"],
      statusCode: code === undefined
        ? undefined
        : code.endsWith("xx")
        ? { _tag: "Class", digit: Number(code[0]) }
        : { _tag: "Code", code: Number(code) },
      eventType: params.event_type,
      eventId: params.event_id,
      approvalId: params.approval_id,
      actionClass: params.action_class,
      label: params.label,
      createdFrom: params.created_from,
      createdUntil: params.created_until,
      finishedFrom: params.finished_from,
      finishedUntil: params.finished_until,
      limit: 51,
      scan: 20_000
    }
    const out: Array<string> = []
    for (const statement of statements(sql, input)) {
      for (const part of [statement.page, statement.lastRead]) {
        const [text, values] = part.compile()
        // As svc runs a search: JIT off in its transaction (`Search.ts`).
        const plan = yield* sql.withTransaction(
          Effect.andThen(
            sql`SET LOCAL jit = off`,
            sql.unsafe<{ "QUERY PLAN": string }>(`EXPLAIN (ANALYZE, BUFFERS) ${text}`, values as Array<unknown>)
          )
        )
        out.push(text.replace(/\s+/g, " ").trim(), ...plan.map((row) => `  ${row["QUERY PLAN"]}`))
      }
    }
    return out
  }).pipe(Effect.provide(PgClient.layer({ url: Redacted.make(url) })), Effect.orDie, Effect.runPromise)
