/**
 * What the first correction after a start would otherwise load, done while
 * the server starts: the validation workers compile the answer schemas of
 * the most recently created tasks and hold their organizations' known
 * credentials, this process holds those credentials too (the cache
 * `Corrections.ts` keeps), the pool's connections have run the
 * correction's lookups, and the submit itself has run (`rehearseSubmit`)
 * for the newest task's latest run, with that run's answer as the
 * correction, in transactions that are rolled back. The HTTP side (router,
 * authentication, decoding, answers) is warmed by `src/server/WarmRequest.ts`.
 *
 * Speeds up: the first `POST /v1/feedback` with a correction after a
 * start skips the schema's compilation, the credentials' loading, the
 * worker's second round trip, the first write and the first run of the
 * submit's code; `npm run bench -- first-request` measures the first
 * against the warm ones (bench/notes/first-request.md: with the rehearsed
 * submit, the first went from a median of 14.2 ms to 10.8 on PostgreSQL
 * and 13.9 to 13.1 on the embedded database, the warm ones 3.3-4.6).
 * Bounded: at most `WARM_TASKS` tasks and `WARM_TIMEOUT_MS` for each of
 * the two steps; a failure here is logged and the start goes on (the first
 * request then pays as it did before).
 */
import { Data, Duration, Effect, Schema } from "effect"
import type { SqlClient } from "effect/sql"
import { FeedbackItem, SubmitFeedback } from "../api/Feedback.ts"
import { rowsOf } from "../platform/Rows.ts"
import type { CorrectionPool, CredentialEntry, JsonObject, makeCorrections } from "./Corrections.ts"
import type { makeQuota } from "./Quota.ts"

/** Tasks whose schemas are compiled at start, newest first (a worker keeps `SVC_ANSWER_VALIDATION_CACHE`). */
const WARM_TASKS = 8
/** Pool connections opened and warmed at start (at most the pool's size are open at once). */
const WARM_CONNECTIONS = 4
/** The most a start waits for the warm-up. */
const WARM_TIMEOUT_MS = 2_000

/** The newest task's latest run: its answer (when small) is the rehearsed correction. */
const SampleRows = rowsOf(
  "runs",
  Schema.Struct({ org_id: Schema.String, trace_id: Schema.String, answer: Schema.NullOr(Schema.Unknown) })
)
/** The largest answer sent back as the rehearsed correction (JSON bytes); a larger one is rehearsed as a bare score. */
const REHEARSED_ANSWER_BYTES = 16 * 1024
/** Rehearsals of the submit (the first compiles, the next ones let the JIT see the path). */
const REHEARSALS = 3

/** Ends the transaction of a rehearsed submit: it is rolled back, always. */
class RolledBack extends Data.TaggedError("RolledBack") {}

/** A run to rehearse the submit on. */
export interface WarmSample {
  readonly orgId: string
  readonly traceId: string
  readonly correction: JsonObject | undefined
}

/** What the warm-up may take of a start: at most `WARM_TIMEOUT_MS`; a failure is logged and the start goes on. */
const bounded = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  effect.pipe(
    Effect.timeout(Duration.millis(WARM_TIMEOUT_MS)),
    Effect.catchCause((cause) =>
      Effect.as(Effect.logWarning("feedback warm-up at start did not finish", cause), undefined)
    )
  )

const TaskRows = rowsOf(
  "tasks",
  Schema.Struct({ id: Schema.String, org_id: Schema.String, answer_schema: Schema.Unknown, fingerprint: Schema.String })
)

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
    yield* Schema.decodeUnknownEffect(SubmitFeedback)({
      inference_log_id: SAMPLE_TRACE,
      score: -1,
      correction: { a: [1, "b"] }
    })
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
          known: {
            org: entry.orgId,
            fingerprint: entry.fingerprint,
            known: { keyHashes: [...entry.known.keyHashes], values: entry.known.values }
          },
          root: "correction"
        })
      )
    }
    const newest = tasks[0]
    if (newest === undefined) return undefined
    const run = yield* SampleRows.one(sql`
      SELECT org_id, trace_id, CASE WHEN octet_length(answer::text) <= ${REHEARSED_ANSWER_BYTES} THEN answer END AS answer
      FROM runs WHERE task_id = ${newest.id} ORDER BY seq DESC LIMIT 1
    `)
    if (run === undefined) return undefined
    const answer = run.answer
    const correction = typeof answer === "object" && answer !== null && !Array.isArray(answer)
      ? answer as JsonObject
      : undefined
    return { orgId: run.org_id, traceId: run.trace_id, correction } satisfies WarmSample
  }).pipe(bounded)

/**
 * The submit itself, for `sample`'s run with its own answer as the
 * correction, `REHEARSALS` times, each in a transaction that is rolled
 * back and with tracing off: the quota, the run, the credentials, the
 * workers' check and scrub, the INSERT and its row run once before a
 * client's request does (on the embedded database the first write to the
 * table and its indexes is most of what the first correction waited for).
 * Nothing stays: no row, no usage, no span; the identity column `seq`
 * skips a value, as after any failed INSERT; this process's usage hint
 * counts the rehearsed bytes for at most its two seconds (a hint never
 * refuses a record on its own).
 */
export const rehearseSubmit = (
  sql: SqlClient.SqlClient,
  sample: WarmSample,
  submit: (orgId: string, input: typeof SubmitFeedback.Type, usedBytes: number) => Effect.Effect<unknown, unknown>
) =>
  Effect.gen(function*() {
    const input: typeof SubmitFeedback.Type = sample.correction === undefined
      ? { inference_log_id: sample.traceId, score: -1 }
      : { inference_log_id: sample.traceId, score: -1, correction: sample.correction }
    for (let pass = 0; pass < REHEARSALS; pass++) {
      yield* sql.withTransaction(
        Effect.andThen(Effect.exit(submit(sample.orgId, input, 0)), Effect.fail(new RolledBack()))
      ).pipe(
        Effect.catchTag("RolledBack", () => Effect.void)
      )
    }
  }).pipe(Effect.withTracerEnabled(false), bounded)
