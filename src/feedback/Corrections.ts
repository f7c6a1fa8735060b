/**
 * A correction's trip through the correction workers: checked against its
 * task's answer schema, protected values (the organization's credentials
 * and recognizable secrets) removed, and checked again when removal changed
 * it. Both cost too much to run on the event loop for a hostile schema or a
 * correction near the body limit, so both run in workers, in one round
 * trip, with a deadline per phase and per-organization turns
 * (`correction-worker.ts`, `../platform/WorkerPool.ts`).
 */
import { Cache, Effect, Redacted, Schema } from "effect"
import type { SqlClient } from "effect/sql"
import { CorrectionTooComplex } from "../api/Errors.ts"
import { CorrectionContainsSecret, CorrectionShapeMismatch } from "../api/Feedback.ts"
import type { Identity } from "../identity/Identity.ts"
import type { SvcConfigShape } from "../platform/Config.ts"
import { JsonColumn, rowsOf } from "../platform/Rows.ts"
import { runInPool, type WorkerPool } from "../platform/WorkerPool.ts"
import type { SecretStore } from "../secrets/SecretStore.ts"
import type { SchemaViolation } from "../tasks/AnswerSchema.ts"
import {
  type CorrectionReply,
  type CorrectionRequest,
  type KnownRef,
  type Phase,
  phaseIndex,
  PHASES
} from "./CorrectionWork.ts"
import { type Json, type KnownCredentials, REDACTION_MARKER } from "./Scrubber.ts"

export type JsonObject = { readonly [key: string]: Json }

/** An organization's known credentials, labelled with the fingerprint read before they were loaded. */
export interface CredentialEntry {
  readonly orgId: string
  readonly fingerprint: string
  readonly known: KnownCredentials
}

type DistributiveOmit<T, K extends PropertyKey> = T extends unknown ? Omit<T, K> : never

type PoolRequest = DistributiveOmit<CorrectionRequest, "id">
export type CorrectionPool = WorkerPool<PoolRequest, CorrectionReply>

/** The limit each worker phase runs under (`CorrectionWork.ts`). */
const phaseLimitsOf = (config: SvcConfigShape): Record<Phase, { limit: string; value: number; what: string }> => ({
  check: {
    limit: "SVC_ANSWER_VALIDATION_TIMEOUT",
    value: config.answerValidationTimeoutMs,
    what: "checking the correction against the answer schema"
  },
  scrub: {
    limit: "SVC_SCRUB_TIMEOUT",
    value: config.scrubTimeoutMs,
    what: "removing protected values from the correction"
  },
  recheck: {
    limit: "SVC_ANSWER_VALIDATION_TIMEOUT",
    value: config.answerValidationTimeoutMs,
    what: "checking the scrubbed correction against the answer schema"
  }
})

/** The pool's deadline per phase, in the order of `PHASES`. */
export const phaseTimeoutsOf = (config: SvcConfigShape) => PHASES.map((phase) => phaseLimitsOf(config)[phase].value)

/** A violation's path inside the request body: `correction.items[2].price`. */
const correctionPath = (path: string) =>
  path === "" ? "correction" : path.startsWith("[") ? `correction${path}` : `correction.${path}`

const issues = (violations: ReadonlyArray<SchemaViolation>) =>
  violations.map((v) => ({ field: correctionPath(v.path), message: v.message }))

/** Organizations (and runs, `Feedback.ts`) whose lookups this process keeps. */
export const CACHE_LIMIT = 1000

const SchemaRows = rowsOf("tasks", Schema.Struct({ answer_schema: JsonColumn(Schema.Unknown) }))
const FingerprintRows = rowsOf("orgs", Schema.Struct({ fingerprint: Schema.String }))

