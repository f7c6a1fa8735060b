/**
 * Retention: what only grows (webhook and email delivery records, their
 * attempts and response snippets, the events outbox, session stream events)
 * is deleted once past its `SVC_*_RETENTION`, and never while still needed:
 *
 * - a webhook or email delivery only once finished (`delivered` or
 *   `failed`) for `SVC_WEBHOOK_DELIVERY_RETENTION`: never one that is
 *   queued, sending or retrying; a failed one stays replayable until then;
 * - an attempt (status, error, response snippet) once older than
 *   `SVC_DELIVERY_ATTEMPT_RETENTION`; its delivery keeps its count;
 * - an outbox event once dispatched for `SVC_OUTBOX_RETENTION` AND no
 *   delivery refers to it any more (a delivery, even a failed one that may
 *   be replayed, reads its body from the event);
 * - a session event, or an event of an organization's approval stream,
 *   once older than `SVC_SESSION_EVENT_RETENTION`, the documented resume
 *   window of both streams;
 * - a console sign-in link, and a console session, once it has ended (used,
 *   expired, revoked, idle too long) for `SVC_SESSION_EVENT_RETENTION` too:
 *   until then a used link still says "used" and `console sessions` lists it;
 *   so is a reviewer address's confirmation link once used or expired;
 * - an `Idempotency-Key` and its kept answer once past `SVC_IDEMPOTENCY_TTL`
 *   (its `expires_at`, set when the key was first used);
 * - a revoked API key once revoked for `SVC_REVOKED_KEY_RETENTION`: until
 *   then it is listed as revoked and the feedback scrubber still removes it
 *   by its hash (after that, by its shape, as any `svc_` key);
 * - a telemetry batch's payload once it is no longer needed (at once when
 *   delivered or partial, `KEEP_FAILED_HOURS` after it failed: until then it
 *   is replayable), and its record `KEEP_RECORDS_DAYS` after it finished.
 *
 * Every process runs the pruning fiber. Each statement deletes at most
 * `SVC_RETENTION_BATCH` rows, chosen with `FOR UPDATE SKIP LOCKED`, so
 * processes sharing a database split the work instead of waiting on each
 * other, and no statement holds many locks or runs long. Ages are compared
 * with the database's clock. Each statement is its table's owner's
 * (test/unit/structure/table-owners.test.ts): the delivery queue's
 * (`src/deliveries/records/Retention.ts`) for deliveries and their attempts; its two telemetry statements are not
 * batched yet: each takes every row it finds in one statement (a few per
 * destination and minute: a batch the collector took from memory never
 * stores its payload).
 */
import { PgClient } from "@effect/sql-pg"
import { Duration, Effect, Layer, Schedule } from "effect"
import type { SqlClient, SqlError, Statement } from "effect/sql"
import { pruneSessionEvents } from "../agents/StepRecords.ts"
import { pruneApprovalStream } from "../approvals/OrgStream.ts"
import { pruneLinks, pruneSessions } from "../console/ConsoleSessions.ts"
import * as Deliveries from "../deliveries/records/Retention.ts"
import { pruneExpired as pruneIdempotencyKeys } from "../idempotency/Keys.ts"
import { pruneRevokedKeys } from "../identity/Identity.ts"
import { pruneConfirmations } from "../notifications/ReviewerAddress.ts"
import { pruneEvents } from "../outbox/Outbox.ts"
import { SvcConfig } from "../platform/Config.ts"
import { forkSupervised } from "../platform/Supervised.ts"
import { KEEP_FAILED_HOURS, KEEP_RECORDS_DAYS } from "../telemetry/Destinations.ts"

/** Batches one rule deletes per round before the next rule's turn (then the round ends). */
const MAX_BATCHES_PER_ROUND = 100

export interface RetentionRule {
  readonly name: string
  /** Deletes at most `batch` rows past retention; answers how many it deleted. */
  readonly prune: (batch: number) => Effect.Effect<number>
}

