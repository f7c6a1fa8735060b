/**
 * Feedback on logged task answers: submission (shape check, then removal of
 * protected values), review (stage / reject), and promotion of the staged
 * corrections into the task's next dataset version.
 *
 * The revision of a task's staged set is a digest of the staged ids. A
 * correction only leaves `staged` by being promoted, and promotion also
 * creates a new dataset version, so together with `base_dataset_id` the
 * digest can never come back to an earlier value meaning something else.
 */
import { PgClient } from "@effect/sql-pg"
import { Clock, Context, Effect, Layer, Option, Schema } from "effect"
import {
  CorrectionContainsSecret,
  CorrectionShapeMismatch,
  DatasetBaseChanged,
  type FeedbackItem,
  FeedbackChanged,
  FeedbackStatus,
  NothingStaged
} from "../api/Feedback.ts"
import { CorrectionTooComplex, InvalidRequest, InvalidTransition, LimitReached, NotFound, RateLimited } from "../api/Errors.ts"
import { Identity } from "../identity/Identity.ts"
import { SecretBox, sha256Hex } from "../platform/Crypto.ts"
import { type CursorScope, encodeCursor, page, seqBound } from "../platform/Cursor.ts"
import { newId } from "../platform/Ids.ts"
import { BigIntText, JsonColumn, rowsOf, Timestamp } from "../platform/Rows.ts"
import { SecretStore } from "../secrets/SecretStore.ts"
import type { SchemaViolation } from "../tasks/AnswerSchema.ts"
import { Redacted } from "effect"
import { SqlError } from "effect/sql"
import { SvcConfig } from "../platform/Config.ts"
import { makeWorkerPool, runInPool } from "../platform/WorkerPool.ts"
import { type CorrectionReply, type CorrectionRequest, type KnownRef, PHASE_CHECK, PHASE_SCRUB } from "./CorrectionWork.ts"
import { type Json, type KnownCredentials, REDACTION_MARKER } from "./Scrubber.ts"
import { feedbackInsert } from "./InsertStatement.ts"
import { UsageHints } from "./UsageHint.ts"

type JsonObject = { readonly [key: string]: Json }

/** An organization's known credentials, labelled with the fingerprint read before they were loaded. */
interface CredentialEntry {
  readonly orgId: string
  readonly fingerprint: string
  readonly known: KnownCredentials
}

type DistributiveOmit<T, K extends PropertyKey> = T extends unknown ? Omit<T, K> : never

const FeedbackRow = Schema.Struct({
  id: Schema.String,
  seq: BigIntText,
  task_id: Schema.String,
  inference_log_id: Schema.String,
  score: Schema.Number,
  correction: Schema.NullOr(JsonColumn(Schema.Record(Schema.String, Schema.Json))),
  redacted_fields: Schema.NullOr(JsonColumn(Schema.Array(Schema.String))),
  status: FeedbackStatus,
  created_at: Timestamp
})
type FeedbackRow = typeof FeedbackRow.Type
const FeedbackRows = rowsOf("feedback", FeedbackRow)
// A new row's columns but the correction and the redacted fields: the
// INSERT already holds them (sending them back would parse and decode the
// correction once more per submission).
const InsertedRow = FeedbackRow.mapFields(({ correction: _c, redacted_fields: _r, ...rest }) => rest)
const InsertedRows = rowsOf("feedback", InsertedRow)
const StatusRows = rowsOf("feedback", Schema.Struct({ status: FeedbackStatus }))
const RunRows = rowsOf("runs", Schema.Struct({ task_id: Schema.String, fingerprint: Schema.String }))
const SchemaRows = rowsOf("tasks", Schema.Struct({ answer_schema: JsonColumn(Schema.Unknown) }))
const TaskRows = rowsOf("tasks", Schema.Struct({ id: Schema.String }))
const DatasetRows = rowsOf("datasets", Schema.Struct({
  id: Schema.String,
  version: Schema.Number,
  example_count: Schema.Number,
  lineage_id: Schema.String
}))
const IdRows = rowsOf("feedback", Schema.Struct({ id: Schema.String }))
const UsageRows = rowsOf("org_feedback_usage", Schema.Struct({ bytes: BigIntText }))
const WaitRows = rowsOf("org_rate_limits", Schema.Struct({ seconds: BigIntText }))

const COLUMNS = "id, seq, task_id, inference_log_id, score, correction, redacted_fields, status, created_at"