export const makeCorrections = Effect.fnUntraced(function*(deps: {
  readonly sql: SqlClient.SqlClient
  readonly pool: CorrectionPool
  readonly config: SvcConfigShape
  readonly identity: Identity["Service"]
  readonly secrets: SecretStore["Service"]
}) {
  const { config, identity, pool, secrets, sql } = deps
  const phaseLimits = phaseLimitsOf(config)

  /** A request to the workers; over a deadline or the heap, the 422 naming the limit. */
  const inPool = (orgId: string, request: PoolRequest, phase: Phase) =>
    runInPool(pool, orgId, request, phaseIndex(phase)).pipe(
      Effect.flatMap((outcome): Effect.Effect<CorrectionReply, CorrectionTooComplex> => {
        if (outcome._tag === "Reply") {
          const reply = outcome.reply
          return reply._tag === "Failed"
            ? Effect.die(new Error(`correction check failed: ${reply.message}`))
            : Effect.succeed(reply)
        }
        if (outcome._tag === "Crashed" && outcome.outOfMemory) {
          return Effect.fail(
            new CorrectionTooComplex({
              field: "correction",
              limit: "SVC_ANSWER_VALIDATION_HEAP_MB",
              limit_value: config.answerValidationHeapMb,
              detail:
                `checking the correction needed more than ${config.answerValidationHeapMb} MB (SVC_ANSWER_VALIDATION_HEAP_MB); send a smaller correction or simplify the answer schema.`
            })
          )
        }
        const over = phaseLimits[outcome._tag === "Timeout" ? PHASES[outcome.phase] ?? "check" : "check"]
        return Effect.fail(
          new CorrectionTooComplex({
            field: "correction",
            limit: over.limit,
            limit_value: over.value,
            detail:
              `${over.what} took longer than ${over.value} ms (${over.limit}); send a smaller correction or simplify the answer schema.`
          })
        )
      })
    )
  /** The credentials as sent to a worker that does not hold them (once per worker and fingerprint). */
  const wireKnown = (entry: CredentialEntry): KnownRef => ({
    org: entry.orgId,
    fingerprint: entry.fingerprint,
    known: { keyHashes: [...entry.known.keyHashes], values: entry.known.values }
  })
  const knownRef = (entry: CredentialEntry): KnownRef => ({ org: entry.orgId, fingerprint: entry.fingerprint })
  const scrub = Effect.fnUntraced(function*(orgId: string, document: Json, entry: CredentialEntry) {
    const request = { op: "scrub" as const, document, known: knownRef(entry), root: "" }
    let reply = yield* inPool(orgId, request, "scrub")
    if (reply._tag === "Missing") reply = yield* inPool(orgId, { ...request, known: wireKnown(entry) }, "scrub")
    if (reply._tag !== "Scrubbed") return yield* Effect.die(new Error(`unexpected scrub answer: ${reply._tag}`))
    return reply
  })

  // The fingerprint is the version of the organization's known
  // credentials (API keys and secret store values), moved by triggers on
  // every change of either (migration 0550). Revocation and expiry do
  // not move it: revoked keys and expired secrets are scrubbed too.
  const fingerprintOf = (orgId: string) =>
    FingerprintRows.one(sql`SELECT credentials_version::text AS fingerprint FROM orgs WHERE id = ${orgId}`).pipe(
      Effect.map((row) => row?.fingerprint ?? "")
    )
  // Known credentials per organization, labelled with the fingerprint
  // read BEFORE they were loaded (a label never claims more than the
  // content holds). The INSERT only happens while the fingerprint still
  // matches (see `Feedback.submit`), so a key or secret created a moment
  // ago, by this process or another, is always scrubbed.
  const credentialCache = yield* Cache.make({
    capacity: CACHE_LIMIT,
    lookup: Effect.fn("Corrections.loadCredentials")(function*(orgId: string) {
      const fingerprint = yield* fingerprintOf(orgId)
      const [keyHashes, values] = yield* Effect.all([identity.keyHashes(orgId), secrets.orgValues(orgId)], {
        concurrency: "unbounded"
      })
      return { orgId, fingerprint, known: { keyHashes, values: values.map(Redacted.value) } } satisfies CredentialEntry
    })
  })
  /** The organization's credentials as cached, whatever their fingerprint (loaded when none are). */
  const credentials = (orgId: string) => Cache.get(credentialCache, orgId)
  /** Whether the organization's credentials changed since `entry` was loaded; if so, `entry` is forgotten. */
  const moved = (entry: CredentialEntry) =>
    Effect.flatMap(
      fingerprintOf(entry.orgId),
      (fingerprint) =>
        fingerprint === entry.fingerprint
          ? Effect.succeed(false)
          : Effect.as(Cache.invalidate(credentialCache, entry.orgId), true)
    )

  const answerSchema = (taskId: string) =>
    SchemaRows.one(sql`SELECT answer_schema FROM tasks WHERE id = ${taskId}`).pipe(
      Effect.flatMap((row) =>
        row === undefined
          ? Effect.die(new Error("the task of a logged run is gone"))
          : Effect.succeed(row.answer_schema)
      )
    )

  /** The organization's credentials as they are now. */
  const current = (orgId: string) =>
    Effect.flatMap(
      credentials(orgId),
      (entry) => Effect.flatMap(moved(entry), (m) => m ? credentials(orgId) : Effect.succeed(entry))
    )

  /**
   * Checks the correction against the task's schema, scrubs it and, when
   * scrubbing changed it, checks it again: one round trip to a worker
   * (two when the worker must be sent the schema).
   */
  const correct = Effect.fnUntraced(
    function*(orgId: string, taskId: string, correction: JsonObject, text: string, entry: CredentialEntry) {
      const request = { op: "correct" as const, key: taskId, text, known: knownRef(entry), root: "correction" }
      let reply = yield* inPool(orgId, request, "check")
      if (reply._tag === "Missing") {
        reply = yield* inPool(orgId, {
          ...request,
          ...(reply.schema ? { schema: yield* answerSchema(taskId) } : {}),
          ...(reply.known ? { known: wireKnown(entry) } : {})
        }, "check")
      }
      if (reply._tag === "Mismatch") {
        // A member name in a path can itself be a pasted secret (e.g. under
        // `additionalProperties: false`): the problem never repeats one.
        const all = (yield* scrub(orgId, issues(reply.violations), yield* current(orgId))).value as ReturnType<
          typeof issues
        >
        return yield* new CorrectionShapeMismatch({
          field: all[0]!.field,
          errors: all,
          detail: `${all[0]!.field} ${all[0]!.message}`
        })
      }
      if (reply._tag !== "Corrected") return yield* Effect.die(new Error(`unexpected correction answer: ${reply._tag}`))
      if (reply.collisions.length > 0) {
        return yield* new CorrectionContainsSecret({
          field: reply.collisions[0]!,
          errors: reply.collisions.map((field) => ({
            field,
            message: "two member names became the same once protected values were removed"
          })),
          detail: `${reply.collisions[0]!}: member names hold protected values; send safe example values instead.`
        })
      }
      if (reply.after.length > 0) {
        const all = issues(reply.after)
        // Name a field the redaction touched when the schema complains about it.
        const first = all.find((issue) =>
          reply.fields.some((f) =>
            issue.field === f || issue.field.startsWith(f) || f.startsWith(issue.field)
          )
        ) ?? all[0]!
        return yield* new CorrectionContainsSecret({
          field: first.field,
          errors: all,
          detail:
            `${first.field} held a protected value; replaced by ${REDACTION_MARKER} it no longer fits the answer schema (${first.message}). Send a safe example value instead.`
        })
      }
      // Unchanged, the text the worker checked is the correction's JSON as stored.
      const value = (reply.value ?? correction) as JsonObject
      return { value, text: reply.value === undefined ? request.text : JSON.stringify(value), fields: reply.fields }
    }
  )

  return { correct, credentials, moved }
})
