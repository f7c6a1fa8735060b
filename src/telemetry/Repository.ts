/**
 * SQL of telemetry destinations. Header values are not here: they live in
 * the secret store (owner kind `telemetry_destination`).
 */
import { PgClient } from "@effect/sql-pg"
import { Context, Effect, Layer, Option } from "effect"
import { UNDELIVERED } from "../deliveries/DeliveryQueue.ts"
import { newId } from "../platform/Ids.ts"

export interface DestinationRow {
  readonly id: string
  readonly org_id: string
  readonly url: string
  readonly url_hint: string
  readonly created_at: Date
  readonly last_delivered_at: Date | null
  readonly last_error: string | null
  readonly dropped_spans: string | number
}

const COLUMNS = "id, org_id, url, url_hint, created_at, last_delivered_at, last_error, dropped_spans"

export class DestinationsRepo extends Context.Service<DestinationsRepo, {
  /** Inserts the organization's destination; `None` when it already has one. */
  readonly insert: (row: { readonly id: string; readonly orgId: string; readonly url: string; readonly urlHint: string }) => Effect.Effect<Option.Option<DestinationRow>>
  readonly forOrg: (orgId: string) => Effect.Effect<ReadonlyArray<DestinationRow>>
  readonly get: (orgId: string, id: string) => Effect.Effect<Option.Option<DestinationRow>>
  /** By id alone (the export worker holds a delivery, not a caller). */
  readonly byId: (id: string) => Effect.Effect<Option.Option<DestinationRow>>
  readonly remove: (orgId: string, id: string) => Effect.Effect<boolean>
  /** Every destination: which organizations' spans this process buffers. */
  readonly active: () => Effect.Effect<ReadonlyArray<{ readonly id: string; readonly org_id: string }>>
  readonly addDropped: (id: string, count: number) => Effect.Effect<void>
  readonly recordSuccess: (id: string, error: string | null) => Effect.Effect<void>
  readonly recordError: (id: string, error: string) => Effect.Effect<void>
  /**
   * The record of a batch this process sent from memory, with its first
   * attempt already made, in one statement that also updates the
   * destination's `last_delivered_at` / `last_error` (`touch: "success"`):
   * `delivered` and `partial` keep no payload; `retrying` (due again at
   * `nextAttemptAt`) and `failed` keep the sealed batch for the retry or a
   * replay. Nothing is stored when the destination is gone.
   */
  readonly recordSent: (input: {
    readonly orgId: string
    readonly destinationId: string
    readonly status: "delivered" | "partial" | "retrying" | "failed"
    readonly payload: string | null
    readonly meta: Readonly<Record<string, string | number | boolean | null>>
    readonly error: string | null
    readonly nextAttemptAt?: Date | undefined
    /** "success": also set the destination's `last_delivered_at` and `last_error` (a failure's are written apart, see Export). */
    readonly touch: "success" | "none"
  }) => Effect.Effect<void>
  /** Spans in the destination's undelivered batches. */
  readonly queuedSpans: (id: string) => Effect.Effect<number>
  /** Forgets batch payloads that are no longer needed: delivered/partial ones, failed ones after `keepFailedHours`, those of deleted destinations. */
  readonly prunePayloads: (keepFailedHours: number) => Effect.Effect<number>
  /** Deletes finished delivery records older than `keepDays` (the API shows the latest 50). */
  readonly pruneRecords: (keepDays: number) => Effect.Effect<number>
}>()("svc/telemetry/DestinationsRepo") {
  static readonly layer = Layer.effect(
    DestinationsRepo,
    Effect.gen(function*() {
      const sql = yield* PgClient.PgClient
      const undelivered = sql.in(UNDELIVERED as Array<string>)
      const one = (rows: ReadonlyArray<DestinationRow>) => Option.fromNullishOr(rows[0])

      return DestinationsRepo.of({
        insert: (row) =>
          sql<DestinationRow>`
            INSERT INTO telemetry_destinations (id, org_id, url, url_hint)
            VALUES (${row.id}, ${row.orgId}, ${row.url}, ${row.urlHint})
            ON CONFLICT (org_id) DO NOTHING
            RETURNING ${sql.literal(COLUMNS)}
          `.pipe(Effect.map(one), Effect.orDie),
        forOrg: (orgId) =>
          sql<DestinationRow>`
            SELECT ${sql.literal(COLUMNS)} FROM telemetry_destinations WHERE org_id = ${orgId}
          `.pipe(Effect.orDie),
        get: (orgId, id) =>
          sql<DestinationRow>`
            SELECT ${sql.literal(COLUMNS)} FROM telemetry_destinations WHERE id = ${id} AND org_id = ${orgId}
          `.pipe(Effect.map(one), Effect.orDie),
        byId: (id) =>
          sql<DestinationRow>`
            SELECT ${sql.literal(COLUMNS)} FROM telemetry_destinations WHERE id = ${id}
          `.pipe(Effect.map(one), Effect.orDie),
        remove: (orgId, id) =>
          sql<{ id: string }>`
            DELETE FROM telemetry_destinations WHERE id = ${id} AND org_id = ${orgId} RETURNING id
          `.pipe(Effect.map((rows) => rows.length > 0), Effect.orDie),
        active: () => sql<{ id: string; org_id: string }>`SELECT id, org_id FROM telemetry_destinations`.pipe(Effect.orDie),
        addDropped: (id, count) =>
          sql`UPDATE telemetry_destinations SET dropped_spans = dropped_spans + ${count} WHERE id = ${id}`.pipe(
            Effect.asVoid,
            Effect.orDie
          ),
        recordSuccess: (id, error) =>
          sql`
            UPDATE telemetry_destinations SET last_delivered_at = now(), last_error = ${error} WHERE id = ${id}
          `.pipe(Effect.asVoid, Effect.orDie),
        recordError: (id, error) =>
          sql`UPDATE telemetry_destinations SET last_error = ${error} WHERE id = ${id}`.pipe(Effect.asVoid, Effect.orDie),
        recordSent: (input) => {
          const finished = input.status !== "retrying"
          const touch = input.touch === "success"
            ? sql`, touched AS (
                UPDATE telemetry_destinations SET last_delivered_at = now(), last_error = ${input.error}
                WHERE id = ${input.destinationId}
              )`
            : sql``
          return sql`
            WITH stored AS (
              INSERT INTO deliveries (id, org_id, kind, target_id, status, payload, meta, attempts, last_error, next_attempt_at, finished_at)
              SELECT ${newId()}, ${input.orgId}, 'telemetry', id, ${input.status}, ${input.payload},
                     ${sql.json(input.meta)}, 1, ${input.error},
                     coalesce(${input.nextAttemptAt ?? null}::timestamptz, now()),
                     ${finished ? sql`now()` : sql`NULL`}
              FROM telemetry_destinations WHERE id = ${input.destinationId}
              RETURNING id
            )
            ${touch}
            SELECT 1
          `.pipe(Effect.asVoid, Effect.orDie)
        },
        queuedSpans: (id) =>
          sql<{ n: number }>`
            SELECT coalesce(sum((meta->>'span_count')::int), 0)::int AS n FROM deliveries
            WHERE kind = 'telemetry' AND target_id = ${id} AND status IN ${undelivered}
          `.pipe(Effect.map((rows) => rows[0]?.n ?? 0), Effect.orDie),
        prunePayloads: (keepFailedHours) =>
          sql<{ id: string }>`
            UPDATE deliveries SET payload = NULL
            WHERE kind = 'telemetry' AND payload IS NOT NULL AND (
              status IN ('delivered', 'partial')
              OR (status = 'failed' AND finished_at < now() - make_interval(hours => ${keepFailedHours}))
              OR NOT EXISTS (SELECT 1 FROM telemetry_destinations t WHERE t.id = deliveries.target_id)
            )
            RETURNING id
          `.pipe(Effect.map((rows) => rows.length), Effect.orDie),
        pruneRecords: (keepDays) =>
          sql<{ id: string }>`
            DELETE FROM deliveries
            WHERE kind = 'telemetry' AND finished_at < now() - make_interval(days => ${keepDays})
            RETURNING id
          `.pipe(Effect.map((rows) => rows.length), Effect.orDie)
      })
    })
  )
}