export const REDACTION_MESSAGE =
  "Protected values (credentials or recognizable secrets) were removed from these fields of the correction before it was saved."

const toItem = (row: FeedbackRow): FeedbackItem => ({
  id: row.id,
  inference_log_id: row.inference_log_id,
  task_id: row.task_id,
  score: row.score,
  correction: row.correction as FeedbackItem["correction"],
  status: row.status,
  created_at: row.created_at,
  ...(row.redacted_fields !== null && row.redacted_fields.length > 0
    ? { redaction_warning: { fields: row.redacted_fields, message: REDACTION_MESSAGE } }
    : {})
})

/** A violation's path inside the request body: `correction.items[2].price`. */
const correctionPath = (path: string) => path === "" ? "correction" : path.startsWith("[") ? `correction${path}` : `correction.${path}`

const issues = (violations: ReadonlyArray<SchemaViolation>) =>
  violations.map((v) => ({ field: correctionPath(v.path), message: v.message }))

/** What one feedback record counts against `SVC_MAX_FEEDBACK_BYTES_PER_ORG`: the record, and its correction's JSON. */
export const FEEDBACK_RECORD_BYTES = 256
/** How long this process weighs the feedback quota on the usage it last read (`UsageHint.ts`). */
const USAGE_HINT_MS = 2_000
const feedbackBytes = (text: string | null) => FEEDBACK_RECORD_BYTES + (text === null ? 0 : Buffer.byteLength(text, "utf8"))
/** The usage row a submission adds to (migration 0631): spread so one organization's writers seldom wait on one row. */
const usageShard = () => Math.floor(Math.random() * 16)

/** The revision of a staged set: a digest of its ids (order-independent). */
export const revisionOf = (ids: ReadonlyArray<string>) => sha256Hex([...ids].sort().join(",")).slice(0, 32)

export interface PageRequest {
  readonly limit?: number | undefined
  readonly cursor?: string | undefined
}

export interface ListRequest {
  readonly task_id?: string | undefined
  readonly status?: FeedbackStatus | undefined
  readonly limit?: number | undefined
  readonly cursor?: string | undefined
}

