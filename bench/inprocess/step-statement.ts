/**
 * `npx node bench/inprocess/step-statement.ts`: the governed step's one
 * statement (`src/agents/StepStatement.ts`) alone, run by svc's database
 * client on embedded PGlite (a fresh data folder, as svc runs it) and, with
 * `BENCH_DATABASE_URL`, on a scratch database of that PostgreSQL server, in
 * alternating blocks in one process, so that other work on the machine
 * falls on both alike. One statement at a time, no HTTP, no background work.
 *
 * Reported per statement, µs: the database's CPU (PGlite: the worker
 * threads, any other embedded database idling meanwhile; the server: its
 * backends of the scratch database, from /proc),
 * this process's main thread (compiling, sending, decoding) and V8's helper
 * threads (mostly garbage collection); then how each database planned it
 * (`pg_prepared_statements`: generic or custom plans) and, with
 * `BENCH_EXPLAIN=1`, `EXPLAIN (ANALYZE, BUFFERS)` of each kind on each.
 *
 * `BENCH_VARIANT="<SQL>; <SQL>"` adds a second embedded database with these
 * statements run after the migrations (a schema change to weigh: an index
 * or a foreign key dropped, a setting), in the same alternation.
 *
 * `BENCH_BEFORE=<checkout>` adds an embedded database opened by that
 * checkout's client (`src/database/Database.ts` there, its migrations)
 * running that checkout's step statement (`stepSql`) in the same
 * alternation: an A/B of the client and the statement in one process;
 * with `BENCH_DATABASE_URL`, also a scratch database of that server
 * (`server before`).
 *
 * `BENCH_KINDS` (default `allow,pending`; also `rules`: an allowed step
 * of a class whose policy holds the ten rules of the `steps` scenario
 * (`BENCH_RULES`), the tenth deciding, as the step of its `allow by the
 * 10th rule`; `session`: the cheapest
 * write's INSERT, `SessionInsert.ts`; `feedback`: the feedback POST's
 * INSERT, `InsertStatement.ts`; `rows`: the rows a pending step writes and
 * nothing else, as one statement of plain INSERTs and the session's
 * counter, no lock, no look-up of the step or the policy, the JSON built
 * here: what PostgreSQL in PGlite costs for the step's writes alone; and
 * `empty`: a near-empty statement, the round trip) chooses the statements.
 *
 * `BENCH_HISTORY=<n>` adds a second embedded database that holds `n`
 * earlier steps before the first statement (bulk-inserted rows as a
 * session's history has them: 10 steps a session, every other one pending
 * with its approval, decided, its dispatched outbox event and its stream
 * row, and every step's session event; then `ANALYZE` and `VACUUM`, as
 * svc's maintenance loops leave a table), in the same alternation: whether
 * a step costs more after `n` earlier ones (flatness). The fresh database's
 * steps add up meanwhile too (`BENCH_BLOCK` times the rounds and kinds).
 *
 * `BENCH_BLOCK` statements per block (default 500), `BENCH_ROUNDS` rounds
 * (default 4). /proc counts CPU in 10 ms ticks: blocks of 500 give 20 µs
 * steps.
 */
import { PgClient } from "@effect/sql-pg"
import { Context, Effect, Layer, Redacted } from "effect"
import type { SqlClient } from "effect/sql"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import * as path from "node:path"
import { sessionInsert } from "../../src/agents/SessionInsert.ts"
import { stepSql } from "../../src/agents/StepStatement.ts"
import type { CachedRule } from "../../src/approvals/PolicyCache.ts"
import { Database, type DatabaseLayer } from "../../src/database/Database.ts"
import { Migrations } from "../../src/database/Migrations.ts"
import { feedbackStatement } from "../../src/feedback/InsertStatement.ts"
import { newId } from "../../src/platform/Ids.ts"
import { BENCH_RULES } from "../scenarios/steps.ts"
import { checkoutModule } from "../support/checkoutModule.ts"
import { cpuMicros } from "../support/cpu.ts"
import { alternate, ownThreads } from "./threads.ts"

const BLOCK = Number(process.env.BENCH_BLOCK ?? 500)
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 4)
const serverUrl = process.env.BENCH_DATABASE_URL

const rule = (mode: "allow" | "require_approval", version: string): CachedRule => ({
  version,
  conditions: [],
  rule: { mode, review_seconds: 3600, expiring_notice_seconds: 60, escalation_seconds: null, timeout_action: "reject" }
})

/** The policies the statements check, by kind: their class, mode and rules. */
const POLICIES = [
  ["allow", "bench.allow", "allow", []],
  ["pending", "bench.ask", "require_approval", []],
  ["rules", "bench.rules", "require_approval", BENCH_RULES]
] as const

