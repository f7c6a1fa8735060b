/**
 * The delivery queue at the SQL level: replays the statements each design
 * runs per delivery (enqueue by the event dispatcher, claim, settle) on a
 * fresh database, and reports what the database spends per delivery.
 *
 *   npx node bench/sql/queue-study.ts                              # PGlite, every variant, 1k/20k/100k
 *   STUDY_DATABASE_URL=postgres://postgres@127.0.0.1:5432/test \
 *     npx node bench/sql/queue-study.ts --db postgres,pglite --backlogs 1000,20000,100000
 *   ... --endpoints 1000 --orgs 200      # the many-endpoints curve
 *   ... --variants main,enqueue,lease --rounds 2 --explain
 *
 * Variants (each on its own fresh database, run interleaved per backlog):
 * - `main`: every migration but 0600, and main's enqueue statement
 *   (a copy, below: per-row foreign key on `orgs`, the count's INSERT
 *   trigger); claim and settle are this checkout's `Leases.claim` and
 *   `Leases.settleMany` (one lease per delivery row, one attempt row each).
 * - `enqueue`: every migration, this checkout's `Enqueue.enqueueFrom`
 *   (no foreign key per row, the count upserted in the statement); the same
 *   claim and settle.
 * - `lease`: the candidate second design: one lease per endpoint (a row in
 *   `study_targets` while a process works it), deliveries as an
 *   append-only log (`study_log`) read past the endpoint's cursor, and a
 *   settle that advances the cursor and writes one outcome row per endpoint
 *   and batch (failures would be written on their own; this replay
 *   delivers everything).
 *
 * Each variant: `--orgs` organizations with `--endpoints` endpoints in all
 * (subscribed to everything), events making `backlog` deliveries, dispatched
 * 200 events per statement as the dispatcher does, then drained by claims of
 * 256 (64 per endpoint) each settled at once as delivered. Measured per
 * delivery: server backends' CPU (/proc, the variant's database only) or,
 * on PGlite, this process's CPU (the embedded database runs in a worker
 * thread of it); WAL bytes from the LSN (on a server the LSN is the
 * cluster's: other work on it adds to the figure). Statements are prepared
 * per connection, as `@effect/sql-pg` does.
 */
import { PgClient, PgMigrator } from "@effect/sql-pg"
import { NodeServices } from "@effect/platform-node"
import { Effect, Layer, Redacted } from "effect"
import { Migrator, SqlClient } from "effect/sql"
import { loadavg } from "node:os"
import pg from "pg"
import * as Enqueue from "../../src/deliveries/Enqueue.ts"
import * as Leases from "../../src/deliveries/Leases.ts"
import { claimStatement } from "../../src/deliveries/Statements.ts"
import { Outcome } from "../../src/deliveries/Types.ts"
import { Database } from "../../src/platform/Database.ts"
import { newId } from "../../src/platform/Ids.ts"
import { migrationRecord } from "../../src/platform/migrations/index.ts"
import { cpuMicros } from "../support/cpu.ts"

type Variant = "main" | "enqueue" | "lease"
type Db = "postgres" | "pglite"

const args = process.argv.slice(2)
const arg = (name: string, fallback: string) => {
  const i = args.indexOf(`--${name}`)
  return i >= 0 && args[i + 1] !== undefined ? args[i + 1]! : fallback
}
const list = (name: string, fallback: string) => arg(name, fallback).split(",").map((s) => s.trim()).filter((s) => s !== "")
const dbs = list("db", process.env.STUDY_DATABASE_URL ? "postgres,pglite" : "pglite") as Array<Db>
const backlogs = list("backlogs", "1000,20000,100000").map(Number)
const variants = list("variants", "main,enqueue,lease") as Array<Variant>
const endpoints = Number(arg("endpoints", "16"))
const orgs = Number(arg("orgs", "1"))
const rounds = Number(arg("rounds", "1"))
const explain = args.includes("--explain")
const json = args.includes("--json")

