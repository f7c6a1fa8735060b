/**
 * The Effect floor, a child process of its own: what an Effect 4 HttpApi
 * server costs per request with nothing of svc in it. `HttpApiBuilder` on
 * `NodeHttpServer`, bearer authentication by an `HttpApiMiddleware` with
 * `HttpApiSecurity.bearer`, request bodies decoded by `Schema`, and the same
 * statements svc makes through an `effect/sql` client: `@effect/sql-pg`'s
 * `PgClient` (a pool of 10, svc's size) on a PostgreSQL server; on embedded
 * PGlite, an `SqlClient` whose connection speaks to PGlite in a worker
 * thread (`pglite-worker.ts`, the bare baseline's) on svc's data directory
 * while svc is stopped.
 *
 * The key is looked up as svc's identity check does it (src/identity/Identity.ts
 * and KeyCache.ts): its SHA-256, then a `Map` of known keys kept for 2 s, in
 * front of one indexed lookup by hash (`api_keys.key_hash`); a miss reads the
 * database, a known key is read again at most every 2 s. No request log, no
 * spans (the tracer is off), no policies, no validation of corrections, no
 * secret scan: those are svc's own work.
 *
 *   POST /v1/agent-sessions                   svc's INSERT (src/agents/SessionInsert.ts)
 *   POST /v1/tasks/:task_id/runs              svc's INSERT (src/tasks/RunInsert.ts), the answer echoing the body
 *   POST /v1/feedback                         svc's INSERT with its quota count, without the fingerprint
 *                                             check (src/feedback/InsertStatement.ts)
 *   POST /v1/agent-sessions/:session_id/steps the step's INSERT and its approval's, one statement, always
 *                                             `pending` (what src/agents/StepStatement.ts writes for them)
 */
import * as NodeHttpServer from "@effect/platform-node/NodeHttpServer"
import { PgClient } from "@effect/sql-pg"
import { Context, Effect, Exit, Layer, Option, Redacted, Schema, Scope, Stream } from "effect"
import { HttpRouter, HttpServer, type HttpServerResponse } from "effect/http"
import {
  HttpApi,
  HttpApiBuilder,
  HttpApiEndpoint,
  HttpApiError,
  HttpApiGroup,
  HttpApiMiddleware,
  HttpApiSchema,
  HttpApiSecurity
} from "effect/http-api"
import { Reactivity } from "effect/reactivity"
import { SqlClient, SqlError } from "effect/sql"
import type { Connection } from "effect/sql/SqlConnection"
import type { unhandled } from "effect/Types"
import { hash, randomBytes } from "node:crypto"
import { createServer } from "node:http"
import * as path from "node:path"
import { v7 } from "uuid"
import { serve } from "../support/child.ts"

export interface FloorOptions {
  readonly kind: "pglite" | "postgres"
  readonly dataDir?: string | undefined
  readonly url?: string | undefined
}

// ---------------------------------------------------------------- the API

class CurrentOrg extends Context.Service<CurrentOrg, string>()("floor/CurrentOrg") {}

class Unauthorized extends Schema.TaggedError<Unauthorized>()("Unauthorized", {}, { httpApiStatus: 401 }) {}

class Bearer extends HttpApiMiddleware.Service<Bearer, { provides: CurrentOrg; requires: never }>()("floor/Bearer", {
  security: { bearer: HttpApiSecurity.bearer },
  error: Unauthorized
}) {}

const Session = Schema.Struct({ id: Schema.String, task_id: Schema.NullOr(Schema.String), created_at: Schema.Date })

const Run = Schema.Struct({
  trace_id: Schema.String,
  task_id: Schema.String,
  input: Schema.Json,
  answer: Schema.Json,
  created_at: Schema.Date
})

const FeedbackItem = Schema.Struct({
  id: Schema.String,
  inference_log_id: Schema.String,
  task_id: Schema.String,
  score: Schema.Number,
  correction: Schema.NullOr(Schema.Json),
  status: Schema.String,
  created_at: Schema.Date
})

