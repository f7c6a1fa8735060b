/**
 * Feedback on logged task answers: submission (shape check, then removal of
 * protected values: `Corrections.ts`; the quota: `Quota.ts`), review and
 * promotion of the staged corrections into the task's next dataset version
 * (`Promotion.ts`).
 */
import { PgClient } from "@effect/sql-pg"
import { Cache, Clock, Context, Duration, Effect, Exit, Layer, Schema } from "effect"
import {
  CorrectionTooComplex,
  InvalidRequest,
  InvalidTransition,
  LimitReached,
  NotFound,
  RateLimited
} from "../api/Errors.ts"
import {
  CorrectionContainsSecret,
  CorrectionShapeMismatch,
  DatasetBaseChanged,
  FeedbackChanged,
  type FeedbackItem,
  NothingStaged,
  type Promote,
  type Promoted,
  type PromotePreview,
  type SubmitFeedback
} from "../api/Feedback.ts"
import { Identity } from "../identity/Identity.ts"
import { SvcConfig } from "../platform/Config.ts"
import { SecretBox } from "../platform/Crypto.ts"
import type { PageRequest } from "../platform/Cursor.ts"
import { newId } from "../platform/Ids.ts"
import { siblingModule } from "../platform/ModuleUrl.ts"
import { Stale, whileStale } from "../platform/Optimistic.ts"
import { rowsOf } from "../platform/Rows.ts"
import { makeWorkerPool } from "../platform/WorkerPool.ts"
import { SecretStore } from "../secrets/SecretStore.ts"
import {
  CACHE_LIMIT,
  type CorrectionPool,
  type CredentialEntry,
  type JsonObject,
  makeCorrections,
  phaseTimeoutsOf
} from "./Corrections.ts"
import { feedbackInsert } from "./InsertStatement.ts"
import { type ListRequest, makeReview, toItem } from "./Promotion.ts"
import { feedbackBytes, makeQuota } from "./Quota.ts"
import { rehearseSubmit, warmStart } from "./WarmStart.ts"

const RunRows = rowsOf("runs", Schema.Struct({ task_id: Schema.String }))
/** Attempts of one submission that may find the cached credentials out of date (they changed meanwhile each time). */
const MAX_ATTEMPTS = 6
const runNotFound = () => new NotFound({ detail: "No logged run of this organization has this inference_log_id." })

export class Feedback extends Context.Service<Feedback, {
  readonly submit: (
    orgId: string,
    input: typeof SubmitFeedback.Type,
    usedBytes?: number
  ) => Effect.Effect<
    FeedbackItem,
    NotFound | CorrectionShapeMismatch | CorrectionContainsSecret | CorrectionTooComplex | LimitReached
  >
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
  readonly preview: (
    orgId: string,
    taskId: string,
    request: PageRequest
  ) => Effect.Effect<typeof PromotePreview.Type, NotFound | InvalidRequest>
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
      const clock = yield* Clock.Clock
      const pool = yield* Effect.acquireRelease(
        Effect.sync((): CorrectionPool =>
          makeWorkerPool(
            siblingModule("./correction-worker.ts", import.meta.url),
            { cacheEntries: config.answerValidationCacheEntries },
            {
              clock,
              workers: config.answerValidationWorkers,
              timeoutMs: config.answerValidationTimeoutMs,
              phaseTimeoutsMs: phaseTimeoutsOf(config),
              heapMb: config.answerValidationHeapMb,
              queueCapacity: config.answerValidationQueue
            }
          )
        ),
        (pool) => Effect.sync(pool.close)
      )
      const corrections = yield* makeCorrections({
        sql,
        pool,
        config,
        identity: yield* Identity,
        secrets: yield* SecretStore
      })
      const quota = makeQuota(sql, config)
      const review = makeReview(sql, box, config)

      // A run never changes once logged: which task it belongs to is kept
      // (a run not found is not). The task's schema is not kept here: the
      // validation workers hold compiled validators (bounded) and ask for a
      // schema only when they do not hold its task's.
      const runs = yield* Cache.makeWith((key: string) => {
        const at = key.indexOf(" ")
        return RunRows.one(
          sql`SELECT task_id FROM runs WHERE trace_id = ${key.slice(at + 1)} AND org_id = ${key.slice(0, at)}`
        ).pipe(
          Effect.flatMap((row) => row === undefined ? Effect.fail(runNotFound()) : Effect.succeed(row.task_id))
        )
      }, { capacity: CACHE_LIMIT, timeToLive: (exit) => Exit.isSuccess(exit) ? Duration.infinity : Duration.zero })

