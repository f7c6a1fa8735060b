/**
 * The delivery queue at the SQL level: replays the statements each design
 * runs per delivery (enqueue by the event dispatcher, claim, settle) on a
 * fresh database, and reports what the database spends per delivery.
 *
 *   npx node bench/sql/queue-study.ts                              # PGlite, every variant, 1k/20k/100k
 *   STUDY_DATABASE_URL=postgres://postgres@127.0.0.1:5432/test \
 *     npx node bench/sql/queue-study.ts --db postgres,pglite --backlogs 1000,20000,100000
 *   ... --endpoints 1000 --orgs 200      # the many-endpoints curve
 *   ... --variants main,enqueue,lease,log --rounds 2 --explain   # `log`: also its take and settle mid-drain
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
 * - `log`: the same design as a process would run it: the lease and the
 *   rows it hands out in two statements (the second reads a fresh
 *   snapshot and moves the lease's high-water mark `leased_to`), a lease
 *   id beside the owner, settles of each claim in two halves in shuffled
 *   order (sends finish out of order), the cursor moved only over a
 *   contiguous run of settled rows (a success above a gap is kept in its
 *   batch's outcome row, which the next settle reads), and one send in
 *   `--retry-every` (50) a retry, written as its own row with an attempt
 *   row and claimed again from a retry index.
 *
 * Each variant: `--orgs` organizations with `--endpoints` endpoints in all
 * (subscribed to everything), events making `backlog` deliveries, dispatched
 * 200 events per statement as the dispatcher does, then drained by claims of
 * 256 (64 per endpoint) each settled at once as delivered. Measured per
 * delivery: server backends' CPU (/proc, the variant's database only) or,
 * on PGlite, this process's CPU (the embedded database runs in a worker
 * thread of it; `STUDY_PGLITE_THREAD=1`: that thread alone); WAL bytes from the LSN (on a server the LSN is the
 * cluster's: other work on it adds to the figure). Statements are prepared
 * per connection, as `@effect/sql-pg` does.
 */
import * as NodeServices from "@effect/platform-node/NodeServices"
import { PgClient, PgMigrator } from "@effect/sql-pg"
import { Effect, Layer, Redacted, Schema } from "effect"
import { Migrator, SqlClient } from "effect/sql"
import { loadavg } from "node:os"
import pg from "pg"
import { Database } from "../../src/database/Database.ts"
import { migrationRecord } from "../../src/database/migrations/index.ts"
import * as Enqueue from "../../src/deliveries/Enqueue.ts"
import * as Leases from "../../src/deliveries/Leases.ts"
import { makeLogLeases } from "../../src/deliveries/log/HeldLeases.ts"
import { claimStatement } from "../../src/deliveries/rows/Statements.ts"
import { Outcome } from "../../src/deliveries/Types.ts"
import { newId } from "../../src/platform/Ids.ts"
import { ownThreads } from "../inprocess/threads.ts"
import { cpuMicros } from "../support/cpu.ts"
import { withClient } from "../support/db.ts"
import { seededShuffle } from "../support/shuffle.ts"

type Variant = "main" | "enqueue" | "lease" | "log"
type Db = "postgres" | "pglite"

const args = process.argv.slice(2)
const arg = (name: string, fallback: string) => {
  const i = args.indexOf(`--${name}`)
  return i >= 0 && args[i + 1] !== undefined ? args[i + 1]! : fallback
}
const list = (name: string, fallback: string) =>
  arg(name, fallback).split(",").map((s) => s.trim()).filter((s) => s !== "")
const dbs = list("db", process.env.STUDY_DATABASE_URL ? "postgres,pglite" : "pglite") as Array<Db>
const backlogs = list("backlogs", "1000,20000,100000").map(Number)
const variants = list("variants", "main,enqueue,lease,log") as Array<Variant>
/** `log` only: one send in this many ends in a retry (written as its own row, claimed again from the retry index). */
const RETRY_EVERY = Number(arg("retry-every", "50"))
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
const withAdmin = <A>(f: (client: pg.Client) => Promise<A>) => withClient(adminUrl().toString(), f)
let counter = 0

