/**
 * What the first correction after a start would otherwise load, done while
 * the server starts: the validation workers compile the answer schemas of
 * the most recently created tasks and hold their organizations' known
 * credentials, this process holds those credentials too (the cache
 * `Corrections.ts` keeps), the statements a correction runs have been
 * run once on the database (its catalog caches, and on the embedded
 * database PGlite's code compiled on first call), and the feedback INSERT
 * has inserted once, for the newest task's latest run, in a transaction
 * that is rolled back (the first write to the table and its indexes).
 * The HTTP side (router, authentication, answers) is warmed by
 * `src/server/WarmRequest.ts`.
 *
 * Speeds up: the first `POST /v1/feedback` with a correction after a
 * start skips the schema's compilation, the credentials' loading, the
 * worker's second round trip and the first write; `npm run bench --
 * first-request` measures the first against the warm ones
 * (bench/notes/first-request.md). Bounded: at most `WARM_TASKS` tasks and
 * `WARM_TIMEOUT_MS`; a failure here is logged and the start goes on (the
 * first request then pays as it did before). Nothing stays: the rolled-back
 * INSERT leaves no row and no usage; the identity column `seq` skips one
 * value, as after any failed INSERT.
 */
import { Data, Duration, Effect, Schema } from "effect"
import type { SqlClient } from "effect/sql"
import { FeedbackItem, SubmitFeedback } from "../api/Feedback.ts"
import { newId } from "../platform/Ids.ts"
import { rowsOf } from "../platform/Rows.ts"
import type { CorrectionPool, CredentialEntry, makeCorrections } from "./Corrections.ts"
import { feedbackInsert } from "./InsertStatement.ts"
import type { makeQuota } from "./Quota.ts"

/** Tasks whose schemas are compiled at start, newest first (a worker keeps `SVC_ANSWER_VALIDATION_CACHE`). */
const WARM_TASKS = 8
/** Pool connections opened and warmed at start (at most the pool's size are open at once). */
const WARM_CONNECTIONS = 4
/** The most a start waits for the warm-up. */
const WARM_TIMEOUT_MS = 2_000

const RunRows = rowsOf("runs", Schema.Struct({ trace_id: Schema.String }))

/** Ends the transaction of the rehearsed INSERT: it is rolled back, always. */
class RolledBack extends Data.TaggedError("RolledBack") {}

const TaskRows = rowsOf("tasks", Schema.Struct({ id: Schema.String, org_id: Schema.String, answer_schema: Schema.Unknown, fingerprint: Schema.String }))

/** A valid body and answer, decoded and encoded once so their parsers are built. */
const SAMPLE_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
const SAMPLE_ID = "00000000-0000-7000-8000-000000000000"

export const warmStart = (deps: {
  readonly sql: SqlClient.SqlClient
  readonly pool: CorrectionPool
  readonly corrections: Effect.Success<ReturnType<typeof makeCorrections>>
  readonly quota: ReturnType<typeof makeQuota>
  readonly cacheEntries: number
}) =>
  Effect.gen(function*() {
    const { corrections, pool, quota, sql } = deps
    yield* Schema.decodeUnknownEffect(SubmitFeedback)({ inference_log_id: SAMPLE_TRACE, score: -1, correction: { a: [1, "b"] } })
    yield* Schema.encodeUnknownEffect(FeedbackItem)({
      id: SAMPLE_ID,
      inference_log_id: SAMPLE_TRACE,
      task_id: SAMPLE_ID,
      score: -1,
      correction: { a: [1, "b"] },
      status: "pending",
      created_at: "1970-01-01T00:00:00.000Z"
    })
    const tasks = yield* TaskRows.all(sql`
      SELECT t.id, t.org_id, t.answer_schema, o.credentials_version::text AS fingerprint
      FROM tasks t JOIN orgs o ON o.id = t.org_id
      ORDER BY t.seq DESC
      LIMIT ${Math.min(WARM_TASKS, deps.cacheEntries)}
    `)
    // The organizations' credentials, into the cache `Feedback.submit` reads.
    const entries = new Map<string, CredentialEntry>()
    for (const task of tasks) {
      if (entries.has(task.org_id)) continue
      entries.set(task.org_id, yield* corrections.credentials(task.org_id))
      yield* Effect.ignore(quota.usage(task.org_id))
      // The run lookup and the INSERT, by an id no run has: nothing is
      // inserted (the INSERT takes its row from the run).
      yield* sql`SELECT r.task_id FROM runs r WHERE r.trace_id = ${SAMPLE_TRACE} AND r.org_id = ${task.org_id}`
      yield* feedbackInsert(sql, {
        id: SAMPLE_ID,
        orgId: task.org_id,
        score: -1,
        text: "{}",
        redacted: [],
        status: "pending",
        inferenceLogId: SAMPLE_TRACE,
        fingerprint: task.fingerprint,
        bytes: 0,
        maxBytes: 0,
        shard: 0
      })
    }
    // One INSERT that inserts, for the newest task's latest run, in a
    // transaction that is rolled back: the first write to the feedback
    // table and its indexes in this session happens here, not in a
    // client's request (on the embedded database it is most of what the
    // first correction waited for). Nothing stays; the identity column
    // `seq` skips one value, as after any failed INSERT.
    const newest = tasks[0]
    const run = newest === undefined
      ? undefined
      : yield* RunRows.one(sql`SELECT trace_id FROM runs WHERE task_id = ${newest.id} ORDER BY seq DESC LIMIT 1`)
    if (newest !== undefined && run !== undefined) {
      yield* sql.withTransaction(Effect.andThen(
        feedbackInsert(sql, {
          id: newId(),
          orgId: newest.org_id,
          score: -1,
          text: "{}",
          redacted: [],
          status: "pending",
          inferenceLogId: run.trace_id,
          fingerprint: newest.fingerprint,
          bytes: 2,
          maxBytes: Number.MAX_SAFE_INTEGER,
          shard: 0
        }),
        Effect.fail(new RolledBack())
      )).pipe(Effect.catchTag("RolledBack", () => Effect.void))
    }
    // The pool's other connections (on a PostgreSQL server a request may
    // get one the start never used): opened, and the correction's
    // statements run on each, so none is cold for the first request.
    yield* Effect.all(
      Array.from({ length: WARM_CONNECTIONS }, () =>
        sql.withTransaction(Effect.andThen(
          sql`SELECT r.task_id FROM runs r WHERE r.trace_id = ${SAMPLE_TRACE}`,
          sql`SELECT credentials_version::text FROM orgs WHERE id = ${SAMPLE_ID}`
        ))),
      { concurrency: "unbounded", discard: true }
    )
    // Every worker compiles each schema (checking an empty object against
    // it) and keeps the organization's credentials.
    for (const task of tasks) {
      const entry = entries.get(task.org_id)!
      yield* Effect.promise(() =>
        pool.broadcast({
          op: "correct",
          key: task.id,
          schema: task.answer_schema,
          text: "{}",
          known: { org: entry.orgId, fingerprint: entry.fingerprint, known: { keyHashes: [...entry.known.keyHashes], values: entry.known.values } },
          root: "correction"
        })
      )
    }
  }).pipe(
    Effect.timeout(Duration.millis(WARM_TIMEOUT_MS)),
    Effect.catchCause((cause) => Effect.logWarning("feedback warm-up at start did not finish", cause))
  )