class FloorApi extends HttpApi.make("floor").add(
  HttpApiGroup.make("writes")
    .add(
      HttpApiEndpoint.post("createSession", "/v1/agent-sessions", {
        payload: Schema.Struct({ task_id: Schema.optionalKey(Schema.String) }),
        success: Session.pipe(HttpApiSchema.status(201)),
        error: HttpApiError.NotFound
      }),
      HttpApiEndpoint.post("logRun", "/v1/tasks/:task_id/runs", {
        params: { task_id: Schema.String },
        payload: Schema.Struct({ input: Schema.Json, answer: Schema.Json }),
        success: Run.pipe(HttpApiSchema.status(201)),
        error: HttpApiError.NotFound
      }),
      HttpApiEndpoint.post("submitFeedback", "/v1/feedback", {
        payload: Schema.Struct({
          inference_log_id: Schema.String,
          score: Schema.Number,
          correction: Schema.optionalKey(Schema.Json)
        }),
        success: FeedbackItem.pipe(HttpApiSchema.status(201)),
        error: HttpApiError.NotFound
      }),
      HttpApiEndpoint.post("governStep", "/v1/agent-sessions/:session_id/steps", {
        params: { session_id: Schema.String },
        payload: Schema.Struct({
          step_id: Schema.String,
          tool: Schema.String,
          action_class: Schema.String,
          arguments: Schema.Json
        }),
        success: Schema.Struct({ decision: Schema.Literal("pending"), approval_id: Schema.String }),
        error: HttpApiError.NotFound
      })
    )
    .middleware(Bearer)
) {}

// ---------------------------------------------------------------- the statements

/** Copied from src/agents/SessionInsert.ts. */
const SESSION_INSERT = `
  INSERT INTO agent_sessions (id, org_id, task_id)
  SELECT $1, $2, $3
  WHERE $4::uuid IS NULL OR EXISTS (SELECT 1 FROM tasks WHERE id = $5 AND org_id = $6)
  RETURNING id, task_id, created_at`

/** Copied from src/tasks/RunInsert.ts. */
const RUN_INSERT = `
  WITH inserted AS (
    INSERT INTO runs (trace_id, org_id, task_id, input, answer)
    SELECT $1, $2, id, $3::jsonb, $4::jsonb FROM tasks WHERE id = $5 AND org_id = $6
    AND (SELECT coalesce(sum(bytes), 0) FROM org_usage WHERE org_id = $7 AND kind = 'runs') + $8 <= $9
    RETURNING task_id, created_at
  ), counted AS (
    INSERT INTO org_usage (org_id, kind, shard, bytes)
    SELECT $10, 'runs', $11, $12 FROM inserted
    ON CONFLICT (org_id, kind, shard) DO UPDATE SET bytes = org_usage.bytes + excluded.bytes
  )
  SELECT task_id, created_at FROM inserted`

/** Copied from src/feedback/InsertStatement.ts (the statement without the fingerprint check). */
const FEEDBACK_INSERT = `
    WITH inserted AS (
      INSERT INTO feedback (id, org_id, task_id, inference_log_id, score, correction, redacted_fields, status)
      SELECT $1, $2, r.task_id, r.trace_id, $3, $4::jsonb, $5::jsonb, $6
      FROM runs r WHERE r.trace_id = $7 AND r.org_id = $8
      AND (SELECT coalesce(sum(bytes), 0) FROM org_usage WHERE org_id = $9 AND kind = 'feedback') + $10 <= $11
      RETURNING id, seq, task_id, inference_log_id, score, status, created_at
    ), counted AS (
      INSERT INTO org_usage (org_id, kind, shard, bytes)
      SELECT $12, 'feedback', $13, $14 FROM inserted
      ON CONFLICT (org_id, kind, shard) DO UPDATE SET bytes = org_usage.bytes + excluded.bytes
    )
    SELECT id, seq, task_id, inference_log_id, score, status, created_at FROM inserted`

