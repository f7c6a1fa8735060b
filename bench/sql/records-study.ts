/**
 * What reading delivery records costs as outcome rows accumulate: the API's
 * list of an endpoint's latest 50 deliveries (`Listing.list`) and one
 * delivery's attempts (`Listing.attempts`), through `delivery_records` and
 * `delivery_attempt_records` as migration 0670 defined them (`before`), as
 * 0676 defines them (`after`), and a variant that walks an index on
 * `(target_id, from_seq)` backwards (`backward`, this study's only).
 *
 *   STUDY_DATABASE_URL=postgres://postgres@127.0.0.1:5432/test \
 *     npx node bench/sql/records-study.ts --db postgres,pglite --outcomes 36000,100000
 *   ... --seqs 14 --runs 7 --explain     # EXPLAIN (ANALYZE, BUFFERS) of each statement
 *   SVC_DB_STATEMENT_TIMEOUT=600s npx node bench/sql/records-study.ts --db pglite --skip idle:before,idle:views
 *                                        # PGlite: the seeding's long statements; the lists that build the whole history left out
 *
 * Each size: a fresh database with every migration (the views of each
 * variant set over them), one endpoint with
 * `--outcomes` outcome rows of `--seqs` delivered logged rows each (inserted
 * by SQL; batches in pairs whose seqs interleave, as out-of-order settles
 * leave them), the cursor past them. Measured in three states: `idle`
 * (every row delivered; statistics as a fresh database has them, none),
 * `idle+analyze` (the same after ANALYZE) and `backlog` (200 logged rows
 * more above the cursor, under a live lease, 14 of them near the top
 * settled above the gap; inserted after the ANALYZE). Per statement the
 * median of `--runs` runs (ms, wall time of the statement on one
 * connection) after one run to warm; a statement running past `--timeout`
 * (30 s) is reported as `Infinity`.
 */
import * as NodeServices from "@effect/platform-node/NodeServices"
import { PgClient, PgMigrator } from "@effect/sql-pg"
import { Effect, Redacted } from "effect"
import { Migrator, SqlClient } from "effect/sql"
import { loadavg } from "node:os"
import { performance } from "node:perf_hooks"
import pg from "pg"
import { Database } from "../../src/database/Database.ts"
import { migrationRecord } from "../../src/database/migrations/index.ts"
import { listStatement } from "../../src/deliveries/records/Listing.ts"
import { COLUMNS } from "../../src/deliveries/Types.ts"
import { newId } from "../../src/platform/Ids.ts"
import { withClient } from "../support/db.ts"

type Db = "postgres" | "pglite"

const args = process.argv.slice(2)
const arg = (name: string, fallback: string) => {
  const i = args.indexOf(`--${name}`)
  return i >= 0 && args[i + 1] !== undefined ? args[i + 1]! : fallback
}
const dbs = arg("db", process.env.STUDY_DATABASE_URL ? "postgres,pglite" : "pglite").split(",") as Array<Db>
const sizes = arg("outcomes", "36000,100000").split(",").map(Number)
const SEQS = Number(arg("seqs", "14"))
const RUNS = Number(arg("runs", "7"))
const explain = args.includes("--explain")
/** `state:variant` pairs to leave out, e.g. `idle:before,idle:views` (on PGlite, which ignores `statement_timeout`). */
const skip = new Set(arg("skip", "").split(",").filter((s) => s !== ""))
const BACKLOG = 200
/** A statement running longer is reported as `Infinity` (and not repeated). */
const TIMEOUT_S = Number(arg("timeout", "30"))

// --- databases ---------------------------------------------------------------

const withAdmin = <A>(f: (client: pg.Client) => Promise<A>) => withClient(process.env.STUDY_DATABASE_URL, f)

