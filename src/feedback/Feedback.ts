/**
 * Feedback on logged task answers: submission (shape check, then removal of
 * protected values: `Corrections.ts`; the quota: `Quota.ts`), review
 * (`Review.ts`), and promotion of the staged corrections into the task's
 * next dataset version (`Promotion.ts`).
 */
import { PgClient } from "@effect/sql-pg"
import { Clock, Context, Effect, Layer, Schema } from "effect"
import {
  CorrectionContainsSecret,
  CorrectionShapeMismatch,
  DatasetBaseChanged,
  type FeedbackItem,
  FeedbackChanged,
  NothingStaged,
  type Promote,
  type Promoted,
  type PromotePreview,
  type SubmitFeedback
} from "../api/Feedback.ts"
import { CorrectionTooComplex, InvalidRequest, InvalidTransition, LimitReached, NotFound, RateLimited } from "../api/Errors.ts"
import { Identity } from "../identity/Identity.ts"
import { SecretBox } from "../platform/Crypto.ts"
import type { PageRequest } from "../platform/Cursor.ts"
import { newId } from "../platform/Ids.ts"
import { rowsOf } from "../platform/Rows.ts"
import { SecretStore } from "../secrets/SecretStore.ts"
import { SvcConfig } from "../platform/Config.ts"
import { siblingModule } from "../platform/ModuleUrl.ts"
import { makeWorkerPool } from "../platform/WorkerPool.ts"
import { issues, type JsonObject, makeCorrections, phaseLimitsOf, type PoolRequest, remember } from "./Corrections.ts"
import type { CorrectionReply } from "./CorrectionWork.ts"
import { feedbackInsert } from "./InsertStatement.ts"
import { FeedbackRow, toItem } from "./Items.ts"
import { makePromotion } from "./Promotion.ts"
import { feedbackBytes, makeQuota } from "./Quota.ts"
import { usageShard } from "../platform/OrgLimits.ts"
import { type ListRequest, makeReview } from "./Review.ts"
import { warmStart } from "./WarmStart.ts"

// A new row's columns but the correction and the redacted fields: the
// INSERT already holds them (sending them back would parse and decode the
// correction once more per submission).
const InsertedRow = FeedbackRow.mapFields(({ correction: _c, redacted_fields: _r, ...rest }) => rest)
const InsertedRows = rowsOf("feedback", InsertedRow)
const RunRows = rowsOf("runs", Schema.Struct({ task_id: Schema.String, fingerprint: Schema.String }))