/** What svc counts per feedback record beside its correction, and its default quota (src/feedback/Feedback.ts, src/platform/Config.ts). */
const RECORD_BYTES = 256
const MAX_FEEDBACK_BYTES = 1024 ** 3
/** svc's default run quota, each run counting RECORD_BYTES beside its JSON (src/tasks/RunInsert.ts). */
const MAX_RUN_BYTES = 10 * 1024 ** 3

/**
 * A pending step: the session's row, the step's INSERT and its approval's
 * (the columns src/agents/StepStatement.ts fills, with a one-hour review and
 * a `reject` timeout action), in one statement. No policy, no session event,
 * no outbox or stream event.
 */
const STEP_INSERT = `
  WITH sess AS (
    SELECT id, task_id FROM agent_sessions WHERE id = $1 AND org_id = $2
  ),
  t AS MATERIALIZED (SELECT date_trunc('milliseconds', now()) AS t0),
  step AS (
    INSERT INTO agent_steps (session_id, step_id, org_id, tool, action_class, arguments, decision, approval_id, resolution, created_at)
    SELECT sess.id, $3, $2, $4, $5, $6::jsonb, 'pending', $7::uuid, 'pending', t.t0
    FROM sess, t
    ON CONFLICT (session_id, step_id) DO NOTHING
    RETURNING session_id
  ),
  approval AS (
    INSERT INTO approvals (id, org_id, session_id, step_id, task_id, status, deadline_at, expires_at, timeout_action,
      next_due_at, next_due_kind, created_at)
    SELECT $7::uuid, $2, sess.id, $3, sess.task_id, 'pending', t.t0 + interval '1 hour', t.t0 + interval '1 hour', 'reject',
      t.t0 + interval '1 hour', 'deadline', t.t0
    FROM step, sess, t
    RETURNING id
  )
  SELECT EXISTS (SELECT 1 FROM sess) AS found, (SELECT id::text FROM approval) AS approval_id`

// ---------------------------------------------------------------- the handlers

/** Known keys' organizations by key hash, each trusted for `KEY_TTL_MS` from the read that found it (svc's `KEY_CACHE_TTL`). */
const KEY_TTL_MS = 2_000

const BearerLive = Layer.effect(
  Bearer,
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const known = new Map<string, { readonly orgId: string; readonly until: number }>()
    const lookup = (keyHash: string) => {
      const startedAt = performance.now()
      // svc's statement (src/identity/Identity.ts).
      return Effect.map(
        sql.unsafe<{ org_id: string }>(
          "SELECT id, org_id, scopes FROM api_keys WHERE key_hash = $1 AND revoked_at IS NULL",
          [keyHash]
        ),
        (rows) => {
          const row = rows[0]
          if (row === undefined) return Option.none<string>()
          known.set(keyHash, { orgId: row.org_id, until: startedAt + KEY_TTL_MS })
          return Option.some(row.org_id)
        }
      )
    }
    return Bearer.of({
      bearer: (httpEffect, { credential }) => {
        const keyHash = hash("sha256", Redacted.value(credential), "hex")
        const entry = known.get(keyHash)
        const orgId = entry !== undefined && performance.now() < entry.until
          ? Effect.succeed(Option.some(entry.orgId))
          : lookup(keyHash)
        return Effect.flatMap(
          Effect.orDie(orgId),
          (found): Effect.Effect<HttpServerResponse.HttpServerResponse, Unauthorized | unhandled> =>
            Option.isNone(found)
              ? Effect.fail(new Unauthorized())
              : Effect.provideService(httpEffect, CurrentOrg, found.value)
        )
      }
    })
  })
)