export class Feedback extends Context.Service<Feedback, {
  readonly submit: (orgId: string, input: {
    readonly inference_log_id: string
    readonly score: number
    readonly correction?: JsonObject | undefined
  }, usedBytes?: number) => Effect.Effect<FeedbackItem, NotFound | CorrectionShapeMismatch | CorrectionContainsSecret | CorrectionTooComplex | LimitReached>
  /**
   * The organization's stored feedback bytes; fails with the quota's
   * problem when even a bare score would pass `SVC_MAX_FEEDBACK_BYTES_PER_ORG`.
   */
  readonly usage: (orgId: string) => Effect.Effect<number, LimitReached>
  /**
   * One admission of `orgId` to the correction workers (see `WorkerPool`):
   * call the answer once the request is done; `undefined` when the queue is
   * full and the organization holds at least its share.
   */
  readonly admit: (orgId: string) => (() => void) | undefined
  readonly list: (orgId: string, request: ListRequest) => Effect.Effect<
    { readonly feedback: ReadonlyArray<FeedbackItem>; readonly next_cursor: string | null },
    InvalidRequest
  >
  readonly stage: (orgId: string, feedbackId: string) => Effect.Effect<FeedbackItem, NotFound | InvalidTransition>
  readonly reject: (orgId: string, feedbackId: string) => Effect.Effect<FeedbackItem, NotFound | InvalidTransition>
  readonly preview: (orgId: string, taskId: string, request: PageRequest) => Effect.Effect<{
    readonly base_dataset_id: string
    readonly expected_feedback_revision: string
    readonly staged: ReadonlyArray<FeedbackItem>
    readonly staged_count: number
    readonly next_cursor: string | null
  }, NotFound | InvalidRequest>
  readonly promote: (orgId: string, taskId: string, input: {
    readonly base_dataset_id: string
    readonly expected_feedback_revision: string
  }) => Effect.Effect<
    { readonly dataset_id: string; readonly version: number; readonly promoted_count: number },
    NotFound | DatasetBaseChanged | FeedbackChanged | NothingStaged | LimitReached | RateLimited
  >
}>()("svc/feedback/Feedback") {
  static readonly layer = Layer.effect(
    Feedback,
    Effect.gen(function*() {
      const sql = yield* PgClient.PgClient
      const box = yield* SecretBox
      const identity = yield* Identity
      const secrets = yield* SecretStore
      const config = yield* SvcConfig

      // Checking a correction against its task's schema and removing
      // protected values from it cost too much to run on the event loop
      // for a hostile schema or a correction near the body limit: both run
      // in workers, in one round trip, with a deadline per phase and
      // per-organization turns (`correction-worker.ts`, `WorkerPool.ts`).
      const phaseLimits = [
        { limit: "SVC_ANSWER_VALIDATION_TIMEOUT", value: config.answerValidationTimeoutMs, what: "checking the correction against the answer schema" },
        { limit: "SVC_SCRUB_TIMEOUT", value: config.scrubTimeoutMs, what: "removing protected values from the correction" },
        { limit: "SVC_ANSWER_VALIDATION_TIMEOUT", value: config.answerValidationTimeoutMs, what: "checking the scrubbed correction against the answer schema" }
      ]
      const clock = yield* Clock.Clock
      const pool = yield* Effect.acquireRelease(
        Effect.sync(() =>
          makeWorkerPool<DistributiveOmit<CorrectionRequest, "id">, CorrectionReply>(
            new URL("./correction-worker.ts", import.meta.url),
            { cacheEntries: config.answerValidationCacheEntries },
            {
              clock,
              workers: config.answerValidationWorkers,
              timeoutMs: config.answerValidationTimeoutMs,
              phaseTimeoutsMs: phaseLimits.map((phase) => phase.value),
              heapMb: config.answerValidationHeapMb,
              queueCapacity: config.answerValidationQueue
            }
          )
        ),
        (pool) => Effect.sync(pool.close)
      )
      /** A request to the workers; over a deadline or the heap, the 422 naming the limit. */
      const inPool = (orgId: string, request: DistributiveOmit<CorrectionRequest, "id">, phase: number) =>
        runInPool(pool, orgId, request, phase).pipe(
          Effect.flatMap((outcome): Effect.Effect<CorrectionReply, CorrectionTooComplex> => {
            if (outcome._tag === "Reply") {
              const reply = outcome.reply
              return reply._tag === "Failed" ? Effect.die(new Error(`correction check failed: ${reply.message}`)) : Effect.succeed(reply)
            }
            if (outcome._tag === "Crashed" && outcome.outOfMemory) {
              return Effect.fail(new CorrectionTooComplex({
                field: "correction",
                limit: "SVC_ANSWER_VALIDATION_HEAP_MB",
                limit_value: config.answerValidationHeapMb,
                detail: `checking the correction needed more than ${config.answerValidationHeapMb} MB (SVC_ANSWER_VALIDATION_HEAP_MB); send a smaller correction or simplify the answer schema.`
              }))
            }
            const over = phaseLimits[outcome._tag === "Timeout" ? outcome.phase : PHASE_CHECK] ?? phaseLimits[PHASE_CHECK]!
            return Effect.fail(new CorrectionTooComplex({
              field: "correction",
              limit: over.limit,
              limit_value: over.value,
              detail: `${over.what} took longer than ${over.value} ms (${over.limit}); send a smaller correction or simplify the answer schema.`
            }))
          })
        )
      /** The credentials as sent to a worker that does not hold them (once per worker and fingerprint). */
      const wireKnown = (entry: CredentialEntry): KnownRef => ({
        org: entry.orgId,
        fingerprint: entry.fingerprint,
        known: { keyHashes: [...entry.known.keyHashes], values: entry.known.values }
      })
      const knownRef = (entry: CredentialEntry): KnownRef => ({ org: entry.orgId, fingerprint: entry.fingerprint })
      const scrub = (orgId: string, document: Json, entry: CredentialEntry) =>
        inPool(orgId, { op: "scrub", document, known: knownRef(entry), root: "" }, PHASE_SCRUB).pipe(
          Effect.flatMap((reply) =>
            reply._tag === "Missing"
              ? inPool(orgId, { op: "scrub", document, known: wireKnown(entry), root: "" }, PHASE_SCRUB)
              : Effect.succeed(reply)
          ),
          Effect.flatMap((reply) =>
            reply._tag === "Scrubbed" ? Effect.succeed(reply) : Effect.die(new Error(`unexpected scrub answer: ${reply._tag}`))
          )
        )

      // The version of an organization's known credentials (API keys and
      // secret store values), moved by triggers on every change of either
      // (migration 0550). Revocation and expiry do not move it: revoked keys
      // and expired secrets are scrubbed too.
      const credentialsVersionSql = (orgId: string) => sql`(SELECT credentials_version::text FROM orgs WHERE id = ${orgId})`
      const usedBytesSql = (orgId: string) => sql`(SELECT coalesce(sum(bytes), 0) FROM org_feedback_usage WHERE org_id = ${orgId})`
      /** The quota's problem when `bytes` more would pass it. */
      const overQuota = (used: number | string, bytes: number) =>
        Number(used) + bytes > config.maxFeedbackBytesPerOrg
          ? Effect.fail(new LimitReached({
            limit: "SVC_MAX_FEEDBACK_BYTES_PER_ORG",
            limit_value: config.maxFeedbackBytesPerOrg,
            detail: `The organization's feedback holds ${used} bytes; this one (${bytes} bytes) would pass the ${config.maxFeedbackBytesPerOrg} allowed (SVC_MAX_FEEDBACK_BYTES_PER_ORG).`
          }))
          : Effect.void
      const hints = new UsageHints(USAGE_HINT_MS)
      /** The organization's usage as read now (and remembered as a hint). */
      const readUsage = (orgId: string) =>
        Effect.flatMap(
          UsageRows.one(sql`SELECT ${usedBytesSql(orgId)} AS bytes`).pipe(Effect.orDie),
          (row) =>
            Effect.map(Clock.currentTimeMillis, (now) => {
              const bytes = Number(row?.bytes ?? 0)
              hints.read(orgId, bytes, now)
              return bytes
            })
        )
      /**
       * Refused only on a fresh read: a hint that says `bytes` more would
       * pass the quota is read again first.
       */
      const weigh = (orgId: string, used: number, bytes: number) =>
        used + bytes <= config.maxFeedbackBytesPerOrg
          ? Effect.void
          : Effect.flatMap(readUsage(orgId), (fresh) => overQuota(fresh, bytes))
      const usage = (orgId: string) =>
        Effect.flatMap(Clock.currentTimeMillis, (now) => {
          const hinted = hints.get(orgId, now)
          const used = hinted === undefined ? readUsage(orgId) : Effect.succeed(hinted)
          return Effect.tap(used, (bytes) => weigh(orgId, bytes, FEEDBACK_RECORD_BYTES))
        })

      // Known credentials per organization, labelled with the fingerprint
      // read BEFORE they were loaded (a label never claims more than the
      // content holds). The INSERT only happens while the fingerprint still
      // matches (see `submit`), so a key or secret created a moment ago, by
      // this process or another, is always scrubbed.
      const credentialCache = new Map<string, CredentialEntry>()
      const CACHE_LIMIT = 1000
      const remember = <V>(map: Map<string, V>, key: string, value: V) => {
        map.delete(key)
        if (map.size >= CACHE_LIMIT) map.delete(map.keys().next().value!)
        map.set(key, value)
      }
      const loadCredentials = Effect.fn("Feedback.loadCredentials")(function*(orgId: string, fingerprint: string) {
        const [keyHashes, values] = yield* Effect.all([identity.keyHashes(orgId), secrets.orgValues(orgId)], {
          concurrency: "unbounded"
        })
        const entry: CredentialEntry = { orgId, fingerprint, known: { keyHashes, values: values.map(Redacted.value) } }
        remember(credentialCache, orgId, entry)
        return entry
      })

      // A run never changes once logged: cache which task it belongs to.
      // The task's schema is not kept here: the validation workers hold
      // compiled validators (bounded) and ask for a schema only when they
      // do not hold its task's.
      interface RunContext {
        readonly task_id: string
      }
      const runCache = new Map<string, RunContext>()
      const lookupRun = (orgId: string, traceId: string) =>
        RunRows.one(sql`
          SELECT r.task_id, ${credentialsVersionSql(orgId)} AS fingerprint
          FROM runs r
          WHERE r.trace_id = ${traceId} AND r.org_id = ${orgId}
        `).pipe(
          Effect.flatMap((row) => {
            if (row === undefined) return Effect.fail(new NotFound({ detail: "No logged run of this organization has this inference_log_id." }))
            remember(runCache, `${orgId}:${traceId}`, { task_id: row.task_id })
            return Effect.succeed(row)
          })
        )

      const answerSchema = (taskId: string) =>
        SchemaRows.one(sql`SELECT answer_schema FROM tasks WHERE id = ${taskId}`).pipe(
          Effect.flatMap((row) =>
            row === undefined ? Effect.die(new Error("the task of a logged run is gone")) : Effect.succeed(row.answer_schema)
          )
        )

      /**
       * Checks the correction against the task's schema, scrubs it and, when
       * scrubbing changed it, checks it again: one round trip to a worker
       * (two when the worker must be sent the schema).
       */
      const correct = Effect.fnUntraced(function*(orgId: string, run: RunContext, correction: JsonObject, text: string, entry: CredentialEntry) {
        const request = { op: "correct" as const, key: run.task_id, text, known: knownRef(entry), root: "correction" }
        let reply = yield* inPool(orgId, request, PHASE_CHECK)
        if (reply._tag === "Missing") {
          reply = yield* inPool(orgId, {
            ...request,
            ...(reply.schema ? { schema: yield* answerSchema(run.task_id) } : {}),
            ...(reply.known ? { known: wireKnown(entry) } : {})
          }, PHASE_CHECK)
        }
        if (reply._tag === "Mismatch") return { _tag: "Mismatch" as const, violations: reply.violations }
        if (reply._tag !== "Corrected") return yield* Effect.die(new Error(`unexpected correction answer: ${reply._tag}`))
        if (reply.collisions.length > 0) {
          return yield* new CorrectionContainsSecret({
            field: reply.collisions[0]!,
            errors: reply.collisions.map((field) => ({ field, message: "two member names became the same once protected values were removed" })),
            detail: `${reply.collisions[0]!}: member names hold protected values; send safe example values instead.`
          })
        }
        if (reply.after.length > 0) {
          const all = issues(reply.after)
          // Name a field the redaction touched when the schema complains about it.
          const first = all.find((issue) => reply.fields.some((f) => issue.field === f || issue.field.startsWith(f) || f.startsWith(issue.field))) ?? all[0]!
          return yield* new CorrectionContainsSecret({
            field: first.field,
            errors: all,
            detail: `${first.field} held a protected value; replaced by ${REDACTION_MARKER} it no longer fits the answer schema (${first.message}). Send a safe example value instead.`
          })
        }
        // Unchanged, the text the worker checked is the correction's JSON as stored.
        const value = (reply.value ?? correction) as JsonObject
        return { _tag: "Corrected" as const, value, text: reply.value === undefined ? request.text : JSON.stringify(value), fields: reply.fields }
      })

      // The span without `Effect.fn`'s call-site stack capture: this runs on every POST.
      const submit = Effect.fnUntraced(function*(orgId: string, input: {
        readonly inference_log_id: string
        readonly score: number
        readonly correction?: JsonObject | undefined
      }, usedBytes?: number) {
        // Refused before anything else is done with the correction: the
        // organization's bytes as read before the body (`FeedbackQuota`), or
        // now, and the correction's JSON as sent. The INSERT checks again.
        const sent = input.correction === undefined ? null : JSON.stringify(input.correction)
        if (sent !== null) yield* weigh(orgId, usedBytes ?? (yield* usage(orgId)), feedbackBytes(sent))
        let fresh: (RunContext & { fingerprint: string }) | undefined
        let run = runCache.get(`${orgId}:${input.inference_log_id}`)
        if (run === undefined) run = fresh = yield* lookupRun(orgId, input.inference_log_id)
        yield* Effect.annotateCurrentSpan({ "svc.task_id": run.task_id })

        // The correction goes as its JSON text (`text`), already made for the
        // worker: serialising it again per submission is what `sql.json` would do.
        // The organization's stored bytes are checked and counted in the same
        // statement (`SVC_MAX_FEEDBACK_BYTES_PER_ORG`, migration 0631).
        const insert = (correction: JsonObject | null, text: string | null, redacted: ReadonlyArray<string>, fingerprint: string | null) => {
          const bytes = feedbackBytes(text)
          return InsertedRows.one(feedbackInsert(sql, {
            id: newId(),
            orgId,
            score: input.score,
            text,
            redacted,
            status: correction === null ? "recorded" : "pending",
            inferenceLogId: input.inference_log_id,
            fingerprint,
            bytes,
            maxBytes: config.maxFeedbackBytesPerOrg,
            shard: usageShard()
          })).pipe(Effect.map((row) =>
            row === undefined ? undefined : { ...row, correction, redacted_fields: redacted.length === 0 ? null : redacted }
          ))
        }
        /** Fails with the quota's problem when it is what kept the row out. */
        const checkQuota = (text: string | null) =>
          UsageRows.one(sql`SELECT ${usedBytesSql(orgId)} AS bytes`).pipe(
            Effect.flatMap((row) => overQuota(row?.bytes ?? 0, feedbackBytes(text)))
          )

        if (input.correction === undefined) {
          const row = yield* insert(null, null, [], null)
          if (row !== undefined) hints.stored(orgId, feedbackBytes(null))
          if (row === undefined) yield* checkQuota(null)
          if (row === undefined) return yield* new NotFound({ detail: "No logged run of this organization has this inference_log_id." })
          return toItem(row)
        }

        // Optimistic: check and scrub with the cached credentials and insert
        // only if their fingerprint still holds; otherwise reload and try again.
        for (let attempt = 0;; attempt++) {
          let entry = credentialCache.get(orgId)
          if (entry === undefined || (fresh !== undefined && entry.fingerprint !== fresh.fingerprint)) {
            if (fresh === undefined) fresh = yield* lookupRun(orgId, input.inference_log_id)
            entry = yield* loadCredentials(orgId, fresh.fingerprint)
          }
          const corrected = yield* correct(orgId, run, input.correction, sent!, entry)
          if (corrected._tag === "Mismatch") {
            // A member name in a path can itself be a pasted secret (e.g. under
            // `additionalProperties: false`): the problem never repeats one.
            if (fresh === undefined) fresh = yield* lookupRun(orgId, input.inference_log_id)
            const cached = credentialCache.get(orgId)
            const current = cached !== undefined && cached.fingerprint === fresh.fingerprint
              ? cached
              : yield* loadCredentials(orgId, fresh.fingerprint)
            const all = (yield* scrub(orgId, issues(corrected.violations), current)).value as ReturnType<typeof issues>
            return yield* new CorrectionShapeMismatch({ field: all[0]!.field, errors: all, detail: `${all[0]!.field} ${all[0]!.message}` })
          }
          const row = yield* insert(corrected.value, corrected.text, corrected.fields, entry.fingerprint)
          if (row !== undefined) {
            hints.stored(orgId, feedbackBytes(corrected.text))
            return toItem(row)
          }
          yield* checkQuota(corrected.text)
          if (attempt >= 5) return yield* Effect.die(new Error("organization credentials kept changing during feedback submission"))
          // The fingerprint moved (or the run is gone: lookupRun says 404).
          fresh = yield* lookupRun(orgId, input.inference_log_id)
        }
      }, Effect.withSpan("Feedback.submit", undefined, { captureStackTrace: false }))

      const list = Effect.fn("Feedback.list")(function*(orgId: string, request: ListRequest) {
        const limit = request.limit ?? 50
        const scope: CursorScope = { orgId, list: "feedback", filters: [request.task_id, request.status] }
        const mac = (message: string) => box.mac("cursor", message)
        const below = yield* seqBound(mac, scope, request.cursor)
        const rows = yield* FeedbackRows.all(sql`
          SELECT ${sql.unsafe(COLUMNS)} FROM feedback
          WHERE org_id = ${orgId}
          ${request.task_id !== undefined ? sql`AND task_id = ${request.task_id}` : sql``}
          ${request.status !== undefined ? sql`AND status = ${request.status}` : sql``}
          ${Option.isSome(below) ? sql`AND seq < ${below.value}` : sql``}
          ORDER BY seq DESC LIMIT ${limit + 1}
        `)
        const { items, next_cursor } = page(rows, limit, (seq) => encodeCursor(mac, scope, seq))
        return { feedback: items.map(toItem), next_cursor }
      })

      const decide = Effect.fnUntraced(function*(orgId: string, feedbackId: string, to: "staged" | "rejected") {
        yield* Effect.annotateCurrentSpan({ "svc.feedback_id": feedbackId })
        const updated = yield* FeedbackRows.one(sql`
          UPDATE feedback SET status = ${to}, updated_at = now()
          WHERE id = ${feedbackId} AND org_id = ${orgId} AND status = 'pending'
          RETURNING ${sql.unsafe(COLUMNS)}
        `)
        if (updated !== undefined) return toItem(updated)
        const current = yield* StatusRows.one(sql`
          SELECT status FROM feedback WHERE id = ${feedbackId} AND org_id = ${orgId}
        `)
        if (current === undefined) return yield* new NotFound({ detail: "No such feedback." })
        return yield* new InvalidTransition({
          status_now: current.status,
          detail: current.status === "recorded"
            ? "Feedback without a correction cannot be staged or rejected."
            : `Only pending corrections can be ${to}; this one is ${current.status}.`
        })
      })

      const currentDataset = (orgId: string, taskId: string, lock: boolean) =>
        Effect.gen(function*() {
          // Locking the task row serializes promotions of one task.
          const task = yield* TaskRows.one(lock
            ? sql`SELECT id FROM tasks WHERE id = ${taskId} AND org_id = ${orgId} FOR UPDATE`
            : sql`SELECT id FROM tasks WHERE id = ${taskId} AND org_id = ${orgId}`)
          if (task === undefined) return Option.none()
          const dataset = yield* DatasetRows.one(sql`
            SELECT id, version, example_count, lineage_id FROM datasets WHERE task_id = ${taskId} ORDER BY version DESC LIMIT 1
          `)
          return Option.fromUndefinedOr(dataset)
        })

      /** The ids of the task's staged corrections, oldest first (locked, for a promote). */
      const stagedIds = (orgId: string, taskId: string, lock: boolean) =>
        IdRows.all(sql`
          SELECT id FROM feedback
          WHERE task_id = ${taskId} AND org_id = ${orgId} AND status = 'staged' ORDER BY seq
          ${lock ? sql`FOR UPDATE` : sql``}
        `).pipe(Effect.map((rows) => rows.map((row) => row.id)))

      const preview = Effect.fn("Feedback.preview")(function*(orgId: string, taskId: string, request: PageRequest) {
        yield* Effect.annotateCurrentSpan({ "svc.task_id": taskId })
        const limit = request.limit ?? 50
        const scope: CursorScope = { orgId, list: "promote_preview", filters: [taskId] }
        const mac = (message: string) => box.mac("cursor", message)
        const after = yield* seqBound(mac, scope, request.cursor)
        // One snapshot: the page, the count and the revision describe the same staged set.
        const [dataset, ids, rows] = yield* sql.withTransaction(
          sql`SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY`.pipe(
            Effect.andThen(Effect.all([
              currentDataset(orgId, taskId, false),
              stagedIds(orgId, taskId, false),
              FeedbackRows.all(sql`
                SELECT ${sql.unsafe(COLUMNS)} FROM feedback
                WHERE task_id = ${taskId} AND org_id = ${orgId} AND status = 'staged'
                ${Option.isSome(after) ? sql`AND seq > ${after.value}` : sql``}
                ORDER BY seq LIMIT ${limit + 1}`)
            ]))
          )
        ).pipe(Effect.orDie)
        if (Option.isNone(dataset)) return yield* new NotFound({ detail: "No such task." })
        const { items, next_cursor } = page(rows, limit, (seq) => encodeCursor(mac, scope, seq))
        return {
          base_dataset_id: dataset.value.id,
          expected_feedback_revision: revisionOf(ids),
          staged: items.map(toItem),
          staged_count: ids.length,
          next_cursor
        }
      })

      // The promote rate, claimed from the database so that every process
      // shares it: a generic cell rate (GCRA) per organization. `tat` is
      // when the organization's allowance is next fully spent; a promote
      // moves it one interval (a minute / the limit) later, and is allowed
      // while that stays within a minute of now. Bursts up to the limit,
      // then one per interval. The database's clock decides.
      const promoteIntervalMs = 60_000 / config.maxPromotesPerMinute
      const claimPromote = (orgId: string) =>
        Effect.gen(function*() {
          const interval = `${promoteIntervalMs} milliseconds`
          const claimed = yield* sql`
            INSERT INTO org_rate_limits AS r (org_id, name, tat)
            VALUES (${orgId}, 'promote', now() + ${interval}::interval)
            ON CONFLICT (org_id, name) DO UPDATE
              SET tat = greatest(r.tat, now()) + ${interval}::interval
              WHERE greatest(r.tat, now()) + ${interval}::interval <= now() + interval '1 minute'
            RETURNING 1
          `
          if (claimed.length > 0) return
          const [wait] = yield* WaitRows.decoded(sql`
            SELECT ceil(extract(epoch FROM greatest(tat, now()) + ${interval}::interval - now() - interval '1 minute'))::int AS seconds
            FROM org_rate_limits WHERE org_id = ${orgId} AND name = 'promote'
          `)
          const seconds = Math.max(1, Number(wait?.seconds ?? 1))
          return yield* new RateLimited({
            limit: "SVC_MAX_PROMOTES_PER_MINUTE",
            limit_value: config.maxPromotesPerMinute,
            retry_after_seconds: seconds,
            detail: `The organization promoted ${config.maxPromotesPerMinute} times within a minute, the most allowed (SVC_MAX_PROMOTES_PER_MINUTE); retry in ${seconds} s.`
          })
        })

      const promote = Effect.fn("Feedback.promote")(function*(orgId: string, taskId: string, input: {
        readonly base_dataset_id: string
        readonly expected_feedback_revision: string
      }) {
        yield* Effect.annotateCurrentSpan({ "svc.task_id": taskId })
        const result = yield* sql.withTransaction(Effect.gen(function*() {
          const dataset = yield* currentDataset(orgId, taskId, true)
          if (Option.isNone(dataset)) return yield* new NotFound({ detail: "No such task." })
          const base = dataset.value
          if (base.id !== input.base_dataset_id) {
            return yield* new DatasetBaseChanged({
              current_base_dataset_id: base.id,
              detail: "The task has a newer dataset version than the previewed one; preview again and review."
            })
          }
          const ids = yield* stagedIds(orgId, taskId, true)
          if (ids.length === 0) {
            return yield* new NothingStaged({ detail: "Stage corrections before promoting them." })
          }
          if (revisionOf(ids) !== input.expected_feedback_revision) {
            return yield* new FeedbackChanged({
              detail: "The staged corrections changed since the preview; preview again and review."
            })
          }
          const count = base.example_count + ids.length
          if (count > config.maxExamplesPerDataset) {
            return yield* new LimitReached({
              limit: "SVC_MAX_EXAMPLES_PER_DATASET",
              limit_value: config.maxExamplesPerDataset,
              detail: `The new version would have ${count} examples, more than the ${config.maxExamplesPerDataset} allowed (SVC_MAX_EXAMPLES_PER_DATASET); nothing was promoted.`
            })
          }
          yield* claimPromote(orgId)
          const datasetId = newId()
          const version = base.version + 1
          // By reference (migration 0630): the new version is its base's line
          // plus the staged rows appended to it. Nothing earlier is copied.
          yield* sql`
            INSERT INTO datasets (id, org_id, task_id, version, example_count, lineage_id)
            VALUES (${datasetId}, ${orgId}, ${taskId}, ${version}, ${count}, ${base.lineage_id})
          `
          const inserted = yield* sql`
            WITH promoted AS (
              UPDATE feedback SET status = 'promoted', promoted_dataset_id = ${datasetId}, updated_at = now()
              WHERE id = ANY(string_to_array(${ids.join(",")}, ',')::uuid[]) AND status = 'staged'
              RETURNING id, seq, inference_log_id, correction
            )
            INSERT INTO dataset_examples (lineage_id, position, dataset_id, input, answer, feedback_id)
            SELECT ${base.lineage_id}, ${base.example_count} + (row_number() OVER (ORDER BY p.seq))::int - 1, ${datasetId}, r.input, p.correction, p.id
            FROM promoted p JOIN runs r ON r.trace_id = p.inference_log_id
            RETURNING 1
          `
          if (inserted.length !== ids.length) {
            return yield* Effect.die(new Error(`promote appended ${inserted.length} examples for ${ids.length} locked staged corrections`))
          }
          return { dataset_id: datasetId, version, promoted_count: ids.length }
        })).pipe(Effect.catch((error) => SqlError.isSqlError(error) ? Effect.die(error) : Effect.fail(error)))
        yield* Effect.annotateCurrentSpan({ "svc.dataset_id": result.dataset_id, "svc.promoted_count": result.promoted_count })
        return result
      })

      const stage = Effect.fn("Feedback.stage")((orgId: string, feedbackId: string) => decide(orgId, feedbackId, "staged"))
      const reject = Effect.fn("Feedback.reject")((orgId: string, feedbackId: string) => decide(orgId, feedbackId, "rejected"))

      return Feedback.of({ submit, usage, admit: pool.admit, list, stage, reject, preview, promote })
    })
  )
}