export class Feedback extends Context.Service<Feedback, {
  readonly submit: (orgId: string, input: typeof SubmitFeedback.Type, usedBytes?: number) => Effect.Effect<FeedbackItem, NotFound | CorrectionShapeMismatch | CorrectionContainsSecret | CorrectionTooComplex | LimitReached>
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
  readonly preview: (orgId: string, taskId: string, request: PageRequest) => Effect.Effect<typeof PromotePreview.Type, NotFound | InvalidRequest>
  readonly promote: (orgId: string, taskId: string, input: typeof Promote.Type) => Effect.Effect<
    typeof Promoted.Type,
    NotFound | DatasetBaseChanged | FeedbackChanged | NothingStaged | LimitReached | RateLimited
  >
}>()("svc/feedback/Feedback") {
  static readonly layer = Layer.effect(
    Feedback,
    Effect.gen(function*() {
      const sql = yield* PgClient.PgClient
      const box = yield* SecretBox
      const config = yield* SvcConfig
      const phaseLimits = phaseLimitsOf(config)
      const clock = yield* Clock.Clock
      const pool = yield* Effect.acquireRelease(
        Effect.sync(() =>
          makeWorkerPool<PoolRequest, CorrectionReply>(
            siblingModule("./correction-worker.ts", import.meta.url),
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
      // Started with the server, before it listens: the first correction
      // after a start then takes what later ones take, not the seconds the
      // workers need to load.
      yield* Effect.promise(pool.warm)
      const corrections = makeCorrections({ sql, pool, config, identity: yield* Identity, secrets: yield* SecretStore })
      const quota = makeQuota(sql, config)
      yield* warmStart({ sql, pool, corrections, quota, cacheEntries: config.answerValidationCacheEntries })
      const review = makeReview(sql, box)
      const promotion = makePromotion(sql, box, config)

      // A run never changes once logged: cache which task it belongs to.
      // The task's schema is not kept here: the validation workers hold
      // compiled validators (bounded) and ask for a schema only when they
      // do not hold its task's.
      interface RunContext {
        readonly task_id: string
      }
      const runCache = new Map<string, RunContext>()
      // The fingerprint is the version of the organization's known
      // credentials (API keys and secret store values), moved by triggers on
      // every change of either (migration 0550). Revocation and expiry do
      // not move it: revoked keys and expired secrets are scrubbed too.
      const lookupRun = (orgId: string, traceId: string) =>
        RunRows.one(sql`
          SELECT r.task_id, (SELECT credentials_version::text FROM orgs WHERE id = ${orgId}) AS fingerprint
          FROM runs r
          WHERE r.trace_id = ${traceId} AND r.org_id = ${orgId}
        `).pipe(
          Effect.flatMap((row) => {
            if (row === undefined) return Effect.fail(new NotFound({ detail: "No logged run of this organization has this inference_log_id." }))
            remember(runCache, `${orgId}:${traceId}`, { task_id: row.task_id })
            return Effect.succeed(row)
          })
        )

      // The span without `Effect.fn`'s call-site stack capture: this runs on every POST.
      const submit = Effect.fnUntraced(function*(orgId: string, input: typeof SubmitFeedback.Type, usedBytes?: number) {
        // Refused before anything else is done with the correction: the
        // organization's bytes as read before the body (`FeedbackQuota`), or
        // now, and the correction's JSON as sent. The INSERT checks again.
        const sent = input.correction === undefined ? null : JSON.stringify(input.correction)
        if (sent !== null) yield* quota.weigh(orgId, usedBytes ?? (yield* quota.usage(orgId)), feedbackBytes(sent))
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
        const checkQuota = (text: string | null) => quota.check(orgId, feedbackBytes(text))

        if (input.correction === undefined) {
          const row = yield* insert(null, null, [], null)
          if (row !== undefined) quota.stored(orgId, feedbackBytes(null))
          if (row === undefined) yield* checkQuota(null)
          if (row === undefined) return yield* new NotFound({ detail: "No logged run of this organization has this inference_log_id." })
          return toItem(row)
        }

        // Optimistic: check and scrub with the cached credentials and insert
        // only if their fingerprint still holds; otherwise reload and try again.
        for (let attempt = 0;; attempt++) {
          let entry = corrections.cached(orgId)
          if (entry === undefined || (fresh !== undefined && entry.fingerprint !== fresh.fingerprint)) {
            if (fresh === undefined) fresh = yield* lookupRun(orgId, input.inference_log_id)
            entry = yield* corrections.loadCredentials(orgId, fresh.fingerprint)
          }
          const corrected = yield* corrections.correct(orgId, run.task_id, input.correction, sent!, entry)
          if (corrected._tag === "Mismatch") {
            // A member name in a path can itself be a pasted secret (e.g. under
            // `additionalProperties: false`): the problem never repeats one.
            if (fresh === undefined) fresh = yield* lookupRun(orgId, input.inference_log_id)
            const current = yield* corrections.credentialsAt(orgId, fresh.fingerprint)
            const all = (yield* corrections.scrub(orgId, issues(corrected.violations), current)).value as ReturnType<typeof issues>
            return yield* new CorrectionShapeMismatch({ field: all[0]!.field, errors: all, detail: `${all[0]!.field} ${all[0]!.message}` })
          }
          const row = yield* insert(corrected.value, corrected.text, corrected.fields, entry.fingerprint)
          if (row !== undefined) {
            quota.stored(orgId, feedbackBytes(corrected.text))
            return toItem(row)
          }
          yield* checkQuota(corrected.text)
          if (attempt >= 5) return yield* Effect.die(new Error("organization credentials kept changing during feedback submission"))
          // The fingerprint moved (or the run is gone: lookupRun says 404).
          fresh = yield* lookupRun(orgId, input.inference_log_id)
        }
      }, Effect.withSpan("Feedback.submit", undefined, { captureStackTrace: false }))

      return Feedback.of({
        submit,
        usage: quota.usage,
        admit: pool.admit,
        // The spans are the service's: named here, where the service is.
        list: Effect.fn("Feedback.list")(review.list),
        stage: Effect.fn("Feedback.stage")(review.stage),
        reject: Effect.fn("Feedback.reject")(review.reject),
        preview: Effect.fn("Feedback.preview")(promotion.preview),
        promote: Effect.fn("Feedback.promote")(promotion.promote)
      })
    })
  )
}
