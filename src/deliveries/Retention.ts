/**
 * Retention: payloads no longer needed and finished deliveries past their
 * keep time. Spans are opened by `DeliveryQueue`, which wires these.
 */
import type { PgClient } from "@effect/sql-pg"
import { Effect } from "effect"
import type { DeliveryKind } from "./Types.ts"

export const prunePayloads = Effect.fnUntraced(function*(sql: PgClient.PgClient, kind: DeliveryKind, keepFailedHours: number) {
  const rows = yield* sql<{ id: string }>`
    UPDATE deliveries SET payload = NULL
    WHERE kind = ${kind} AND payload IS NOT NULL AND (
      status IN ('delivered', 'partial')
      OR (status = 'failed' AND finished_at < now() - make_interval(hours => ${keepFailedHours}))
    )
    RETURNING id
  `.pipe(Effect.orDie)
  return rows.length
})

export const pruneFinished = Effect.fnUntraced(function*(sql: PgClient.PgClient, kind: DeliveryKind, keepDays: number) {
  const rows = yield* sql<{ id: string }>`
    DELETE FROM deliveries
    WHERE kind = ${kind} AND finished_at < now() - make_interval(days => ${keepDays})
    RETURNING id
  `.pipe(Effect.orDie)
  return rows.length
})