/** A fresh database for one run: its client layer, the CPU meter, and how to drop it. */
const freshDatabase = async (db: Db) => {
  if (db === "pglite") {
    return {
      layer: Database.memory,
      // `STUDY_PGLITE_THREAD=1`: PGlite's worker thread alone (what a server backend is to
      // svc), without this process's main thread (the client: Effect, compiling, the crossing).
      cpu: async () => {
        if (process.env.STUDY_PGLITE_THREAD === "1") return ownThreads().worker
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
    if (variant === "lease" || variant === "log") {
      for (const statement of LEASE_SCHEMA) yield* (yield* SqlClient.SqlClient).unsafe(statement)
    }
    if (variant === "log") { for (const statement of LOG_SCHEMA) yield* (yield* SqlClient.SqlClient).unsafe(statement) }
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
      INSERT INTO events (id, org_id, type, occurred_at, body, label, dispatched_at)
      SELECT gen_random_uuid(), (${orgIds}::uuid[])[1 + (g % ${orgs})], 'approval.requested', now(), ${body},
             'approval.requested x', NULL
      FROM generate_series(0, ${events - 1}) AS g
    `
    return Math.round(events * perOrg)
  })

// --- statements ------------------------------------------------------------------

/**
 * The dispatcher's common table expressions (events taken and marked, fanned out to endpoints): the
 * dispatcher as it was before its cursor (migration 0720; its events are written unmarked above).
 * `drain-study.ts --dispatch cursor,mark` compares the two.
 */
const DISPATCH_WITH = `
  lock AS (SELECT pg_try_advisory_xact_lock(7300001) AS locked),
  ev AS MATERIALIZED (
    SELECT seq, id, org_id, type, body, label FROM events
    WHERE (CASE WHEN dispatched_at IS NULL THEN seq END) > 0 AND (SELECT locked FROM lock)
    ORDER BY (CASE WHEN dispatched_at IS NULL THEN seq END) LIMIT ${DISPATCH_BATCH}
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

/**
 * `log`: what the process-shaped design adds to the candidate's tables: a
 * status on log rows (`logged` until something other than a success
 * passed over by the cursor happens to it), the lease's id and high-water
 * mark, a retry index, and attempt rows for what is written on its own.
 */
const LOG_SCHEMA = [
  `ALTER TABLE study_log
     ADD COLUMN status text NOT NULL DEFAULT 'logged',
     ADD COLUMN attempts int NOT NULL DEFAULT 0,
     ADD COLUMN next_attempt_at timestamptz,
     ADD COLUMN finished_at timestamptz,
     ADD COLUMN lease_owner uuid,
     ADD COLUMN lease_until timestamptz`,
  `CREATE INDEX study_log_retry_idx ON study_log (target_id, next_attempt_at, seq) WHERE status = 'retrying'`,
  `ALTER TABLE study_targets ADD COLUMN lease_id uuid, ADD COLUMN leased_to bigint NOT NULL DEFAULT 0`,
  `ALTER TABLE study_outcomes ADD COLUMN seqs bigint[] NOT NULL DEFAULT '{}'`,
  `CREATE TABLE study_attempts (
     delivery_id uuid NOT NULL,
     attempt int NOT NULL,
     at timestamptz NOT NULL DEFAULT now(),
     status_code int,
     error text,
     duration_ms int NOT NULL,
     PRIMARY KEY (delivery_id, attempt)
   )`
]

/**
 * `log`, first statement: leases up to $1 waiting endpoints for owner $2.
 * The owner's own live lease is extended (same id, same high-water mark);
 * any other lease is new (a new id: a settle under the old one is void).
 */
const LOG_LEASE = `
  WITH picked AS (
    SELECT id FROM study_targets
    WHERE kind = 'webhook' AND enqueued > done
      AND (lease_until IS NULL OR lease_until <= now() OR lease_owner = $2)
      AND (cooldown_until IS NULL OR cooldown_until <= now())
    ORDER BY id LIMIT $1
    FOR UPDATE SKIP LOCKED
  )
  UPDATE study_targets t
  SET lease_id = CASE WHEN t.lease_owner = $2 AND t.lease_until > now() THEN t.lease_id ELSE gen_random_uuid() END,
      leased_to = CASE WHEN t.lease_owner = $2 AND t.lease_until > now() THEN t.leased_to ELSE t.cursor END,
      lease_owner = $2, lease_until = now() + interval '60 seconds'
  FROM picked p WHERE t.id = p.id
  RETURNING t.id AS target_id, t.lease_id`

/**
 * `log`, second statement (a fresh snapshot): up to $2 rows per lease in
 * $1 past its high-water mark, which moves; due retries under a row lease.
 */
const LOG_TAKE = `
  WITH leases AS (SELECT * FROM jsonb_to_recordset($1::jsonb) AS x(target_id uuid, lease_id uuid)),
  held AS (
    SELECT t.id, t.leased_to, t.lease_owner FROM study_targets t JOIN leases l ON l.target_id = t.id AND l.lease_id = t.lease_id
  ),
  -- the next rows past each lease's high-water mark, in log order
  ahead AS MATERIALIZED (
    SELECT h.id AS lease_target, h.leased_to, d.* FROM held h CROSS JOIN LATERAL (
      SELECT seq, id, target_id, payload, event_id, status FROM study_log
      WHERE target_id = h.id AND seq > h.leased_to ORDER BY target_id, seq LIMIT $2
    ) d
  ),
  taken AS (
    SELECT a.seq, a.id, a.target_id, a.payload, a.event_id FROM ahead a
    WHERE a.status = 'logged'
      -- settled above the cursor under an earlier lease (there are some only after a takeover)
      AND a.seq NOT IN (SELECT unnest(o.seqs) FROM study_outcomes o WHERE o.target_id = a.lease_target AND o.to_seq > a.leased_to)
  ),
  seen AS (SELECT lease_target AS target_id, max(seq) AS top FROM ahead GROUP BY lease_target),
  moved AS (
    UPDATE study_targets t SET leased_to = m.top
    FROM seen m JOIN leases l ON l.target_id = m.target_id
    WHERE t.id = m.target_id AND t.lease_id = l.lease_id
    RETURNING t.id
  ),
  retried AS (
    UPDATE study_log d SET status = 'sending', attempts = d.attempts + 1,
      lease_owner = h.lease_owner, lease_until = now() + interval '60 seconds'
    FROM held h CROSS JOIN LATERAL (
      SELECT r.seq FROM study_log r WHERE r.target_id = h.id AND r.status = 'retrying' AND r.next_attempt_at <= now()
      ORDER BY r.target_id, r.next_attempt_at, r.seq LIMIT $2
    ) r
    WHERE d.target_id = h.id AND d.seq = r.seq
    RETURNING d.seq, d.id, d.target_id
  )
  SELECT t.seq::text AS seq, t.id, t.target_id, false AS retry FROM taken t JOIN moved m ON m.id = t.target_id
  UNION ALL
  SELECT seq::text, id, target_id, true FROM retried`

/**
 * `log`, the settle of a batch ($1: the items, with their lease): the
 * batch's successes of log rows become one outcome row per target (their
 * seqs, codes and durations); the cursor moves over the run of rows
 * settled now or before (in this batch's or earlier outcome rows, or
 * written), up to the first row still out. A success above that gap is in
 * its outcome row, not written. What else happens (a retry, a retried
 * row's success) is written on its own, with an attempt row.
 */
const LOG_SETTLE = `
  WITH input AS (
    SELECT * FROM jsonb_to_recordset($1::jsonb) AS x(
      target_id uuid, lease_id uuid, seq bigint, id uuid, retry boolean, ok boolean, code int, duration int)
  ),
  targets AS (
    SELECT t.id, t.cursor, t.leased_to FROM study_targets t
    JOIN (SELECT DISTINCT target_id, lease_id FROM input) l ON l.target_id = t.id AND l.lease_id = t.lease_id
    ORDER BY t.id FOR UPDATE OF t
  ),
  held AS (SELECT i.* FROM input i JOIN targets t ON t.id = i.target_id),
  gap AS MATERIALIZED (
    SELECT t.id, t.leased_to, coalesce((
      SELECT min(d.seq) - 1 FROM study_log d
      WHERE d.target_id = t.id AND d.seq > t.cursor AND d.seq <= t.leased_to AND d.status = 'logged'
        AND d.seq NOT IN (SELECT h.seq FROM held h WHERE h.target_id = t.id AND h.ok AND NOT h.retry)
        AND d.seq NOT IN (
          SELECT unnest(o.seqs) FROM study_outcomes o WHERE o.target_id = t.id AND o.to_seq > t.cursor
        )
    ), t.leased_to) AS cursor
    FROM targets t
  ),
  passed AS (
    SELECT h.* FROM held h WHERE h.ok AND NOT h.retry
  ),
  written AS (
    UPDATE study_log d
    SET status = CASE WHEN h.ok THEN 'delivered' ELSE 'retrying' END,
        attempts = CASE WHEN h.retry THEN d.attempts ELSE d.attempts + 1 END,
        next_attempt_at = CASE WHEN h.ok THEN NULL ELSE now() END,
        finished_at = CASE WHEN h.ok THEN now() END, lease_owner = NULL, lease_until = NULL
    FROM held h
    WHERE d.target_id = h.target_id AND d.seq = h.seq AND (h.retry OR NOT h.ok)
      AND d.status IN ('logged', 'sending')
    RETURNING d.id, d.target_id, d.attempts, d.status, h.code, h.duration
  ),
  attempted AS (
    INSERT INTO study_attempts (delivery_id, attempt, status_code, duration_ms)
    SELECT id, attempts, code, duration FROM written
    RETURNING 1
  ),
  recorded AS (
    INSERT INTO study_outcomes (target_id, from_seq, to_seq, delivered, durations_ms, status_codes, seqs)
    SELECT target_id, min(seq), max(seq), count(*), array_agg(duration ORDER BY seq), array_agg(code ORDER BY seq),
           array_agg(seq ORDER BY seq)
    FROM passed GROUP BY target_id
    RETURNING target_id
  ),
  advanced AS (
    UPDATE study_targets t
    SET cursor = g.cursor,
        done = t.done + (SELECT count(*) FROM passed p WHERE p.target_id = t.id)
                      + (SELECT count(*) FROM written w WHERE w.target_id = t.id AND w.status = 'delivered'),
        lease_owner = CASE WHEN g.cursor = g.leased_to THEN NULL ELSE t.lease_owner END,
        lease_until = CASE WHEN g.cursor = g.leased_to THEN NULL ELSE t.lease_until END,
        consecutive_failures = 0, cooldown_until = NULL
    FROM gap g WHERE t.id = g.id
    RETURNING t.id
  )
  SELECT (SELECT count(*)::int FROM advanced) AS targets, (SELECT count(*)::int FROM recorded) AS outcomes,
         (SELECT count(*)::int FROM attempted) AS attempts`

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
    const [row] = yield* sql<
      { bytes: string }
    >`SELECT pg_wal_lsn_diff(pg_current_wal_insert_lsn(), ${from}::pg_lsn)::text AS bytes`
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
        const [row] = yield* Enqueue.enqueueFrom(
          sql as PgClient.PgClient,
          {
            with: sql.literal(DISPATCH_WITH),
            input: sql.literal(DISPATCH_INPUT),
            select: sql.literal(DISPATCH_SELECT)
          },
          "events",
          Schema.Struct({ n: Schema.Number, events: Schema.Number })
        )
        events = row?.events ?? 0
      } else {
        const [row] = yield* sql.unsafe<{ n: number; events: number }>(
          variant === "main" ? MAIN_DISPATCH : LEASE_DISPATCH
        )
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
  const ctx: Leases.LogContext = { sql, leases: makeLogLeases() }
  let statements = 0
  for (;;) {
    const claimed = yield* Leases.claim(ctx, "webhook", {
      limit: CLAIM,
      leaseFor: "60 seconds",
      perTarget: PER_ENDPOINT
    })
    statements++
    if (claimed.length === 0) return statements
    yield* Leases.settleMany(ctx, claimed.map((c) => ({ claimed: c, outcome: delivered, attempt })))
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

/** Shuffled in place, from a seeded generator (runs compare). */
const shuffle = seededShuffle()

/** `log`: wall time per statement kind (the take's includes the lease's), printed with the check. */
const logTimes = { lease: 0, take: 0, settle: 0 }

const drainProcessLog = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const owner = newId()
  let statements = 0
  let sends = 0
  let claims = 0
  for (;;) {
    const t0 = performance.now()
    const leases = yield* sql.unsafe<{ target_id: string; lease_id: string }>(LOG_LEASE, [
      Math.ceil(CLAIM / PER_ENDPOINT),
      owner
    ])
    logTimes.lease += performance.now() - t0
    statements++
    if (leases.length === 0) return statements
    const leaseOf = new Map(leases.map((l) => [l.target_id, l.lease_id]))
    const rows = yield* sql.unsafe<{ seq: string; id: string; target_id: string; retry: boolean }>(LOG_TAKE, [
      JSON.stringify(leases),
      PER_ENDPOINT
    ])
    logTimes.take += performance.now() - t0
    statements++
    const items = shuffle(rows.map((row) => {
      sends++
      return {
        target_id: row.target_id,
        lease_id: leaseOf.get(row.target_id),
        seq: row.seq,
        id: row.id,
        retry: row.retry,
        ok: sends % RETRY_EVERY !== 0,
        code: attempt.statusCode,
        duration: attempt.durationMs
      }
    }))
    // Sends finish out of order: two settle batches per claim, each a shuffled half.
    const half = Math.ceil(items.length / 2)
    if (explain && ++claims === 5) {
      const pgSql = sql as PgClient.PgClient
      for (
        const [name, text, params] of [
          ["take", LOG_TAKE, [JSON.stringify(leases), PER_ENDPOINT]],
          ["settle", LOG_SETTLE, [JSON.stringify(items.slice(0, half))]]
        ] as const
      ) {
        const plan = yield* pgSql.withTransaction(Effect.gen(function*() {
          const lines = yield* sql.unsafe<{ "QUERY PLAN": string }>(`EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) ${text}`, [
            ...params
          ])
          return yield* Effect.fail({ plan: lines.map((r) => r["QUERY PLAN"]).join("\n") })
        })).pipe(
          Effect.catch((e: unknown) =>
            typeof e === "object" && e !== null && "plan" in e
              ? Effect.succeed((e as { plan: string }).plan)
              : Effect.fail(e)
          )
        )
        console.log(`-- log ${name} plan, mid-drain:\n${plan}`)
      }
    }
    for (const batch of [items.slice(0, half), items.slice(half)]) {
      if (batch.length === 0) continue
      const t1 = performance.now()
      yield* sql.unsafe(LOG_SETTLE, [JSON.stringify(batch)])
      logTimes.settle += performance.now() - t1
      statements++
    }
  }
})

/** EXPLAIN ANALYZE of the variant's claim on the full backlog, rolled back. */
const explainClaim = (variant: Variant) =>
  Effect.gen(function*() {
    const sql = (yield* SqlClient.SqlClient) as PgClient.PgClient
    const [text, params] = variant === "lease"
      ? [LEASE_CLAIM, [Math.ceil(CLAIM / PER_ENDPOINT), newId(), PER_ENDPOINT]] as const
      : variant === "log"
      ? [LOG_LEASE, [Math.ceil(CLAIM / PER_ENDPOINT), newId()]] as const
      // The statement as Leases.claim sends it.
      : claimStatement(
        sql,
        "webhook",
        { limit: CLAIM, leaseFor: "60 seconds", perTarget: PER_ENDPOINT },
        newId(),
        newId()
      )
        .compile()
    const plan = yield* sql.withTransaction(Effect.gen(function*() {
      const rows = yield* sql.unsafe<{ "QUERY PLAN": string }>(`EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) ${text}`, params)
      return yield* Effect.fail({ plan: rows.map((r) => r["QUERY PLAN"]).join("\n") })
    })).pipe(Effect.catch((e: unknown) =>
      typeof e === "object" && e !== null && "plan" in e ? Effect.succeed((e as { plan: string }).plan) : Effect.fail(e)
    ))
    return plan
  })

/** `log`: after the drain every row is delivered, once: in one outcome row (and behind its cursor), or written delivered. */
const checkLog = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const [row] = yield* sql.unsafe<
    {
      rows: number
      passed: number
      outcomes: number
      distinct_outcomes: number
      written: number
      left: number
      behind: number
    }
  >(`
    SELECT (SELECT count(*)::int FROM study_log) AS rows,
           (SELECT count(*)::int FROM study_log d JOIN study_targets t ON t.id = d.target_id
            WHERE d.status = 'logged' AND d.seq <= t.cursor) AS passed,
           (SELECT coalesce(sum(delivered), 0)::int FROM study_outcomes) AS outcomes,
           (SELECT count(DISTINCT (target_id, s))::int FROM study_outcomes, unnest(seqs) AS s) AS distinct_outcomes,
           (SELECT count(*)::int FROM study_log WHERE status = 'delivered') AS written,
           (SELECT count(*)::int FROM study_log d JOIN study_targets t ON t.id = d.target_id
            WHERE d.status <> 'delivered' AND NOT (d.status = 'logged' AND d.seq <= t.cursor)) AS left,
           (SELECT count(*)::int FROM study_targets WHERE enqueued <> done) AS behind`)
  return row
})

const runOne = (db: Db, variant: Variant, backlog: number) =>
  Effect.promise(() => freshDatabase(db)).pipe(Effect.flatMap((fresh) =>
    Effect.gen(function*() {
      yield* migrate(variant)
      const deliveries = yield* seed(backlog)
      const enqueue = yield* measure(fresh.cpu, dispatchAll(variant))
      const plan = explain ? yield* explainClaim(variant) : undefined
      const drain = yield* measure(
        fresh.cpu,
        variant === "lease" ? drainLog : variant === "log" ? drainProcessLog : drainRows
      )
      const check = variant === "log" ? yield* checkLog : undefined
      return { db, variant, backlog, deliveries, enqueue, drain, plan, check }
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
          if (r.check !== undefined) {
            console.log(
              `   log check: ${JSON.stringify(r.check)}; wall ms ${
                JSON.stringify(logTimes, (_, v) => typeof v === "number" ? Math.round(v) : v)
              }`
            )
            logTimes.lease = logTimes.take = logTimes.settle = 0
          }
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
