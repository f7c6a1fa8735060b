/**
 * The log's statements as svc's webhook drain runs them, one endpoint (or a
 * few) at a time, with the database's CPU per statement kind: what the
 * queue study (`queue-study.ts`, claims of 256 settled whole) does not show
 * about the drain of the `webhooks` benchmark, where a settle batch holds
 * what one endpoint finished while the last batch was written (about 14),
 * and the rows of a lease stay in flight from one take to the next.
 *
 *   STUDY_DATABASE_URL=postgres://postgres@127.0.0.1:5432/test \
 *     npx node bench/sql/drain-study.ts --deliveries 20000 --settle 14,64 --rounds 2
 *   ... --db pglite                      # the embedded database (this process's CPU)
 *   ... --endpoints 16 --claim 256       # the queue study's shape
 *   ... --explain                        # the take's and the settle's plans mid-drain
 *   ... --dispatch cursor,mark           # the dispatcher moving its cursor (migration 0720), or marking each event
 *
 * Each run: a fresh database with every migration, `--endpoints` endpoints
 * of one organization subscribed to the events, events for `--deliveries`
 * deliveries fanned out by the dispatcher's own statement (`Dispatcher.ts`,
 * 200 events each), then drained by this checkout's `Leases.claim` (the
 * log's lease and take, and the per-row claim) with `--claim` rows at most
 * per take and `--per-target` per endpoint, each take's rows settled as
 * delivered by `Leases.settleMany` in batches of `--settle`, in shuffled
 * order, keeping `--keep` rows in flight across takes as a busy worker
 * does. CPU per delivery of the one server backend (its `schedstat`,
 * nanoseconds, read around each statement) or, on PGlite, of this process.
 */
import * as NodeServices from "@effect/platform-node/NodeServices"
import { PgClient, PgMigrator } from "@effect/sql-pg"
import { Effect, Layer, Redacted } from "effect"
import { Migrator, SqlClient } from "effect/sql"
import { readFileSync } from "node:fs"
import { loadavg } from "node:os"
import pg from "pg"
import { Database } from "../../src/database/Database.ts"
import { migrationRecord } from "../../src/database/migrations/index.ts"
import * as Leases from "../../src/deliveries/Leases.ts"
import { makeLogLeases } from "../../src/deliveries/log/HeldLeases.ts"
import { leaseAndTake, take } from "../../src/deliveries/log/Log.ts"
import { claimStatement } from "../../src/deliveries/rows/Statements.ts"
import { type Claimed, type ClaimOptions, Outcome } from "../../src/deliveries/Types.ts"
import { newId } from "../../src/platform/Ids.ts"
import { withClient } from "../support/db.ts"
import { seededShuffle } from "../support/shuffle.ts"

const args = process.argv.slice(2)
const arg = (name: string, fallback: string) => {
  const i = args.indexOf(`--${name}`)
  return i >= 0 && args[i + 1] !== undefined ? args[i + 1]! : fallback
}
const numbers = (name: string, fallback: string) => arg(name, fallback).split(",").map(Number)
const dbs = arg("db", process.env.STUDY_DATABASE_URL ? "postgres" : "pglite").split(",") as Array<"postgres" | "pglite">
const deliveries = Number(arg("deliveries", "20000"))
const endpoints = Number(arg("endpoints", "1"))
const claims = numbers("claim", "64")
const perTarget = Number(arg("per-target", "256"))
const settles = numbers("settle", "14")
const keep = Number(arg("keep", "32"))
const rounds = Number(arg("rounds", "1"))
const explain = args.includes("--explain")
const dispatches = arg("dispatch", "cursor").split(",") as Array<"cursor" | "mark">

// --- databases ---------------------------------------------------------------

const withAdmin = <A>(f: (client: pg.Client) => Promise<A>) => withClient(process.env.STUDY_DATABASE_URL, f)

/** CPU of a thread or process in µs, from its schedstat (nanoseconds of run time). */
const schedMicros = (pid: number) => Number(readFileSync(`/proc/${pid}/schedstat`, "utf8").split(" ")[0]) / 1000
const selfMicros = () => {
  const usage = process.cpuUsage()
  return usage.user + usage.system
}

