/**
 * A delivery whose only attempt was made before it was stored and that is
 * finished by it (a test delivery sent while its caller waited): recorded
 * with its label, event id and attempt, as `delivered` or `failed`. It
 * never waits in the queue, so it changes neither the target's count nor
 * its health (no cooldown counts it).
 */
import type { PgClient } from "@effect/sql-pg"
import { Effect } from "effect"
import { newId } from "../../platform/Ids.ts"
import type { AttemptRecord, DeliveryKind, DeliveryMeta } from "../Types.ts"

export interface FinishedInput {
  readonly orgId: string
  readonly kind: DeliveryKind
  readonly targetId: string
  readonly label: string
  readonly eventId: string
  readonly status: "delivered" | "failed"
  readonly meta: DeliveryMeta
  readonly attempt: AttemptRecord
}

/** Stores the delivery and its one attempt in one statement; answers its id. */
export const recordFinished = Effect.fnUntraced(function*(sql: PgClient.PgClient, input: FinishedInput) {
  const id = newId()
  const error = input.status === "failed" ? (input.attempt.error ?? "failed") : null
  yield* sql`
    WITH delivery AS (
      INSERT INTO deliveries (id, org_id, kind, target_id, status, label, event_id, meta, attempts, last_error, finished_at)
      VALUES (${id}, ${input.orgId}, ${input.kind}, ${input.targetId}, ${input.status}, ${input.label}, ${input.eventId},
              ${JSON.stringify(input.meta)}::jsonb, 1, ${error}, now())
      RETURNING id
    )
    INSERT INTO delivery_attempts (delivery_id, attempt, status_code, error, response_snippet, duration_ms)
    SELECT id, 1, ${input.attempt.statusCode ?? null}, ${input.attempt.error ?? null}, ${input.attempt.responseSnippet ?? null},
           ${Math.round(input.attempt.durationMs)}
    FROM delivery
  `.pipe(Effect.orDie)
  return id
})
