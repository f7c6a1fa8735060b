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
 * checkout's client (`src/platform/Database.ts` there, same schema) in the
 * same alternation: an A/B of the client in one process.
 *
 * `BENCH_KINDS` (default `allow,pending`; also `session`: the cheapest
 * write's INSERT, `SessionInsert.ts`, and `feedback`: the feedback POST's
 * INSERT, `InsertStatement.ts`) chooses the statements.
 *
 * `BENCH_BLOCK` statements per block (default 500), `BENCH_ROUNDS` rounds
 * (default 4). /proc counts CPU in 10 ms ticks: blocks of 500 give 20 µs
 * steps.
 */
import { PgClient } from "@effect/sql-pg"
import { Context, Effect, Layer, Redacted } from "effect"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import * as path from "node:path"
import { cpuMicros } from "../support/cpu.ts"
import { alternate, ownThreads } from "./threads.ts"
import { sessionInsert } from "../../src/agents/SessionInsert.ts"
import { stepSql } from "../../src/agents/StepStatement.ts"
import { feedbackInsert } from "../../src/feedback/InsertStatement.ts"
import type { CachedRule } from "../../src/approvals/PolicyCache.ts"
import { Database, type DatabaseLayer } from "../../src/platform/Database.ts"
import { newId } from "../../src/platform/Ids.ts"
import { Migrations } from "../../src/platform/Migrations.ts"

const BLOCK = Number(process.env.BENCH_BLOCK ?? 500)
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 4)
const serverUrl = process.env.BENCH_DATABASE_URL

const rule = (mode: "allow" | "require_approval"): CachedRule => ({
  stored: true,
  rule: { mode, review_seconds: 3600, expiring_notice_seconds: 60, escalation_seconds: null, timeout_action: "reject" }
})

type Kind = "session" | "feedback" | "allow" | "pending"

/** One database's fixtures (an organization, two policies, 16 sessions) and its statements. */
const prepare = (name: string, layer: DatabaseLayer, variant: ReadonlyArray<string> = [], migrations: typeof Migrations.layer = Migrations.layer) =>
  Effect.gen(function*() {
    const context = yield* Layer.build(migrations.pipe(Layer.provideMerge(layer)))
    const sql = Context.get(context, PgClient.PgClient)
    for (const statement of variant) yield* sql.unsafe(statement)
    const orgId = newId()
    yield* sql`INSERT INTO orgs (id, name) VALUES (${orgId}, 'bench')`
    for (const [cls, mode] of [["bench.allow", "allow"], ["bench.ask", "require_approval"]] as const) {
      yield* sql`INSERT INTO approval_policies (org_id, action_class, mode, review_seconds, expiring_notice_seconds, timeout_action)
        VALUES (${orgId}, ${cls}, ${mode}, 3600, 60, 'reject')`
    }
    const taskId = newId()
    yield* sql`INSERT INTO tasks (id, org_id, name, answer_schema) VALUES (${taskId}, ${orgId}, 'bench', '{}'::jsonb)`
    const traceId = "4bf92f3577b34da6a3ce929d0e0e4736"
    yield* sql`INSERT INTO runs (trace_id, org_id, task_id, input, answer) VALUES (${traceId}, ${orgId}, ${taskId}, '{}'::jsonb, '{}'::jsonb)`
    const correction = JSON.stringify({ customer: { id: "C-100001", email: "buyer@example.com" }, items: [{ sku: "SKU-1", quantity: 2, price: 9.99 }], total: 19.98, currency: "EUR" })
    const sessions: Array<string> = []
    for (let i = 0; i < 16; i++) {
      const id = newId()
      yield* sql`INSERT INTO agent_sessions (id, org_id) VALUES (${id}, ${orgId})`
      sessions.push(id)
    }
    // The server's backends of this database (the client's pool opens them as it needs them).
    const backends = () =>
      name !== "server" ? Effect.succeed(0) : Effect.map(
        sql<{ pid: number }>`SELECT pid FROM pg_stat_activity WHERE datname = current_database()`,
        (rows) => rows.reduce((sum, row) => sum + cpuMicros(row.pid), 0)
      )
    let n = 0
    const statement = (kind: Kind) =>
      kind === "session"
        ? sessionInsert(sql, newId(), orgId, null)
        : kind === "feedback"
        ? feedbackInsert(sql, {
          id: newId(),
          orgId,
          score: -1,
          text: correction,
          redacted: [],
          status: "pending",
          inferenceLogId: traceId,
          fingerprint: null,
          bytes: correction.length,
          maxBytes: 1_000_000_000,
          shard: n++ % 8
        })
        : stepSql(sql, {
        orgId,
        sessionId: sessions[n % sessions.length]!,
        step: { step_id: `s-${n++}`, tool: "shell", action_class: kind === "allow" ? "bench.allow" : "bench.ask", arguments: { command: "ls -la /srv/app", cwd: "/srv" } },
        cached: rule(kind === "allow" ? "allow" : "require_approval"),
        decision: kind === "allow" ? "allow" : "pending",
        approval: kind === "allow" ? null : { id: newId(), eventId: newId() },
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
          database: (name !== "server" ? after.worker - before.worker : db1 - db0) / BLOCK,
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

const folder = mkdtempSync(path.join(tmpdir(), "step-statement-"))
const variant = (process.env.BENCH_VARIANT ?? "").split(";").map((s) => s.trim()).filter((s) => s !== "")
await Effect.runPromise(Effect.scoped(Effect.gen(function*() {
  const databases = [yield* prepare("pglite", Database.embedded(path.join(folder, "a")))]
  const before = process.env.BENCH_BEFORE
  if (before !== undefined && before !== "") {
    const other = yield* Effect.promise(() => import(path.resolve(before, "src/platform/Database.ts")))
    const otherMigrations = yield* Effect.promise(() => import(path.resolve(before, "src/platform/Migrations.ts")))
    databases.push(yield* prepare("pglite before", other.Database.embedded(path.join(folder, "c")), [], otherMigrations.Migrations.layer))
  }
  if (variant.length > 0) databases.push(yield* prepare("pglite variant", Database.embedded(path.join(folder, "b")), variant))
  if (serverUrl !== undefined && serverUrl !== "") databases.push(yield* prepare("server", Database.scratch(Redacted.make(serverUrl))))
  const kinds = (process.env.BENCH_KINDS ?? "allow,pending").split(",") as ReadonlyArray<Kind>
  yield* alternate(databases, kinds, ROUNDS, "database")
  for (const db of databases) console.log(db.name, "plans of the step statements:", JSON.stringify(yield* db.plans))
  if (process.env.BENCH_EXPLAIN === "1") {
    for (const db of databases) for (const kind of kinds) console.log(`--- ${db.name} ${kind}\n${yield* db.explain(kind)}`)
  }
})))
rmSync(folder, { recursive: true, force: true })
process.exit(0)