let counter = 0
const freshDatabase = async (db: "postgres" | "pglite") => {
  if (db === "pglite") return { layer: Database.memory, drop: async () => {} }
  const name = `drain_study_${process.pid}_${counter++}`
  await withAdmin(async (admin) => {
    await admin.query(`CREATE DATABASE ${name}`)
    // e.g. `session_preload_libraries=auto_explain;auto_explain.log_min_duration=1;auto_explain.log_analyze=on`:
    // the plans each statement actually ran with, in the server's log.
    for (const setting of (process.env.STUDY_DB_SETTINGS ?? "").split(";").filter((s) => s !== "")) {
      const [key, value] = setting.split("=")
      await admin.query(`ALTER DATABASE ${name} SET ${key} = '${value}'`)
    }
  })
  const url = new URL(process.env.STUDY_DATABASE_URL!)
  url.pathname = `/${name}`
  return {
    // One connection: one backend runs every statement, so its CPU is the drain's.
    layer: Database.server(Redacted.make(url.toString()), 1),
    drop: () => withAdmin(async (admin) => void (await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`)))
  }
}

// --- seeding and fan-out -----------------------------------------------------------

const setUp = (mark: boolean) =>
  Effect.gen(function*() {
    yield* PgMigrator.run({ loader: Migrator.fromRecord(migrationRecord), table: "svc_migrations" }).pipe(
      Effect.provide(NodeServices.layer)
    )
    const sql = yield* SqlClient.SqlClient
    const org = newId()
    yield* sql`INSERT INTO orgs (id, name) VALUES (${org}, 'study')`
    const ids = Array.from({ length: endpoints }, () => newId())
    yield* sql`
    INSERT INTO notification_endpoints (id, org_id, url, url_hint, events, created_by)
    SELECT id, ${org}, 'https://receiver.test/hook', 'receiver.test', '["approval.requested"]'::jsonb, 'study'
    FROM unnest(${ids}::uuid[]) AS id
  `
    const events = Math.ceil(deliveries / endpoints)
    const body = JSON.stringify({ type: "approval.requested", approval: { approval_id: newId(), status: "pending" } })
    yield* sql`
    INSERT INTO events (id, org_id, type, occurred_at, body, label, dispatched_at)
    SELECT gen_random_uuid(), ${org}, 'approval.requested', now(), ${body}, 'approval.requested x',
           CASE WHEN ${mark} THEN NULL ELSE now() END
    FROM generate_series(1, ${events})
  `
    return events * endpoints
  })

/**
 * The dispatcher's statement, 200 events at a time, until none is left:
 * `cursor` as svc's (`Dispatcher.ts`), `mark` as before migration 0720 (each
 * event row marked dispatched; its events are written unmarked).
 */
const DISPATCH_CURSOR = `
  WITH lock AS (SELECT pg_try_advisory_xact_lock(7300001) AS locked),
  cur AS MATERIALIZED (SELECT writer, seq FROM event_dispatch WHERE (SELECT locked FROM lock) FOR UPDATE),
  ev AS MATERIALIZED (
    SELECT seq, id, org_id, type, body, label, writer FROM events
    WHERE (writer, seq) > ((SELECT writer FROM cur), (SELECT seq FROM cur))
      AND writer < pg_snapshot_xmin(pg_current_snapshot())
    ORDER BY writer, seq LIMIT 200
  ),
  marked AS (
    UPDATE event_dispatch c SET writer = l.writer, seq = l.seq
    FROM (SELECT writer, seq FROM ev ORDER BY writer DESC, seq DESC LIMIT 1) l RETURNING c.seq
  ),`
const DISPATCH_MARK = `
  WITH lock AS (SELECT pg_try_advisory_xact_lock(7300001) AS locked),
  ev AS MATERIALIZED (
    SELECT seq, id, org_id, type, body, label FROM events
    WHERE (CASE WHEN dispatched_at IS NULL THEN seq END) > 0 AND (SELECT locked FROM lock)
    ORDER BY (CASE WHEN dispatched_at IS NULL THEN seq END) LIMIT 200 FOR UPDATE SKIP LOCKED
  ),
  marked AS (UPDATE events e SET dispatched_at = now() FROM ev WHERE e.seq = ev.seq RETURNING e.seq),`
const DISPATCH_FAN = `
  fan AS (
    SELECT ev.seq AS event_seq, ep.seq AS ep_seq, ev.org_id, 'webhook'::text AS kind, ep.id AS target_id,
           ev.id AS event_id, ev.type, ev.label
    FROM ev JOIN notification_endpoints ep ON ep.org_id = ev.org_id AND ep.active AND ep.events @> to_jsonb(ev.type)
  ),
  input AS (
    SELECT row_number() OVER (ORDER BY event_seq, ep_seq) AS ord, org_id, kind, target_id, coalesce(label, type) AS label,
           event_id, NULL::text AS payload, '{}'::jsonb AS meta, 1000000 AS capacity FROM fan
  ),
  waiting AS (
    SELECT t.target_id, t.org_id, t.kind, coalesce(c.undelivered, 0) AS n, NOT coalesce(c.strict, false) AS logged
    FROM (SELECT target_id, (array_agg(org_id))[1] AS org_id, (array_agg(kind))[1] AS kind FROM input GROUP BY target_id) t
    LEFT JOIN delivery_targets c ON c.id = t.target_id
  ),
  ranked AS (
    SELECT i.*, w.logged, w.n + row_number() OVER (PARTITION BY i.target_id ORDER BY i.ord) AS position
    FROM input i JOIN waiting w ON w.target_id = i.target_id
  ),
  counted AS (
    INSERT INTO delivery_targets AS t (id, org_id, kind, undelivered, log_pending)
    SELECT target_id, (array_agg(org_id))[1], (array_agg(kind))[1], count(*)::int, (count(*) FILTER (WHERE logged))::int
    FROM ranked GROUP BY target_id ORDER BY target_id
    ON CONFLICT (id) DO UPDATE SET undelivered = t.undelivered + EXCLUDED.undelivered,
      log_pending = t.log_pending + EXCLUDED.log_pending
    RETURNING t.id
  ),
  inserted AS (
    INSERT INTO deliveries (id, org_id, kind, target_id, status, label, event_id, payload, meta)
    SELECT gen_random_uuid(), org_id, kind, target_id, CASE WHEN logged THEN 'logged' ELSE 'queued' END, label, event_id,
           payload, meta
    FROM ranked WHERE (SELECT count(*) FROM counted) >= 0 ORDER BY ord
    RETURNING kind
  )
  SELECT (SELECT count(*)::int FROM ev) AS events`

// --- the drain ---------------------------------------------------------------------

/** Shuffled in place, from a seeded generator (runs compare). */
const shuffle = seededShuffle()

const delivered = Outcome.delivered()
const attempt = { statusCode: 204, durationMs: 2 }

interface Spent {
  dispatch: number
  claim: number
  rowClaim: number
  settle: number
  claims: number
  settles: number
  rows: number
}

const run = (db: "postgres" | "pglite", claim: number, settle: number, dispatch: "cursor" | "mark") =>
  Effect.promise(() => freshDatabase(db)).pipe(Effect.flatMap((fresh) =>
    Effect.gen(function*() {
      const total = yield* setUp(dispatch === "mark")
      const DISPATCH = (dispatch === "mark" ? DISPATCH_MARK : DISPATCH_CURSOR) + DISPATCH_FAN
      const sql = (yield* SqlClient.SqlClient) as PgClient.PgClient
      const [{ pid }] = yield* sql<{ pid: number }>`SELECT pg_backend_pid() AS pid`
      const cpu = db === "postgres" ? () => schedMicros(pid) : selfMicros
      const spent: Spent = { dispatch: 0, claim: 0, rowClaim: 0, settle: 0, claims: 0, settles: 0, rows: 0 }
      const timed = <A, E, R>(key: "dispatch" | "claim" | "rowClaim" | "settle", effect: Effect.Effect<A, E, R>) =>
        Effect.gen(function*() {
          const before = cpu()
          const result = yield* effect
          spent[key] += cpu() - before
          return result
        })
      for (let n = 0;; n++) {
        if (explain && n === 3) yield* explained("dispatch", sql, DISPATCH, [])
        const [row] = yield* timed("dispatch", sql.unsafe<{ events: number }>(DISPATCH))
        if ((row?.events ?? 0) > 0) continue
        // None taken: done, unless the cursor's events wait for another session's transaction (xids are the cluster's).
        const [left] = yield* sql.unsafe<{ n: number }>(
          dispatch === "mark"
            ? "SELECT count(*)::int AS n FROM events WHERE dispatched_at IS NULL"
            : "SELECT count(*)::int AS n FROM undispatched_events"
        )
        if ((left?.n ?? 0) === 0) break
        yield* Effect.sleep("20 millis")
      }
      const ctx: Leases.LogContext = { sql, leases: makeLogLeases() }
      const inFlight: Array<Claimed> = []
      let takeExplained = false
      const settleSome = (items: Array<Claimed>) =>
        timed("settle", Leases.settleMany(ctx, items.map((c) => ({ claimed: c, outcome: delivered, attempt })))).pipe(
          Effect.tap(() => Effect.sync(() => spent.settles++))
        )
      for (;;) {
        // `Leases.claim`, its two statements timed apart: the log's lease and take, then the per-row claim.
        const options: ClaimOptions = { limit: claim, leaseFor: "60 seconds", perTarget, perFailingTarget: 1 }
        const taken = yield* timed("claim", take(sql, ctx.leases, "webhook", options))
        if (claim - taken.length > 0) {
          yield* timed(
            "rowClaim",
            claimStatement(sql, "webhook", { ...options, limit: claim - taken.length }, newId(), ctx.leases.owner())
          )
        }
        spent.claims++
        spent.rows += taken.length
        if (taken.length === 0 && inFlight.length === 0) break
        inFlight.push(...shuffle([...taken]))
        if (explain && !takeExplained && spent.claims === 20) {
          takeExplained = true
          yield* explainMidDrain(sql, ctx, claim)
        }
        // What finished is settled a batch at a time; a few stay in flight across the next take.
        while (inFlight.length > (taken.length === 0 ? 0 : keep)) yield* settleSome(inFlight.splice(0, settle))
      }
      const [check] = yield* sql<{ left: number; outcomes: number }>`
        SELECT (SELECT count(*)::int FROM deliveries d JOIN delivery_targets t ON t.id = d.target_id
                WHERE d.status = 'logged' AND d.seq > t.cursor) AS left,
               (SELECT coalesce(sum(cardinality(seqs)), 0)::int FROM delivery_outcomes) AS outcomes`
      return { total, spent, check: check! }
    }).pipe(
      Effect.provide(fresh.layer as Layer.Layer<PgClient.PgClient | SqlClient.SqlClient>),
      Effect.ensuring(Effect.promise(() => fresh.drop()))
    )
  ))

/** Prints EXPLAIN ANALYZE of a statement, rolled back. */
const explained = (what: string, sql: PgClient.PgClient, text: string, params: ReadonlyArray<unknown>) =>
  Effect.gen(function*() {
    const plan = yield* sql.withTransaction(Effect.gen(function*() {
      const rows = yield* sql.unsafe<{ "QUERY PLAN": string }>(`EXPLAIN (ANALYZE, BUFFERS) ${text}`, [...params])
      return yield* Effect.fail({ plan: rows.map((r) => r["QUERY PLAN"]).join("\n") })
    })).pipe(
      Effect.catch((e: unknown) =>
        typeof e === "object" && e !== null && "plan" in e
          ? Effect.succeed((e as { plan: string }).plan)
          : Effect.fail(e)
      )
    )
    console.log(`-- ${what}:\n${plan}`)
  }).pipe(Effect.orDie)

/** The next take (the lease and its rows, in one statement), explained. */
const explainMidDrain = (sql: PgClient.PgClient, ctx: Leases.LogContext, claim: number) => {
  const [text, params] = leaseAndTake(sql, "webhook", {
    limit: claim,
    leaseFor: "60 seconds",
    perTarget,
    perFailingTarget: 1
  }, ctx.leases.owner())
    .compile()
  return explained("take, mid-drain", sql, text, params)
}

const main = Effect.gen(function*() {
  console.log(
    `drain study: ${deliveries} deliveries to ${endpoints} endpoint(s), takes of ${
      claims.join("/")
    } (${perTarget} per endpoint), ` +
      `settles of ${settles.join("/")}, ${keep} kept in flight; load ${loadavg().map((l) => l.toFixed(2)).join(" ")}`
  )
  console.log(
    "db       dispatch take  settle | dispatch µs/d | take µs/d (µs each) | row claim µs/d (µs each) | settle µs/d (µs each, rows each) | drain µs/d | check"
  )
  for (const db of dbs) {
    for (let round = 0; round < rounds; round++) {
      const pairs = claims.flatMap((c) => settles.flatMap((s) => dispatches.map((d) => [c, s, d] as const)))
      for (const [claim, settle, dispatch] of round % 2 === 0 ? pairs : [...pairs].reverse()) {
        const { check, spent, total } = yield* run(db, claim, settle, dispatch)
        const per = (micros: number) => (micros / total).toFixed(1).padStart(6)
        console.log(
          `${db.padEnd(9)}${dispatch.padEnd(7)} ${String(claim).padStart(4)} ${String(settle).padStart(7)} | ${
            per(spent.dispatch).padStart(13)
          } | ` +
            `${per(spent.claim)} (${Math.round(spent.claim / spent.claims)}) | ` +
            `${per(spent.rowClaim)} (${Math.round(spent.rowClaim / spent.claims)}) | ` +
            `${per(spent.settle)} (${Math.round(spent.settle / spent.settles)}, ${
              (total / spent.settles).toFixed(1)
            }) | ` +
            `${per(spent.claim + spent.rowClaim + spent.settle)} | ${JSON.stringify(check)} load ${
              loadavg()[0]!.toFixed(2)
            }`
        )
      }
    }
  }
})

Effect.runPromise(main).then(
  () => process.exit(0),
  (error) => {
    console.error(error)
    process.exit(1)
  }
)