let counter = 0
const freshDatabase = async (db: Db) => {
  if (db === "pglite") return { layer: Database.memory, drop: async () => {} }
  const name = `records_study_${process.pid}_${counter++}`
  await withAdmin(async (admin) => void (await admin.query(`CREATE DATABASE ${name}`)))
  const url = new URL(process.env.STUDY_DATABASE_URL!)
  url.pathname = `/${name}`
  return {
    layer: Database.server(Redacted.make(url.toString()), 1),
    drop: () => withAdmin(async (admin) => void (await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`)))
  }
}

const migrate = PgMigrator.run({ loader: Migrator.fromRecord(migrationRecord), table: "svc_migrations" }).pipe(
  Effect.provide(NodeServices.layer),
  Effect.orDie
)

/** `delivery_records` with `probe` finding a logged row's outcome row `x` (0670's text otherwise). */
const recordsView = (probe: string) =>
  `CREATE OR REPLACE VIEW delivery_records AS
   SELECT d.id, d.seq, d.org_id, d.kind, d.target_id,
     CASE WHEN d.status <> 'logged' THEN d.status
          WHEN o.at IS NOT NULL THEN 'delivered'
          WHEN t.lease_id IS NOT NULL AND t.lease_until > now() AND d.seq > t.cursor AND d.seq <= t.leased_to THEN 'sending'
          ELSE 'queued' END AS status,
     d.label, d.event_id, d.payload, d.meta,
     CASE WHEN d.status <> 'logged' THEN d.attempts
          WHEN o.at IS NOT NULL OR (t.lease_id IS NOT NULL AND t.lease_until > now() AND d.seq > t.cursor AND d.seq <= t.leased_to) THEN 1
          ELSE 0 END AS attempts,
     d.replays, d.last_error, d.next_attempt_at, d.created_at,
     CASE WHEN d.status <> 'logged' THEN d.finished_at ELSE o.at END AS finished_at
   FROM deliveries d
   LEFT JOIN delivery_targets t ON d.status = 'logged' AND t.id = d.target_id
   LEFT JOIN LATERAL (SELECT x.at FROM delivery_outcomes x WHERE d.status = 'logged' AND ${probe}) o ON true`

/** 0670's views (a copy): the outcome row found by a range join, without an order. */
const BEFORE = [
  recordsView(
    "x.target_id = d.target_id AND x.to_seq >= d.seq AND x.from_seq <= d.seq AND d.seq = ANY (x.seqs) LIMIT 1"
  ),
  `CREATE OR REPLACE VIEW delivery_attempt_records AS
   SELECT delivery_id, attempt, at, status_code, error, response_snippet, duration_ms FROM delivery_attempts
   UNION ALL
   SELECT d.id, 1, x.at, x.status_codes[p.i], NULL, NULL, x.durations_ms[p.i]
   FROM deliveries d
   JOIN delivery_outcomes x ON x.target_id = d.target_id AND x.to_seq >= d.seq AND x.from_seq <= d.seq
   CROSS JOIN LATERAL (SELECT array_position(x.seqs, d.seq) AS i) p
   WHERE d.status = 'logged' AND p.i IS NOT NULL`
]

/** The `backward` variant: the outcome rows starting at or below the row's seq, read downwards by `(target_id, from_seq)`. */
const BACKWARD_PROBE = `(x.target_id, x.from_seq) <= (d.target_id, d.seq)
  AND (x.target_id, x.from_seq) >= (d.target_id, -9223372036854775808) AND x.to_seq >= d.seq AND d.seq = ANY (x.seqs)
  ORDER BY x.target_id DESC, x.from_seq DESC LIMIT 1`
const BACKWARD = [
  recordsView(BACKWARD_PROBE),
  `CREATE OR REPLACE VIEW delivery_attempt_records AS
   SELECT delivery_id, attempt, at, status_code, error, response_snippet, duration_ms FROM delivery_attempts
   UNION ALL
   SELECT d.id, 1, o.at, o.status_codes[o.i], NULL, NULL, o.durations_ms[o.i]
   FROM deliveries d
   CROSS JOIN LATERAL (
     SELECT x.at, x.status_codes, x.durations_ms, array_position(x.seqs, d.seq) AS i FROM delivery_outcomes x
     WHERE ${BACKWARD_PROBE}
   ) o
   WHERE d.status = 'logged'`
]

/** The views as the database holds them after every migration (0676's). */
const currentViews = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const rows = yield* sql<{ name: string; def: string }>`
    SELECT c.relname AS name, pg_get_viewdef(c.oid) AS def FROM pg_class c
    WHERE c.relname IN ('delivery_records', 'delivery_attempt_records') ORDER BY c.relname DESC
  `
  return rows.map((row) => `CREATE OR REPLACE VIEW ${row.name} AS ${row.def}`)
}).pipe(Effect.orDie)

/**
 * `before`: 0670's views, the list as it was; `views`: 0676's views, the
 * list as it was; `after`: 0676's views and `Listing.listStatement`;
 * `backward`: the backward probe and `Listing.listStatement`.
 */
type Variant = "before" | "views" | "after" | "backward"

const useViews = (variant: Variant, after: ReadonlyArray<string>) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    yield* sql`DROP INDEX IF EXISTS delivery_outcomes_from_idx`
    if (variant === "backward") {
      yield* sql`CREATE INDEX delivery_outcomes_from_idx ON delivery_outcomes (target_id, from_seq)`
    }
    const texts = variant === "before" ? BEFORE : variant === "backward" ? BACKWARD : after
    for (const text of texts) yield* sql.unsafe(text)
  }).pipe(Effect.orDie)

// --- data ----------------------------------------------------------------------

interface Seeded {
  readonly org: string
  readonly target: string
  /** A delivered row halfway through the history, and the newest delivered. */
  readonly middle: string
  readonly newest: string
}

const seed = (outcomes: number) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const org = newId()
    const target = newId()
    yield* sql`INSERT INTO orgs (id, name) VALUES (${org}, 'study')`
    yield* sql`INSERT INTO delivery_targets (id, org_id, kind) VALUES (${target}, ${org}, 'webhook')`
    const rows = outcomes * SEQS
    yield* sql`
      INSERT INTO deliveries (id, org_id, kind, target_id, status, label, created_at)
      SELECT gen_random_uuid(), ${org}, 'webhook', ${target}, 'logged', 'approval.requested x',
             now() - make_interval(secs => ${rows} - i)
      FROM generate_series(1, ${rows}) AS i
    `
    // Batches in pairs over 2 × SEQS rows: one takes the even places, the
    // other the odd, so their ranges overlap (as out-of-order settles leave them).
    yield* sql`
      INSERT INTO delivery_outcomes (target_id, to_seq, from_seq, org_id, at, seqs, status_codes, durations_ms)
      SELECT ${target}, max(seq), min(seq), ${org}, max(created_at), array_agg(seq ORDER BY seq),
             array_agg(200 + (seq % 5)::int ORDER BY seq), array_agg((seq % 97)::int ORDER BY seq)
      FROM (SELECT seq, created_at, row_number() OVER (ORDER BY seq) - 1 AS r FROM deliveries WHERE target_id = ${target}) s
      GROUP BY (r / ${2 * SEQS}) * 2 + r % 2
    `
    yield* sql`
      UPDATE delivery_targets SET cursor = m.seq, leased_to = m.seq, log_pending = 0, undelivered = 0
      FROM (SELECT max(seq) AS seq FROM deliveries WHERE target_id = ${target}) m WHERE id = ${target}
    `
    const [picked] = yield* sql<{ middle: string; newest: string }>`
      SELECT (SELECT id FROM deliveries WHERE target_id = ${target} ORDER BY seq OFFSET ${
      Math.floor(rows / 2)
    } LIMIT 1) AS middle,
             (SELECT id FROM deliveries WHERE target_id = ${target} ORDER BY seq DESC LIMIT 1) AS newest
    `
    return { org, target, middle: picked!.middle, newest: picked!.newest } satisfies Seeded
  }).pipe(Effect.orDie)

/** 200 logged rows above the cursor under a live lease, 14 of them near the top settled above the gap. Answers the newest. */
const addBacklog = (seeded: Seeded) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    yield* sql`
      INSERT INTO deliveries (id, org_id, kind, target_id, status, label)
      SELECT gen_random_uuid(), ${seeded.org}, 'webhook', ${seeded.target}, 'logged', 'approval.requested x'
      FROM generate_series(1, ${BACKLOG})
    `
    yield* sql`
      INSERT INTO delivery_outcomes (target_id, to_seq, from_seq, org_id, seqs, status_codes, durations_ms)
      SELECT ${seeded.target}, max(seq), min(seq), ${seeded.org}, array_agg(seq ORDER BY seq),
             array_agg(204 ORDER BY seq), array_agg(3 ORDER BY seq)
      FROM (SELECT seq FROM deliveries WHERE target_id = ${seeded.target} ORDER BY seq DESC OFFSET 6 LIMIT 14) s
    `
    yield* sql`
      UPDATE delivery_targets SET lease_owner = gen_random_uuid(), lease_id = gen_random_uuid(),
        lease_until = now() + interval '1 hour', leased_to = m.seq, log_pending = ${BACKLOG - 14}, log_in_flight = 64
      FROM (SELECT max(seq) AS seq FROM deliveries WHERE target_id = ${seeded.target}) m WHERE id = ${seeded.target}
    `
    const [row] = yield* sql<{ id: string }>`
      SELECT id FROM deliveries WHERE target_id = ${seeded.target} ORDER BY seq DESC OFFSET 30 LIMIT 1
    `
    return row!.id
  }).pipe(Effect.orDie)

// --- statements ------------------------------------------------------------------

/** The list as `Listing.list` ran it before 0676 (a copy); the new one is `Listing.listStatement`. */
const listBefore = (sql: PgClient.PgClient, seeded: Seeded) =>
  sql`
    SELECT ${sql.literal(COLUMNS)} FROM delivery_records
    WHERE target_id = ${seeded.target} AND org_id = ${seeded.org} AND kind = ${"webhook"}
    ORDER BY seq DESC LIMIT ${50}
  `
/** `Listing.attempts`' statement. */
const attemptsStatement = (sql: PgClient.PgClient, deliveryId: string) =>
  sql`
    SELECT attempt, at, status_code, error, response_snippet, duration_ms FROM delivery_attempt_records
    WHERE delivery_id = ${deliveryId} ORDER BY attempt
  `

const timed = (label: string, statement: { readonly compile: () => readonly [string, ReadonlyArray<unknown>] }) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const [text, params] = statement.compile()
    const run = sql.unsafe<Record<string, unknown>>(text, params as Array<unknown>)
    // A plan that builds every row's record of a large history is cut short.
    const answer = yield* run.pipe(Effect.option)
    if (answer._tag === "None") return { ms: Number.POSITIVE_INFINITY, rows: 0, answer: [] }
    const times: Array<number> = []
    for (let i = 0; i < RUNS; i++) {
      const start = performance.now()
      yield* run
      times.push(performance.now() - start)
    }
    times.sort((a, b) => a - b)
    if (explain) {
      const plan = yield* sql.unsafe<{ "QUERY PLAN": string }>(
        `EXPLAIN (ANALYZE, BUFFERS) ${text}`,
        params as Array<unknown>
      )
      console.log(`--- ${label}\n${plan.map((row) => row["QUERY PLAN"]).join("\n")}`)
    }
    return { ms: times[Math.floor(times.length / 2)]!, rows: answer.value.length, answer: answer.value }
  }).pipe(Effect.orDie)

const measure = (variant: Variant, seeded: Seeded, queued: string | undefined, label: string) =>
  Effect.gen(function*() {
    const sql = yield* PgClient.PgClient
    const list = yield* timed(
      `${label}: list`,
      variant === "before" || variant === "views"
        ? listBefore(sql, seeded)
        : listStatement(sql, { orgId: seeded.org, kind: "webhook", targetId: seeded.target })
    )
    const middle = yield* timed(`${label}: attempts, a delivery halfway`, attemptsStatement(sql, seeded.middle))
    const newest = yield* timed(`${label}: attempts, the newest delivered`, attemptsStatement(sql, seeded.newest))
    const pending = queued === undefined
      ? undefined
      : yield* timed(`${label}: attempts, a queued delivery`, attemptsStatement(sql, queued))
    const statuses: Record<string, number> = {}
    for (const row of list.answer) statuses[String(row.status)] = (statuses[String(row.status)] ?? 0) + 1
    return {
      list,
      middle,
      newest,
      pending,
      statuses,
      check: JSON.stringify(
        [list.answer, middle.answer, newest.answer, pending?.answer],
        (_, v) => typeof v === "bigint" ? v.toString() : v
      )
    }
  })

const run = (db: Db, outcomes: number) =>
  Effect.gen(function*() {
    const fresh = yield* Effect.promise(() => freshDatabase(db))
    yield* Effect.gen(function*() {
      yield* migrate
      const after = yield* currentViews
      const started = performance.now()
      const seeded = yield* seed(outcomes)
      const seedMs = performance.now() - started
      const sql = yield* SqlClient.SqlClient
      const [count] = yield* sql<{ outcomes: number; rows: number }>`
        SELECT (SELECT count(*)::int FROM delivery_outcomes) AS outcomes, (SELECT count(*)::int FROM deliveries) AS rows
      `.pipe(Effect.orDie)
      console.log(
        `${db}: ${count!.outcomes} outcome rows, ${count!.rows} deliveries (seeded in ${(seedMs / 1000).toFixed(1)} s)`
      )
      yield* sql.unsafe(`SET statement_timeout = '${TIMEOUT_S}s'`).pipe(Effect.orDie)
      let queued: string | undefined
      for (const state of ["idle", "idle+analyze", "backlog"] as const) {
        if (state === "idle+analyze") yield* sql`ANALYZE`.pipe(Effect.orDie)
        if (state === "backlog") queued = yield* addBacklog(seeded)
        const checks = new Set<string>()
        for (const variant of ["before", "views", "after", "backward"] as const) {
          if (skip.has(`${state}:${variant}`)) continue
          yield* useViews(variant, after)
          const m = yield* measure(variant, seeded, queued, `${db} ${outcomes} ${state} ${variant}`)
          // A statement cut short answers nothing to compare.
          if (m.list.ms !== Number.POSITIVE_INFINITY) checks.add(m.check)
          console.log(
            `${db.padEnd(8)} ${String(outcomes).padStart(7)} ${state.padEnd(12)} ${variant.padEnd(8)} | list ${
              m.list.ms.toFixed(2).padStart(8)
            } ms ` +
              `(${m.list.rows} rows ${JSON.stringify(m.statuses)}) | attempts: halfway ${
                m.middle.ms.toFixed(2).padStart(7)
              } ms, ` +
              `newest ${m.newest.ms.toFixed(2).padStart(7)} ms${
                m.pending === undefined ? "" : `, queued ${m.pending.ms.toFixed(2).padStart(7)} ms`
              }`
          )
        }
        if (checks.size !== 1) console.log(`  ! the variants answer differently (${state})`)
      }
    }).pipe(Effect.provide(fresh.layer))
    yield* Effect.promise(() => fresh.drop())
  })

const main = Effect.gen(function*() {
  console.log(
    `records study: outcome rows of ${SEQS} seqs, ${RUNS} runs each; load ${
      loadavg().map((l) => l.toFixed(2)).join(" ")
    }`
  )
  console.log("db       outcomes state   variant")
  for (const db of dbs) {
    for (const outcomes of sizes) yield* run(db, outcomes)
  }
})

Effect.runPromise(main).then(
  () => process.exit(0),
  (error) => {
    console.error(error)
    process.exit(1)
  }
)