      /**
       * Inserts the row (the organization's stored bytes are checked and
       * counted in the same statement, `SVC_MAX_FEEDBACK_BYTES_PER_ORG`).
       * When nothing was inserted, fails with why: the quota, credentials
       * changed since `known` was loaded (`Stale`), or the run is gone.
       */
      const insert = Effect.fnUntraced(function*(
        orgId: string,
        input: typeof SubmitFeedback.Type,
        corrected:
          | { readonly value: JsonObject; readonly text: string; readonly fields: ReadonlyArray<string> }
          | undefined,
        known: CredentialEntry | undefined
      ) {
        const text = corrected?.text ?? null
        const redacted = corrected?.fields ?? []
        const bytes = feedbackBytes(text)
        const id = newId()
        const status = corrected === undefined ? "recorded" : "pending"
        // The new row's columns are those sent; the INSERT returns the rest.
        const row = yield* feedbackInsert(sql, {
          id,
          orgId,
          score: input.score,
          text,
          redacted,
          status,
          inferenceLogId: input.inference_log_id,
          fingerprint: known?.fingerprint ?? null,
          bytes,
          maxBytes: config.maxFeedbackBytesPerOrg
        })
        if (row !== undefined) {
          quota.stored(orgId, bytes)
          return toItem({
            id,
            inference_log_id: input.inference_log_id,
            task_id: row.task_id,
            score: input.score,
            correction: corrected?.value ?? null,
            redacted_fields: redacted.length === 0 ? null : redacted,
            status,
            created_at: row.created_at
          })
        }
        yield* quota.check(orgId, bytes)
        if (known !== undefined && (yield* corrections.moved(known))) {
          return yield* new Stale({ what: "the organization's credentials" })
        }
        yield* Cache.invalidate(runs, `${orgId} ${input.inference_log_id}`)
        return yield* runNotFound()
      })

      // The span without `Effect.fn`'s call-site stack capture: this runs on every POST.
      const submit = Effect.fnUntraced(function*(orgId: string, input: typeof SubmitFeedback.Type, usedBytes?: number) {
        // The quota, before anything else is done with the correction: the
        // organization's bytes as read before the body (`FeedbackQuota`), or
        // now, and the correction's JSON as sent. The INSERT checks again.
        const sent = input.correction === undefined ? null : JSON.stringify(input.correction)
        if (sent !== null) yield* quota.weigh(orgId, usedBytes ?? (yield* quota.usage(orgId)), feedbackBytes(sent))
        // The run, read once.
        const taskId = yield* Cache.get(runs, `${orgId} ${input.inference_log_id}`)
        yield* Effect.annotateCurrentSpan({ "svc.task_id": taskId })
        // Optimistic: checked and scrubbed with the cached credentials, and
        // inserted only while their fingerprint holds; otherwise again with
        // the credentials as they are now. The correction goes as its JSON
        // text, already made for the worker.
        return yield* whileStale(
          MAX_ATTEMPTS,
          Effect.gen(function*() {
            if (input.correction === undefined || sent === null) {
              return yield* insert(orgId, input, undefined, undefined)
            }
            const known = yield* corrections.credentials(orgId)
            const corrected = yield* corrections.correct(orgId, taskId, input.correction, sent, known)
            return yield* insert(orgId, input, corrected, known)
          })
        )
      }, Effect.withSpan("Feedback.submit", undefined, { captureStackTrace: false }))

      // Started with the server, before it listens: the first correction
      // after a start then takes what later ones take, not the seconds the
      // workers need to load nor the first run of the submit's code.
      if (config.warmStart) {
        yield* Effect.promise(pool.warm)
        const sample = yield* warmStart({
          sql,
          pool,
          corrections,
          quota,
          cacheEntries: config.answerValidationCacheEntries
        })
        if (sample !== undefined) yield* rehearseSubmit(sql, sample, submit)
      }

      return Feedback.of({
        submit,
        usage: quota.usage,
        admit: pool.admit,
        // The spans are the service's: named here, where the service is.
        list: Effect.fn("Feedback.list")(review.list),
        stage: Effect.fn("Feedback.stage")(review.stage),
        reject: Effect.fn("Feedback.reject")(review.reject),
        preview: Effect.fn("Feedback.preview")(review.preview),
        promote: Effect.fn("Feedback.promote")(review.promote)
      })
    })
  )
}