/**
 * A checkout's step statement from before the policy's answer was one
 * ruling (`src/approvals/StepRulings.ts`): its input named the cached rule,
 * the decision and the deciding rule (`verdict`); and from before policies
 * had a version, its cached rule said whether it was stored and carried its
 * rules' JSON, which the statement compared with the stored ones.
 */
const unversioned =
  (before: (sql: SqlClient.SqlClient, input: object) => ReturnType<typeof stepSql>): typeof stepSql => (sql, input) => {
    const { ruling, ...rest } = input
    return before(sql, {
      ...rest,
      decision: ruling.decision,
      cached: { stored: ruling.policy.version !== null, conditionsJson: "[]", ...ruling.policy },
      ...(ruling.rule === null
        ? {}
        : { verdict: { rule: ruling.rule, reason: ruling.reason, settings: ruling.settings } })
    })
  }

type Kind = "session" | "feedback" | "allow" | "pending" | "rules" | "rows" | "empty"

/** One database's fixtures (an organization, two policies, 16 sessions) and its statements. */
const prepare = (
  name: string,
  layer: DatabaseLayer,
  variant: ReadonlyArray<string> = [],
  migrations: typeof Migrations.layer = Migrations.layer,
  history = 0,
  step: typeof stepSql = stepSql
) =>
  Effect.gen(function*() {
    const context = yield* Layer.build(migrations.pipe(Layer.provideMerge(layer)))
    const sql = Context.get(context, PgClient.PgClient)
    for (const statement of variant) yield* sql.unsafe(statement)
    const orgId = newId()
    yield* sql`INSERT INTO orgs (id, name) VALUES (${orgId}, 'bench')`
    if (history > 0) yield* earlierSteps(sql, orgId, history)
    // Each policy's version, where the checkout's schema has one (none before migration 0840), and its rules'
    // JSON, which a checkout from before compares instead.
    const cached: Partial<Record<Kind, CachedRule>> = {}
    for (const [kind, cls, mode, rules] of POLICIES) {
      const [row] = yield* sql<{ version: string | null; rules: string }>`
        INSERT INTO approval_policies (org_id, action_class, mode, review_seconds, expiring_notice_seconds, timeout_action, rules)
        VALUES (${orgId}, ${cls}, ${mode}, 3600, 60, 'reject', ${JSON.stringify(rules)}::jsonb)
        RETURNING to_jsonb(approval_policies) ->> 'version' AS version, rules::text AS rules`
      cached[kind] = Object.assign(rule(mode, row?.version ?? "0"), { conditionsJson: row!.rules })
    }
    const taskId = newId()
    yield* sql`INSERT INTO tasks (id, org_id, name, answer_schema) VALUES (${taskId}, ${orgId}, 'bench', '{}'::jsonb)`
    const traceId = "4bf92f3577b34da6a3ce929d0e0e4736"
    yield* sql`INSERT INTO runs (trace_id, org_id, task_id, input, answer) VALUES (${traceId}, ${orgId}, ${taskId}, '{}'::jsonb, '{}'::jsonb)`
    const correction = JSON.stringify({
      customer: { id: "C-100001", email: "buyer@example.com" },
      items: [{ sku: "SKU-1", quantity: 2, price: 9.99 }],
      total: 19.98,
      currency: "EUR"
    })
    const sessions: Array<string> = []
    for (let i = 0; i < 16; i++) {
      const id = newId()
      yield* sql`INSERT INTO agent_sessions (id, org_id) VALUES (${id}, ${orgId})`
      sessions.push(id)
    }
    // The server's backends of this database (the client's pool opens them as it needs them).
    const onServer = name.startsWith("server")
    const backends = () =>
      !onServer ? Effect.succeed(0) : Effect.map(
        sql<{ pid: number }>`SELECT pid FROM pg_stat_activity WHERE datname = current_database()`,
        (rows) => rows.reduce((sum, row) => sum + cpuMicros(row.pid), 0)
      )
    let n = 0
    const rows = () => {
      const sessionId = sessions[n % sessions.length]!
      const stepId = `r-${n++}`
      const approvalId = newId()
      const body = JSON.stringify({
        type: "approval.requested",
        approval: { approval_id: approvalId, session_id: sessionId, step_id: stepId }
      })
      return sql`
        WITH t AS MATERIALIZED (SELECT date_trunc('milliseconds', now()) AS t0),
        step AS (
          INSERT INTO agent_steps (session_id, step_id, org_id, tool, action_class, arguments, decision, approval_id, resolution, created_at)
          SELECT ${sessionId}, ${stepId}, ${orgId}, 'shell', 'bench.ask', ${
        JSON.stringify({ command: "ls -la /srv/app", cwd: "/srv" })
      }::jsonb,
            'pending', ${approvalId}::uuid, 'pending', t.t0 FROM t
        ),
        bump AS (UPDATE agent_sessions SET event_seq = event_seq + 1 WHERE id = ${sessionId} RETURNING event_seq),
        session_event AS (
          INSERT INTO session_events (session_id, seq, org_id, name, data) SELECT ${sessionId}, event_seq, ${orgId}, 'step:governed', ${body} FROM bump
        ),
        approval AS (
          INSERT INTO approvals (id, org_id, session_id, step_id, status, deadline_at, expires_at, timeout_action, next_due_at, next_due_kind, created_at)
          SELECT ${approvalId}, ${orgId}, ${sessionId}, ${stepId}, 'pending', t.t0 + interval '1 hour', t.t0 + interval '1 hour', 'reject',
            t.t0 + interval '59 minutes', 'expiring', t.t0 FROM t
        ),
        outbox AS (
          INSERT INTO events (id, org_id, type, occurred_at, body, label)
          SELECT ${newId()}, ${orgId}, 'approval.requested', t.t0, ${body}, ${`approval.requested ${approvalId}`} FROM t
        )
        INSERT INTO approval_stream_events (org_id, seq, name, data)
        VALUES (${orgId}, (pg_current_xact_id()::text::bigint * 1024), 'approval.requested', ${body})`
    }
    const statement = (kind: Kind) =>
      kind === "rows"
        ? rows()
        : kind === "empty"
        ? sql`SELECT ${n++}::int AS n`
        : kind === "session"
        ? sessionInsert(sql, newId(), orgId, null)
        : kind === "feedback"
        ? feedbackStatement(sql, {
          id: newId(),
          orgId,
          score: -1,
          text: correction,
          redacted: [],
          status: "pending",
          inferenceLogId: traceId,
          fingerprint: null,
          bytes: correction.length,
          maxBytes: 1_000_000_000
        })
        : step(sql, {
          orgId,
          sessionId: sessions[n % sessions.length]!,
          step: {
            step_id: `s-${n++}`,
            tool: "shell",
            action_class: POLICIES.find(([k]) => k === kind)![1],
            arguments: { command: "ls -la /srv/app", cwd: "/srv" }
          },
          ruling: {
            decision: kind === "pending" ? "pending" : "allow",
            rule: kind === "rules" ? "shell-srv" : null,
            reason: null,
            settings: cached[kind]!.rule,
            policy: cached[kind]!
          },
          approval: kind === "pending" ? { id: newId(), eventId: newId() } : null,
          notify: undefined
        })
    const block = (kind: Kind) =>
      Effect.gen(function*() {
        const before = ownThreads()
        const db0 = yield* backends()
        for (let i = 0; i < BLOCK; i++) yield* statement(kind)
        const db1 = yield* backends()
        const after = ownThreads()
        return {
          database: (!onServer ? after.worker - before.worker : db1 - db0) / BLOCK,
          main: (after.main - before.main) / BLOCK,
          helpers: (after.helpers - before.helpers) / BLOCK
        }
      })
    const plans = sql<{ generic_plans: string; custom_plans: string; length: number }>`
      SELECT generic_plans::text, custom_plans::text, length(statement) AS length FROM pg_prepared_statements
      WHERE statement LIKE '%INSERT INTO agent_steps%' ORDER BY length`
    const explain = (kind: Kind) =>
      Effect.gen(function*() {
        const [text, params] = statement(kind).compile()
        const rows = yield* sql.unsafe<{ "QUERY PLAN": string }>(`EXPLAIN (ANALYZE, BUFFERS) ${text}`, params as never)
        return rows.map((row) => row["QUERY PLAN"]).join("\n")
      })
    return { name, block, plans, explain }
  })