const CLAIM = 256
const PER_ENDPOINT = 64
const DISPATCH_BATCH = 200
const CAPACITY = 1_000_000

// --- databases ---------------------------------------------------------------

const adminUrl = () => {
  const url = process.env.STUDY_DATABASE_URL
  if (url === undefined || url === "") throw new Error("STUDY_DATABASE_URL is not set")
  return new URL(url)
}
const withAdmin = async <A>(f: (client: pg.Client) => Promise<A>) => {
  const client = new pg.Client({ connectionString: adminUrl().toString() })
  await client.connect()
  try {
    return await f(client)
  } finally {
    await client.end()
  }
}
let counter = 0

/** A fresh database for one run: its client layer, the CPU meter, and how to drop it. */
const freshDatabase = async (db: Db) => {
  if (db === "pglite") {
    return {
      layer: Database.memory,
      cpu: async () => {
        const usage = process.cpuUsage()
        return usage.user + usage.system
      },
      drop: async () => {}
    }
  }
  const name = `study_${process.pid}_${counter++}`
  await withAdmin((admin) => admin.query(`CREATE DATABASE ${name}`))
  const url = adminUrl()
  url.pathname = `/${name}`
  return {
    layer: Database.server(Redacted.make(url.toString()), 4),
    cpu: () =>
      withAdmin(async (admin) =>
        (await admin.query<{ pid: number }>("SELECT pid FROM pg_stat_activity WHERE datname = $1", [name])).rows
          .reduce((sum, row) => sum + cpuMicros(row.pid), 0)
      ),
    drop: () => withAdmin(async (admin) => void (await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`)))
  }
}

const migrate = (variant: Variant) =>
  Effect.gen(function*() {
    const record = Object.fromEntries(
      // Main's enqueue needs what migration 0600 takes away (the foreign key, the INSERT trigger).
      Object.entries(migrationRecord).filter(([key]) => variant !== "main" || !key.startsWith("0600_"))
    )
    yield* PgMigrator.run({ loader: Migrator.fromRecord(record), table: "svc_migrations" })
    if (variant === "lease") for (const statement of LEASE_SCHEMA) yield* (yield* SqlClient.SqlClient).unsafe(statement)
  }).pipe(Effect.provide(NodeServices.layer))

// --- seeding -------------------------------------------------------------------

const seed = (backlog: number) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const orgIds = Array.from({ length: orgs }, () => newId())
    yield* sql`INSERT INTO orgs (id, name) SELECT id, 'study' FROM unnest(${orgIds}::uuid[]) AS id`
    const endpointRows = Array.from({ length: endpoints }, (_, i) => ({ id: newId(), org: orgIds[i % orgs]! }))
    yield* sql`
      INSERT INTO notification_endpoints (id, org_id, url, url_hint, events, created_by)
      SELECT x.id, x.org, 'https://receiver.test/hook', 'receiver.test', '["approval.requested"]'::jsonb, 'study'
      FROM jsonb_to_recordset(${JSON.stringify(endpointRows)}::jsonb) AS x(id uuid, org uuid)
    `
    // Each event goes to its organization's endpoints: events enough for `backlog` deliveries.
    const perOrg = endpoints / orgs
    const events = Math.ceil(backlog / perOrg)
    const body = JSON.stringify({ type: "approval.requested", data: { approval_id: "x".repeat(26), tool: "deploy" } })
    yield* sql`
      INSERT INTO events (id, org_id, type, occurred_at, body, label)
      SELECT gen_random_uuid(), (${orgIds}::uuid[])[1 + (g % ${orgs})], 'approval.requested', now(), ${body},
             'approval.requested x'
      FROM generate_series(0, ${events - 1}) AS g
    `
    return Math.round(events * perOrg)
  })

// --- statements ------------------------------------------------------------------

/** The dispatcher's common table expressions (events taken and marked, fanned out to endpoints). */
const DISPATCH_WITH = `
  lock AS (SELECT pg_try_advisory_xact_lock(7300001) AS locked),
  ev AS MATERIALIZED (
    SELECT seq, id, org_id, type, body, label FROM events
    WHERE dispatched_at IS NULL AND (SELECT locked FROM lock)
    ORDER BY seq LIMIT ${DISPATCH_BATCH}
    FOR UPDATE SKIP LOCKED
  ),
  marked AS (UPDATE events e SET dispatched_at = now() FROM ev WHERE e.seq = ev.seq RETURNING e.seq),
  fan AS (
    SELECT ev.seq AS event_seq, 0 AS k, ep.seq AS ep_seq, ev.org_id, 'webhook'::text AS kind,
           ep.id AS target_id, ev.id AS event_id, ev.type, ev.body, ev.label
    FROM ev JOIN notification_endpoints ep ON ep.org_id = ev.org_id AND ep.active AND ep.events @> to_jsonb(ev.type)
  )`
const DISPATCH_INPUT = `
  SELECT row_number() OVER (ORDER BY event_seq, k, ep_seq) AS ord, org_id, kind, target_id,
         coalesce(label, type) AS label, event_id, NULL::text AS payload, '{}'::jsonb AS meta, ${CAPACITY}::int AS capacity
  FROM fan`
const DISPATCH_SELECT = `SELECT count(*)::int AS n, (SELECT count(*)::int FROM ev) AS events FROM inserted`

/** Main's dispatch statement before migration 0600 (the count's INSERT trigger does the rest). */
const MAIN_DISPATCH = `
  WITH ${DISPATCH_WITH},
  input AS (${DISPATCH_INPUT}),
  waiting AS (
    SELECT t.target_id, coalesce(c.undelivered, 0) AS n
    FROM (SELECT DISTINCT target_id FROM input) t
    LEFT JOIN delivery_targets c ON c.id = t.target_id
  ),
  ranked AS (
    SELECT i.*, w.n + row_number() OVER (PARTITION BY i.target_id ORDER BY i.ord) AS position
    FROM input i JOIN waiting w ON w.target_id = i.target_id
  ),
  inserted AS (
    INSERT INTO deliveries (id, org_id, kind, target_id, status, label, event_id, payload, meta, last_error, finished_at)
    SELECT gen_random_uuid(), org_id, kind, target_id,
           CASE WHEN position > capacity THEN 'failed' ELSE 'queued' END,
           label, event_id, payload, coalesce(meta, '{}'::jsonb),
           CASE WHEN position > capacity
             THEN 'queue full: the target already has ' || capacity || ' undelivered deliveries' END,
           CASE WHEN position > capacity THEN now() END
    FROM ranked ORDER BY ord
    RETURNING kind
  )
  ${DISPATCH_SELECT}`

/** The candidate's tables: an append-only log, a row per endpoint (lease, cursor, counts, health), outcome rows per batch. */
const LEASE_SCHEMA = [
  `CREATE TABLE study_log (
     seq bigint GENERATED ALWAYS AS IDENTITY,
     id uuid NOT NULL,
     org_id uuid NOT NULL,
     kind text NOT NULL,
     target_id uuid NOT NULL,
     label text,
     event_id uuid,
     payload text,
     meta jsonb,
     created_at timestamptz NOT NULL DEFAULT now(),
     PRIMARY KEY (target_id, seq)
   )`,
  `CREATE UNIQUE INDEX study_log_id_idx ON study_log (id)`,
  `CREATE TABLE study_targets (
     id uuid PRIMARY KEY,
     org_id uuid NOT NULL REFERENCES orgs (id) ON DELETE CASCADE,
     kind text NOT NULL,
     enqueued bigint NOT NULL DEFAULT 0,
     done bigint NOT NULL DEFAULT 0,
     cursor bigint NOT NULL DEFAULT 0,
     lease_owner uuid,
     lease_until timestamptz,
     consecutive_failures int NOT NULL DEFAULT 0,
     cooldown_until timestamptz
   ) WITH (fillfactor = 50)`,
  `CREATE INDEX study_targets_waiting_idx ON study_targets (kind, id) WHERE enqueued > done`,
  `CREATE TABLE study_outcomes (
     target_id uuid NOT NULL,
     from_seq bigint NOT NULL,
     to_seq bigint NOT NULL,
     at timestamptz NOT NULL DEFAULT now(),
     delivered int NOT NULL,
     durations_ms int[] NOT NULL,
     status_codes int[] NOT NULL,
     PRIMARY KEY (target_id, to_seq)
   )`
]

/** The candidate's enqueue: the log rows, the endpoints' counts in the same statement (endpoint rows locked first). */
const LEASE_DISPATCH = `
  WITH ${DISPATCH_WITH},
  input AS (${DISPATCH_INPUT}),
  waiting AS (
    SELECT t.target_id, t.org_id, t.kind, coalesce(c.enqueued - c.done, 0) AS n
    FROM (SELECT target_id, (array_agg(org_id))[1] AS org_id, (array_agg(kind))[1] AS kind FROM input GROUP BY target_id) t
    LEFT JOIN study_targets c ON c.id = t.target_id
  ),
  ranked AS (
    SELECT i.*, w.n + row_number() OVER (PARTITION BY i.target_id ORDER BY i.ord) AS position
    FROM input i JOIN waiting w ON w.target_id = i.target_id
  ),
  counted AS (
    INSERT INTO study_targets AS t (id, org_id, kind, enqueued)
    SELECT target_id, (array_agg(org_id))[1], (array_agg(kind))[1], count(*) FILTER (WHERE position <= capacity)
    FROM ranked GROUP BY target_id ORDER BY target_id
    ON CONFLICT (id) DO UPDATE SET enqueued = t.enqueued + EXCLUDED.enqueued WHERE EXCLUDED.enqueued <> 0
    RETURNING t.id
  ),
  inserted AS (
    INSERT INTO study_log (id, org_id, kind, target_id, label, event_id, payload, meta)
    SELECT gen_random_uuid(), org_id, kind, target_id, label, event_id, payload, meta
    FROM ranked WHERE position <= capacity AND (SELECT count(*) FROM counted) >= 0 ORDER BY ord
    RETURNING kind
  )
  ${DISPATCH_SELECT}`

/** Leases up to `$1` waiting endpoints for `$2` and reads up to `$3` log rows past each one's cursor. */
const LEASE_CLAIM = `
  WITH picked AS (
    SELECT id FROM study_targets
    WHERE kind = 'webhook' AND enqueued > done
      AND (lease_until IS NULL OR lease_until <= now()) AND (cooldown_until IS NULL OR cooldown_until <= now())
    ORDER BY id LIMIT $1
    FOR UPDATE SKIP LOCKED
  ),
  leased AS (
    UPDATE study_targets t SET lease_owner = $2, lease_until = now() + interval '60 seconds'
    FROM picked p WHERE t.id = p.id
    RETURNING t.id, t.cursor, t.consecutive_failures
  )
  SELECT d.seq::text AS seq, d.id, d.org_id, d.target_id, d.label, d.event_id, d.payload, l.consecutive_failures
  FROM leased l CROSS JOIN LATERAL (
    SELECT * FROM study_log WHERE target_id = l.id AND seq > l.cursor ORDER BY seq LIMIT $3
  ) d`

/** One row per endpoint and batch: the cursor moves to `to_seq`, the lease ends, the outcomes are one row. */
const LEASE_SETTLE = `
  WITH input AS (
    SELECT * FROM jsonb_to_recordset($1::jsonb) AS x(
      target_id uuid, lease_owner uuid, from_seq bigint, to_seq bigint, n int, durations int[], codes int[])
  ),
  advanced AS (
    UPDATE study_targets t
    SET cursor = i.to_seq, done = t.done + i.n, lease_owner = NULL, lease_until = NULL,
        consecutive_failures = 0, cooldown_until = NULL
    FROM input i
    WHERE t.id = i.target_id AND t.lease_owner = i.lease_owner AND t.cursor < i.to_seq
    RETURNING t.id
  ),
  recorded AS (
    INSERT INTO study_outcomes (target_id, from_seq, to_seq, delivered, durations_ms, status_codes)
    SELECT i.target_id, i.from_seq, i.to_seq, i.n, i.durations, i.codes FROM input i JOIN advanced a ON a.id = i.target_id
    RETURNING 1
  )
  SELECT count(*)::int AS n FROM recorded`

// --- one run ---------------------------------------------------------------------

interface Phase {
  readonly cpuMicros: number
  readonly walBytes: number
  readonly ms: number
  readonly statements: number
}

const wal = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const [row] = yield* sql<{ lsn: string }>`SELECT pg_current_wal_insert_lsn()::text AS lsn`
  return row!.lsn
})
const walSince = (from: string) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const [row] = yield* sql<{ bytes: string }>`SELECT pg_wal_lsn_diff(pg_current_wal_insert_lsn(), ${from}::pg_lsn)::text AS bytes`
    return Number(row!.bytes)
  })

const measure = <E, R>(cpu: () => Promise<number>, body: Effect.Effect<number, E, R>) =>
  Effect.gen(function*() {
    const lsn = yield* wal
    const cpu0 = yield* Effect.promise(cpu)
    const t0 = performance.now()
    const statements = yield* body
    const ms = performance.now() - t0
    const cpu1 = yield* Effect.promise(cpu)
    return { cpuMicros: cpu1 - cpu0, walBytes: yield* walSince(lsn), ms, statements } satisfies Phase
  })

const dispatchAll = (variant: Variant) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    let statements = 0
    for (;;) {
      let events: number
      if (variant === "enqueue") {
        const [row] = yield* Enqueue.enqueueFrom<{ n: number; events: number }>(sql as PgClient.PgClient, {
          with: sql.literal(DISPATCH_WITH),
          input: sql.literal(DISPATCH_INPUT),
          select: sql.literal(DISPATCH_SELECT)
        })
        events = row?.events ?? 0
      } else {
        const [row] = yield* sql.unsafe<{ n: number; events: number }>(variant === "main" ? MAIN_DISPATCH : LEASE_DISPATCH)
        events = row?.events ?? 0
      }
      statements++
      if (events === 0) return statements
    }
  })

const delivered = Outcome.delivered()
const attempt = { statusCode: 204, durationMs: 2 }

const drainRows = Effect.gen(function*() {
  const sql = (yield* SqlClient.SqlClient) as PgClient.PgClient
  let statements = 0
  for (;;) {
    const claimed = yield* Leases.claim(sql, "webhook", { limit: CLAIM, leaseFor: "60 seconds", perTarget: PER_ENDPOINT })
    statements++
    if (claimed.length === 0) return statements
    yield* Leases.settleMany(sql, claimed.map((c) => ({ claimed: c, outcome: delivered, attempt })))
    statements++
  }
})

const drainLog = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  let statements = 0
  for (;;) {
    const owner = newId()
    const rows = yield* sql.unsafe<{ seq: string; target_id: string }>(LEASE_CLAIM, [
      Math.ceil(CLAIM / PER_ENDPOINT),
      owner,
      PER_ENDPOINT
    ])
    statements++
    if (rows.length === 0) return statements
    const byTarget = new Map<string, Array<string>>()
    for (const row of rows) {
      const seqs = byTarget.get(row.target_id) ?? []
      seqs.push(row.seq)
      byTarget.set(row.target_id, seqs)
    }
    const input = [...byTarget].map(([target, seqs]) => ({
      target_id: target,
      lease_owner: owner,
      from_seq: seqs[0],
      to_seq: seqs[seqs.length - 1],
      n: seqs.length,
      durations: seqs.map(() => attempt.durationMs),
      codes: seqs.map(() => attempt.statusCode)
    }))
    yield* sql.unsafe(LEASE_SETTLE, [JSON.stringify(input)])
    statements++
  }
})

/** EXPLAIN ANALYZE of the variant's claim on the full backlog, rolled back. */
const explainClaim = (variant: Variant) =>
  Effect.gen(function*() {
    const sql = (yield* SqlClient.SqlClient) as PgClient.PgClient
    const [text, params] = variant === "lease"
      ? [LEASE_CLAIM, [Math.ceil(CLAIM / PER_ENDPOINT), newId(), PER_ENDPOINT]] as const
      // The statement as Leases.claim sends it.
      : claimStatement(sql, "webhook", { limit: CLAIM, leaseFor: "60 seconds", perTarget: PER_ENDPOINT }, newId()).compile()
    const plan = yield* sql.withTransaction(Effect.gen(function*() {
      const rows = yield* sql.unsafe<{ "QUERY PLAN": string }>(`EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) ${text}`, params)
      return yield* Effect.fail({ plan: rows.map((r) => r["QUERY PLAN"]).join("\n") })
    })).pipe(Effect.catch((e: unknown) => typeof e === "object" && e !== null && "plan" in e ? Effect.succeed((e as { plan: string }).plan) : Effect.fail(e)))
    return plan
  })

const runOne = (db: Db, variant: Variant, backlog: number) =>
  Effect.promise(() => freshDatabase(db)).pipe(Effect.flatMap((fresh) =>
    Effect.gen(function*() {
      yield* migrate(variant)
      const deliveries = yield* seed(backlog)
      const enqueue = yield* measure(fresh.cpu, dispatchAll(variant))
      const plan = explain ? yield* explainClaim(variant) : undefined
      const drain = yield* measure(fresh.cpu, variant === "lease" ? drainLog : drainRows)
      return { db, variant, backlog, deliveries, enqueue, drain, plan }
    }).pipe(
      Effect.provide(fresh.layer as Layer.Layer<PgClient.PgClient | SqlClient.SqlClient>),
      Effect.ensuring(Effect.promise(() => fresh.drop()))
    )
  ))

const per = (phase: Phase, n: number) => ({
  cpu: Math.round(phase.cpuMicros / n),
  wal: Math.round(phase.walBytes / n),
  rate: Math.round(n / (phase.ms / 1000))
})

const main = Effect.gen(function*() {
  const results: Array<unknown> = []
  console.log(
    `queue study: ${endpoints} endpoints over ${orgs} organizations, backlogs ${backlogs.join(", ")}, ` +
      `variants ${variants.join(", ")}, ${rounds} round(s); load ${loadavg().map((l) => l.toFixed(2)).join(" ")}`
  )
  console.log(
    "db        variant  backlog  | enqueue µs/d  WAL B/d | claim+settle µs/d  WAL B/d  deliveries/s | total µs/d  WAL B/d | load"
  )
  for (const db of dbs) {
    for (const backlog of backlogs) {
      for (let round = 0; round < rounds; round++) {
        // Interleaved: the order turns every round, so no variant always runs first.
        const order = round % 2 === 0 ? variants : [...variants].reverse()
        for (const variant of order) {
          const r = yield* runOne(db, variant, backlog)
          const n = r.deliveries
          const e = per(r.enqueue, n)
          const d = per(r.drain, n)
          const total = { cpu: e.cpu + d.cpu, wal: e.wal + d.wal }
          console.log(
            `${db.padEnd(9)} ${variant.padEnd(8)} ${String(backlog).padStart(7)}  | ${String(e.cpu).padStart(12)} ${
              String(e.wal).padStart(8)
            } | ${String(d.cpu).padStart(17)} ${String(d.wal).padStart(8)} ${String(d.rate).padStart(13)} | ${
              String(total.cpu).padStart(10)
            } ${String(total.wal).padStart(8)} | ${loadavg()[0]!.toFixed(2)}`
          )
          if (r.plan !== undefined) console.log(`-- claim plan (${db}, ${variant}, ${backlog}):\n${r.plan}`)
          results.push({ ...r, perDelivery: { enqueue: e, drain: d, total }, load: loadavg() })
        }
      }
    }
  }
  if (json) console.log(JSON.stringify(results))
})

Effect.runPromise(main).then(
  () => process.exit(0),
  (error) => {
    console.error(error)
    process.exit(1)
  }
)
