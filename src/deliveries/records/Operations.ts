/**
 * Folder `records/`: what the queue answers and keeps once deliveries
 * exist, over both storage paths through the `delivery_records` view:
 * `Listing.ts` (reads and counts), `Stats.ts`, `Retention.ts`,
 * `Recorded.ts` (a delivery finished by its only attempt) and this
 * service. It never claims, leases or settles.
 *
 * This service: operations on a target's deliveries beside the queue's life
 * cycle (`DeliveryQueue`), bulk replay (`rows/BulkReplay.ts`) among them.
 */
import { PgClient } from "@effect/sql-pg"
import { Context, Effect, Layer } from "effect"
import { Wakeups } from "../../database/Wakeups.ts"
import * as BulkReplay from "../rows/BulkReplay.ts"
import { wakeTopic } from "../DeliveryQueue.ts"
import * as Recorded from "./Recorded.ts"
import * as Stats from "./Stats.ts"

export class DeliveryOperations extends Context.Service<DeliveryOperations, {
  /** Stores a delivery finished by its only attempt (never queued, never counted in the target's health); answers its id. */
  readonly recordFinished: (input: Recorded.FinishedInput) => Effect.Effect<string>
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
        recordFinished: Effect.fn("DeliveryOperations.recordFinished")(function*(input: Recorded.FinishedInput) {
          return yield* Recorded.recordFinished(sql, input)
        }),
        replayWindow: Effect.fn("DeliveryOperations.replayWindow")(function*(input: BulkReplay.BulkReplayInput) {
          const result = yield* BulkReplay.replayWindow(sql, input)
          if (result.queued > 0 && !input.dryRun) yield* wakeups.signal(wakeTopic(input.kind))
          return result
        }),
        stats: Effect.fn("DeliveryOperations.stats")(function*(input: Parameters<typeof Stats.targetStats>[1]) {
          return yield* Stats.targetStats(sql, input)
        })
      })
    })
  )
}