const WritesLive = HttpApiBuilder.group(
  FloorApi,
  "writes",
  Effect.fnUntraced(function*(handlers) {
    const sql = yield* SqlClient.SqlClient
    return handlers
      .handle("createSession", ({ payload }) =>
        CurrentOrg.use((orgId) => {
          const taskId = payload.task_id ?? null
          return sql.unsafe<typeof Session.Type>(SESSION_INSERT, [v7(), orgId, taskId, taskId, taskId, orgId]).pipe(
            Effect.orDie,
            Effect.flatMap((rows) =>
              rows[0] === undefined ? Effect.fail(new HttpApiError.NotFound()) : Effect.succeed(rows[0])
            )
          )
        }))
      .handle("logRun", ({ params, payload }) =>
        CurrentOrg.use((orgId) => {
          const traceId = randomBytes(16).toString("hex")
          const input = JSON.stringify(payload.input)
          const answer = JSON.stringify(payload.answer)
          const runBytes = RECORD_BYTES + Buffer.byteLength(input) + Buffer.byteLength(answer)
          return sql.unsafe<{ task_id: string; created_at: Date }>(RUN_INSERT, [
            traceId,
            orgId,
            input,
            answer,
            params.task_id,
            orgId,
            orgId,
            runBytes,
            MAX_RUN_BYTES,
            orgId,
            Math.floor(Math.random() * 16),
            runBytes
          ]).pipe(
            Effect.orDie,
            Effect.flatMap((rows) =>
              rows[0] === undefined
                ? Effect.fail(new HttpApiError.NotFound())
                : Effect.succeed({
                  trace_id: traceId,
                  task_id: rows[0].task_id,
                  input: payload.input,
                  answer: payload.answer,
                  created_at: rows[0].created_at
                })
            )
          )
        }))
      .handle("submitFeedback", ({ payload }) =>
        CurrentOrg.use((orgId) => {
          const correction = payload.correction ?? null
          const text = correction === null ? null : JSON.stringify(correction)
          const bytes = RECORD_BYTES + (text === null ? 0 : Buffer.byteLength(text, "utf8"))
          return sql.unsafe<Omit<typeof FeedbackItem.Type, "correction">>(FEEDBACK_INSERT, [
            v7(),
            orgId,
            payload.score,
            text,
            null,
            correction === null ? "recorded" : "pending",
            payload.inference_log_id,
            orgId,
            orgId,
            bytes,
            MAX_FEEDBACK_BYTES,
            orgId,
            Math.floor(Math.random() * 16),
            bytes
          ]).pipe(
            Effect.orDie,
            Effect.flatMap((rows) =>
              rows[0] === undefined
                ? Effect.fail(new HttpApiError.NotFound())
                : Effect.succeed({ ...rows[0], correction })
            )
          )
        }))
      .handle("governStep", ({ params, payload }) =>
        CurrentOrg.use((orgId) => {
          const approvalId = v7()
          return sql.unsafe<{ found: boolean; approval_id: string | null }>(STEP_INSERT, [
            params.session_id,
            orgId,
            payload.step_id,
            payload.tool,
            payload.action_class,
            JSON.stringify(payload.arguments),
            approvalId
          ]).pipe(
            Effect.orDie,
            Effect.flatMap((rows) =>
              rows[0]?.found !== true
                ? Effect.fail(new HttpApiError.NotFound())
                // A re-sent step_id inserts nothing: answered with the id this request chose (the floor keeps no answers).
                : Effect.succeed({ decision: "pending" as const, approval_id: rows[0].approval_id ?? approvalId })
            )
          )
        }))
  })
)

// ---------------------------------------------------------------- the database

/**
 * An `SqlClient` on PGlite in a worker thread: each statement is a message
 * (`pglite-worker.ts`), answered with its rows; the worker runs them one at
 * a time. No transactions are needed: every request is one statement.
 */
