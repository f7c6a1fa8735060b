/**
 * Replay (`DeliveryQueue.replay`), under the capacity rule and after its
 * target's cooldown. It fails with the queue's own errors, not HTTP
 * problems: the handlers that call it say what they mean to a client
 * (`replayProblem` in `src/api/ReplayProblem.ts`).
 */
import type { PgClient } from "@effect/sql-pg"
import { Data, Effect, Schema } from "effect"
import { InstantOrNull } from "../../platform/Rows.ts"
import * as Rows from "../Rows.ts"
import { COLUMNS, type DeliveryStatus, type ReplayInput, toDelivery } from "../Types.ts"

/** No such delivery (of this organization, kind and target). */
export class DeliveryNotFound extends Data.TaggedError("DeliveryNotFound")<{ readonly deliveryId: string }> {}

/** Only a failed delivery whose payload is still kept can be replayed. */
export class DeliveryNotReplayable extends Data.TaggedError("DeliveryNotReplayable")<{
  readonly deliveryId: string
  readonly status: DeliveryStatus
}> {}

/** The target already holds its capacity of undelivered deliveries. */
export class DeliveryQueueFull extends Data.TaggedError("DeliveryQueueFull")<{ readonly targetId: string }> {}

const withCooldown = Rows.decodeRows(
  "deliveries",
  Schema.Struct({ ...Rows.DeliveryRow.fields, cooldown_until: InstantOrNull })
)

// Refused inside the transaction, which then only read: rolling it back changes nothing.
export const replay = (sql: PgClient.PgClient, input: ReplayInput) =>
  sql.withTransaction(Effect.gen(function*() {
    const [row] = yield* withCooldown(sql`
      SELECT ${sql.literal(COLUMNS.split(",").map((c) => `d.${c.trim()}`).join(", "))}, t.cooldown_until
      FROM deliveries d LEFT JOIN delivery_targets t ON t.id = d.target_id
      WHERE d.id = ${input.deliveryId} AND d.org_id = ${input.orgId} AND d.kind = ${input.kind}
      ${input.targetId === undefined ? sql`` : sql`AND d.target_id = ${input.targetId}`}
      FOR UPDATE OF d
    `)
    if (row === undefined) return yield* new DeliveryNotFound({ deliveryId: input.deliveryId })
    // A logged row is never failed: what it reads as is only for the answer.
    if (row.status === "logged") {
      const [record] = yield* Rows.status(sql`SELECT status FROM delivery_records WHERE id = ${row.id}`)
      return yield* new DeliveryNotReplayable({ deliveryId: input.deliveryId, status: record!.status })
    }
    const delivery = toDelivery(row)
    if (delivery.status !== "failed" || (input.replayable !== undefined && !input.replayable(delivery))) {
      return yield* new DeliveryNotReplayable({ deliveryId: input.deliveryId, status: delivery.status })
    }
    const [waiting] = yield* Rows.count(sql`
      SELECT coalesce((SELECT undelivered FROM delivery_targets WHERE id = ${delivery.targetId}), 0) AS n
    `)
    if (waiting!.n >= input.capacity) return yield* new DeliveryQueueFull({ targetId: input.targetId ?? "" })
    yield* sql`
      UPDATE deliveries
      SET status = 'queued', replays = replays + 1, finished_at = NULL, lease_owner = NULL, lease_until = NULL,
          next_attempt_at = greatest(now(), coalesce(${row.cooldown_until}::timestamptz, now()))
      WHERE id = ${delivery.id}
    `
    return { queued: true as const, id: delivery.id }
  })).pipe(Effect.catchTag("SqlError", Effect.die))