const retentionRules = Effect.gen(function*() {
  const sql = yield* PgClient.PgClient
  const config = yield* SvcConfig
  const seconds = (d: Duration.Duration) => Duration.toMillis(d) / 1000
  const count = Effect.map((rows: ReadonlyArray<unknown>) => rows.length)
  /** `now()` less `d`, in SQL. */
  const ago = (d: Duration.Duration) => sql`now() - make_interval(secs => ${seconds(d)})`
  /** A statement of the table's owner that deletes at most a batch of rows written before `before`: how many it deleted. */
  const pruneBefore = (
    prune: (
      sql: SqlClient.SqlClient,
      before: Statement.Fragment,
      batch: number
    ) => Effect.Effect<ReadonlyArray<unknown>, SqlError.SqlError>,
    before: Statement.Fragment
  ) =>
  (batch: number) => prune(sql, before, batch).pipe(count, Effect.orDie)
  const rules: ReadonlyArray<RetentionRule> = [
    {
      name: "deliveries",
      prune: (batch) =>
        Deliveries.pruneRecords(sql, ["webhook", "email"], seconds(config.webhookDeliveryRetention), batch)
    },
    {
      name: "delivery attempts",
      prune: (batch) => Deliveries.pruneAttempts(sql, seconds(config.deliveryAttemptRetention), batch)
    },
    {
      name: "telemetry batch payloads",
      prune: () => Deliveries.prunePayloads(sql, "telemetry", KEEP_FAILED_HOURS)
    },
    {
      name: "telemetry batch records",
      prune: () => Deliveries.pruneFinished(sql, "telemetry", KEEP_RECORDS_DAYS)
    },
    {
      name: "outbox events",
      prune: (batch) => pruneEvents(sql, ago(config.outboxRetention), batch).pipe(count, Effect.orDie)
    },
    { name: "session events", prune: pruneBefore(pruneSessionEvents, ago(config.sessionEventRetention)) },
    { name: "approval stream events", prune: pruneBefore(pruneApprovalStream, ago(config.sessionEventRetention)) },
    {
      name: "idempotency keys",
      prune: (batch) => pruneIdempotencyKeys(sql, batch)
    },
    { name: "revoked API keys", prune: pruneBefore(pruneRevokedKeys, ago(config.revokedKeyRetention)) },
    { name: "console sign-in links", prune: pruneBefore(pruneLinks, ago(config.sessionEventRetention)) },
    {
      name: "reviewer address confirmation links",
      prune: pruneBefore(pruneConfirmations, ago(config.sessionEventRetention))
    },
    { name: "console sessions", prune: pruneBefore(pruneSessions, ago(config.sessionEventRetention)) }
  ]
  return rules
})

/**
 * One round: each rule deletes batch after batch until it finds fewer than
 * a full batch (or `MAX_BATCHES_PER_ROUND`). Answers the rows deleted per rule.
 */
const pruneOnce = Effect.gen(function*() {
  const rules = yield* retentionRules
  const { retentionBatch } = yield* SvcConfig
  const deleted: Record<string, number> = {}
  for (const rule of rules) {
    let total = 0
    for (let i = 0; i < MAX_BATCHES_PER_ROUND; i++) {
      const n = yield* rule.prune(retentionBatch)
      total += n
      if (n < retentionBatch) break
      // Let requests and other work in between batches.
      yield* Effect.yieldNow
    }
    deleted[rule.name] = total
  }
  return deleted
})

/** The background fiber: a round every `SVC_RETENTION_INTERVAL`, in every process. */
export const RetentionLive = Layer.effectDiscard(Effect.gen(function*() {
  const config = yield* SvcConfig
  const sql = yield* PgClient.PgClient
  const round = pruneOnce.pipe(
    Effect.provideService(PgClient.PgClient, sql),
    Effect.provideService(SvcConfig, config),
    Effect.tap((deleted) =>
      Object.values(deleted).some((n) => n > 0) ? Effect.logInfo("retention: pruned", { deleted }) : Effect.void
    ),
    Effect.andThen(Effect.sleep(config.retentionInterval)),
    Effect.withTracerEnabled(false)
  )
  // A failed round (the database away) is logged once per outage and tried again next interval.
  yield* forkSupervised({ name: "retention", round, retry: Schedule.spaced(config.retentionInterval) })
}))