const pgliteLayer = (dataDir: string): Layer.Layer<SqlClient.SqlClient> =>
  Layer.effect(
    SqlClient.SqlClient,
    Effect.gen(function*() {
      const { Worker } = yield* Effect.promise(() => import("node:worker_threads"))
      const worker = new Worker(new URL("./pglite-worker.ts", import.meta.url), {
        workerData: { dataDir: path.join(dataDir, "pgdata") }
      })
      yield* Effect.callback<void>((resume) => {
        worker.once("error", (error) => resume(Effect.die(error)))
        worker.once("message", () => resume(Effect.void))
      })
      const waiting = new Map<number, (message: { rows?: Array<unknown>; error?: string }) => void>()
      let nextId = 0
      worker.on("message", (message: { id: number; rows?: Array<unknown>; error?: string }) => {
        const waiter = waiting.get(message.id)!
        waiting.delete(message.id)
        waiter(message)
      })
      const ask = (message: object) =>
        Effect.callback<ReadonlyArray<any>, SqlError.SqlError>((resume) => {
          const id = nextId++
          waiting.set(id, (answer) =>
            resume(
              answer.error === undefined
                ? Effect.succeed(answer.rows!)
                : Effect.fail(
                  new SqlError.SqlError({
                    reason: new SqlError.UnknownError({ cause: answer.error, message: answer.error })
                  })
                )
            ))
          worker.postMessage({ id, ...message })
        })
      yield* Effect.addFinalizer(() =>
        Effect.promise(async () => {
          await Effect.runPromise(ask({ close: true }).pipe(Effect.ignore))
          await worker.terminate()
        })
      )
      const query = (text: string, params: ReadonlyArray<unknown>) => ask({ text, params })
      const rows = <A extends object>(
        text: string,
        params: ReadonlyArray<unknown>,
        transformRows?: (rows: ReadonlyArray<A>) => ReadonlyArray<A>
      ) => transformRows === undefined ? query(text, params) : Effect.map(query(text, params), transformRows)
      const values = (text: string, params: ReadonlyArray<unknown>) =>
        Effect.map(query(text, params), (r) => r.map((row) => Object.values(row)))
      const connection: Connection = {
        execute: rows,
        executeUnprepared: rows,
        executeRaw: query,
        executeValues: values,
        executeValuesUnprepared: values,
        executeStream: (text, params, transformRows) =>
          Stream.flatMap(Stream.fromEffect(rows(text, params, transformRows)), Stream.fromIterable)
      }
      return yield* SqlClient.make({
        acquirer: Effect.succeed(connection),
        borrower: (f) => f(connection),
        compiler: PgClient.makeCompiler(),
        driver: "pglite-worker",
        spanAttributes: []
      })
    })
  ).pipe(Layer.provide(Reactivity.layer))

const databaseLayer = (options: FloorOptions): Layer.Layer<SqlClient.SqlClient, SqlError.SqlError> =>
  options.kind === "pglite"
    ? pgliteLayer(options.dataDir!)
    : PgClient.layer({ url: Redacted.make(options.url!), maxConnections: 10 })

// ---------------------------------------------------------------- the process

const options = JSON.parse(process.env.BENCH_FLOOR!) as FloorOptions

const AppLayer = HttpRouter.serve(
  HttpApiBuilder.layer(FloorApi).pipe(Layer.provide(WritesLive), Layer.provide(BearerLive)),
  { disableLogger: true, disableListenLog: true }
).pipe(
  Layer.provideMerge(NodeHttpServer.layer(createServer, { port: 0, host: "127.0.0.1" })),
  Layer.provide(databaseLayer(options))
)

const scope = Scope.makeUnsafe()
const context = await Effect.runPromise(Layer.buildWithScope(AppLayer, scope).pipe(Effect.withTracerEnabled(false)))
const address = Context.get(context, HttpServer.HttpServer).address as { readonly port: number }

serve({
  url: () => `http://127.0.0.1:${address.port}`,
  close: () => Effect.runPromise(Scope.close(scope, Exit.void))
})