/**
 * `count` earlier steps of the organization in a few statements (the rows
 * `bench/scenarios/steps.ts` grows its history with), then what svc's
 * maintenance would have done since: statistics and a `VACUUM`.
 */
const earlierSteps = (sql: PgClient.PgClient, orgId: string, count: number) =>
  Effect.gen(function*() {
    const sessions = Math.ceil(count / 10)
    yield* sql`CREATE TEMP TABLE bench_grow AS SELECT gen_random_uuid() AS id FROM generate_series(1, ${sessions}::int)`
    yield* sql`INSERT INTO agent_sessions (id, org_id, event_seq, created_at) SELECT id, ${orgId}, 10, now() - interval '1 day' FROM bench_grow`
    yield* sql`
      INSERT INTO agent_steps (session_id, step_id, org_id, tool, action_class, arguments, decision, approval_id, resolution, created_at)
      SELECT g.id, 'h' || k, ${orgId}, 'shell', CASE WHEN k % 2 = 1 THEN 'bench.ask' ELSE 'bench.allow' END,
        '{"command":"ls -la /srv/app","cwd":"/srv"}'::jsonb, CASE WHEN k % 2 = 1 THEN 'pending' ELSE 'allow' END,
        CASE WHEN k % 2 = 1 THEN md5(g.id::text || k)::uuid END, 'allow', now() - interval '1 day'
      FROM bench_grow g, generate_series(1, 10) k`
    yield* sql`
      INSERT INTO approvals (id, org_id, session_id, step_id, status, deadline_at, expires_at, timeout_action, decided_at, decided_by, created_at)
      SELECT approval_id, org_id, session_id, step_id, 'approved', now(), now(), 'reject', now(), 'bench', now() - interval '1 day'
      FROM agent_steps WHERE approval_id IS NOT NULL AND session_id IN (SELECT id FROM bench_grow)`
    yield* sql`
      INSERT INTO events (id, org_id, type, occurred_at, body, label, dispatched_at)
      SELECT gen_random_uuid(), org_id, 'approval.requested', now() - interval '1 day',
        '{"type":"approval.requested","approval":{"approval_id":"' || approval_id || '","status":"pending"}}',
        'approval.requested ' || approval_id, now()
      FROM agent_steps WHERE approval_id IS NOT NULL AND session_id IN (SELECT id FROM bench_grow)`
    yield* sql`
      INSERT INTO session_events (session_id, seq, org_id, name, data, created_at)
      SELECT g.id, k, ${orgId}, 'step:governed', '{"step_id":"h' || k || '","tool":"shell","decision":"allow"}', now() - interval '1 day'
      FROM bench_grow g, generate_series(1, 10) k`
    // Below every transaction-numbered id, as the ids of events written before those ids existed.
    yield* sql`
      INSERT INTO approval_stream_events (org_id, seq, name, data)
      SELECT ${orgId}, row_number() OVER (), 'approval.approved', '{"approval_id":"' || approval_id || '"}'
      FROM agent_steps WHERE approval_id IS NOT NULL AND session_id IN (SELECT id FROM bench_grow)`
    yield* sql`DROP TABLE bench_grow`
    yield* sql`VACUUM ANALYZE`
  })

