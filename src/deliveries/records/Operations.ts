/**
 * Folder `records/`: what the queue answers and keeps once deliveries
 * exist, over both storage paths through the `delivery_records` view:
 * `Listing.ts` (reads and counts), `Stats.ts`, `Retention.ts` and this
 * service (with `recordFinished`, a delivery finished by its only
 * attempt). It never claims, leases or settles.
 *
 * This service: operations on a target's deliveries beside the queue's life
 * cycle (`DeliveryQueue`), bulk replay (`rows/BulkReplay.ts`) among them.
 */
import { PgClient } from "@effect/sql-pg"
import { Context, Effect, Layer } from "effect"
import { Topics, Wakeups } from "../../database/Wakeups.ts"
import { newId } from "../../platform/Ids.ts"
import * as BulkReplay from "../rows/BulkReplay.ts"
import type { AttemptRecord, DeliveryMeta, TargetRef } from "../Types.ts"
import * as Stats from "./Stats.ts"

/**
 * A delivery whose only attempt was made before it was stored and that is
 * finished by it (a test delivery sent while its caller waited): recorded
 * with its label, event id and attempt, as `delivered` or `failed`. It
 * never waits in the queue, so it changes neither the target's count nor
 * its health (no cooldown counts it).
 */
export interface FinishedInput extends TargetRef {
  readonly label: string
  readonly eventId: string
  readonly status: "delivered" | "failed"
  readonly meta: DeliveryMeta
  readonly attempt: AttemptRecord
}

/** Stores the delivery and its one attempt in one statement; answers its id. */
const recordFinished = Effect.fnUntraced(function*(sql: PgClient.PgClient, input: FinishedInput) {
  const id = newId()
  const error = input.status === "failed" ? (input.attempt.error ?? "failed") : null
  yield* sql`
    WITH delivery AS (
      INSERT INTO deliveries (id, org_id, kind, target_id, status, label, event_id, meta, attempts, last_error, finished_at,
                              status_code)
      VALUES (${id}, ${input.orgId}, ${input.kind}, ${input.targetId}, ${input.status}, ${input.label}, ${input.eventId},
              ${JSON.stringify(input.meta)}::jsonb, 1, ${error}, now(), ${input.attempt.statusCode ?? null})
      RETURNING id
    )
    INSERT INTO delivery_attempts (delivery_id, attempt, status_code, error, response_snippet, duration_ms)
    SELECT id, 1, ${input.attempt.statusCode ?? null}, ${input.attempt.error ?? null}, ${
    input.attempt.responseSnippet ?? null
  },
           ${Math.round(input.attempt.durationMs)}
    FROM delivery
  `.pipe(Effect.orDie)
  return id
})

export class DeliveryOperations extends Context.Service<DeliveryOperations, {
  /** Stores a delivery finished by its only attempt (never queued, never counted in the target's health); answers its id. */
  readonly recordFinished: (input: FinishedInput) => Effect.Effect<string>
  /** Queues again the target's failed deliveries created in the window, within its capacity (or counts them, on a dry run). */
  readonly replayWindow: (input: BulkReplay.BulkReplayInput) => Effect.Effect<BulkReplay.BulkReplayResult>
  /** The target's deliveries created over the last `hours` by status, and its attempts' p50/p95 duration. */
  readonly stats: (input: Parameters<typeof Stats.targetStats>[1]) => Effect.Effect<Stats.TargetStats>
}>()("svc/deliveries/DeliveryOperations") {
  static readonly layer = Layer.effect(
    DeliveryOperations,
    Effect.gen(function*() {
      const sql = yield* PgClient.PgClient
      const wakeups = yield* Wakeups
      return DeliveryOperations.of({
        recordFinished: Effect.fn("DeliveryOperations.recordFinished")(function*(input: FinishedInput) {
          return yield* recordFinished(sql, input)
        }),
        replayWindow: Effect.fn("DeliveryOperations.replayWindow")(function*(input: BulkReplay.BulkReplayInput) {
          const result = yield* BulkReplay.replayWindow(sql, input)
          if (result.queued > 0 && !input.dryRun) yield* wakeups.signal(Topics.deliveries(input.kind))
          return result
        }),
        stats: Effect.fn("DeliveryOperations.stats")(function*(input: Parameters<typeof Stats.targetStats>[1]) {
          return yield* Stats.targetStats(sql, input)
        })
      })
    })
  )
}