const folder = mkdtempSync(path.join(tmpdir(), "step-statement-"))
const variant = (process.env.BENCH_VARIANT ?? "").split(";").map((s) => s.trim()).filter((s) => s !== "")
await Effect.runPromise(Effect.scoped(Effect.gen(function*() {
  const databases = [yield* prepare("pglite", Database.embedded(path.join(folder, "a")))]
  const beforeDir = process.env.BENCH_BEFORE
  const before = beforeDir === undefined || beforeDir === "" ? undefined : {
    Database: (yield* Effect.promise(() => import(checkoutModule(beforeDir, "database/Database.ts")))).Database,
    migrations: (yield* Effect.promise(() =>
      import(checkoutModule(beforeDir, "database/Migrations.ts"))
    )).Migrations.layer,
    step: unversioned(
      (yield* Effect.promise(() => import(path.resolve(beforeDir, "src/agents/StepStatement.ts")))).stepSql
    )
  }
  if (before !== undefined) {
    databases.push(
      yield* prepare(
        "pglite before",
        before.Database.embedded(path.join(folder, "c")),
        [],
        before.migrations,
        0,
        before.step
      )
    )
  }
  const history = Number(process.env.BENCH_HISTORY ?? 0)
  if (history > 0) {
    databases.push(
      yield* prepare(
        `pglite, ${history} earlier steps`,
        Database.embedded(path.join(folder, "d")),
        [],
        Migrations.layer,
        history
      )
    )
  }
  if (variant.length > 0) {
    databases.push(yield* prepare("pglite variant", Database.embedded(path.join(folder, "b")), variant))
  }
  if (serverUrl !== undefined && serverUrl !== "") {
    databases.push(yield* prepare("server", Database.scratch(Redacted.make(serverUrl))))
    if (before !== undefined) {
      databases.push(
        yield* prepare(
          "server before",
          before.Database.scratch(Redacted.make(serverUrl)),
          [],
          before.migrations,
          0,
          before.step
        )
      )
    }
  }
  const kinds = (process.env.BENCH_KINDS ?? "allow,pending").split(",") as ReadonlyArray<Kind>
  yield* alternate(databases, kinds, ROUNDS, "database")
  for (const db of databases) console.log(db.name, "plans of the step statements:", JSON.stringify(yield* db.plans))
  if (process.env.BENCH_EXPLAIN === "1") {
    for (const db of databases) {
      for (const kind of kinds) console.log(`--- ${db.name} ${kind}\n${yield* db.explain(kind)}`)
    }
  }
})))
rmSync(folder, { recursive: true, force: true })
process.exit(0)
