/**
 * SQL of telemetry destinations. Header values are not here: they live in
 * the secret store (owner kind `telemetry_destination`); their batches are
 * deliveries, which only the delivery queue touches.
 */
import { PgClient } from "@effect/sql-pg"
import { Context, Effect, Layer, Option, Schema } from "effect"
import { newId } from "../platform/Ids.ts"
import { BigIntText, rowsOf, Timestamp, TimestampOrNull } from "../platform/Rows.ts"

const DestinationColumns = Schema.Struct({
  id: Schema.String,
  org_id: Schema.String,
  url: Schema.String,
  url_hint: Schema.String,
  created_at: Timestamp,
  last_delivered_at: TimestampOrNull,
  last_error: Schema.NullOr(Schema.String),
  /** A bigint counter. */
  dropped_spans: BigIntText
})
export type DestinationRow = typeof DestinationColumns.Type
const DestinationRows = rowsOf("telemetry_destinations", DestinationColumns)
const ActiveRows = rowsOf("telemetry_destinations", Schema.Struct({ id: Schema.String, org_id: Schema.String }))

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
  /**
   * Runs `effect` in a transaction holding the destination's row (shared),
   * when it exists: a deletion under way is waited for, and then nothing
   * runs. For work that must not outlive the destination (storing its
   * batches), which the deletion would otherwise miss.
   */
  readonly whileExists: <A, R>(id: string, effect: Effect.Effect<A, never, R>) => Effect.Effect<Option.Option<A>, never, R>
  readonly recordSuccess: (id: string, error: string | null) => Effect.Effect<void>
  readonly recordError: (id: string, error: string) => Effect.Effect<void>
  /**
   * The record of a batch this process sent from memory, with its first
   * attempt already made, in one statement that also updates the
   * destination's `last_delivered_at` / `last_error` (`touch: "success"`):
   * `delivered` and `partial` keep no payload; `retrying` (due again at
   * `nextAttemptAt`) and `failed` keep the sealed batch for the retry or a
   * replay. Nothing is stored when the destination is gone.
   *
   * The one place outside the delivery queue that writes a delivery row:
   * it must insert only while the destination exists and touch the
   * destination in the same statement, which the queue cannot know about.
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
  /**
   * The records of several batches of one destination that this process
   * sent from memory and the collector took (`delivered` or `partial`, no
   * payload), in one statement; `touch` (when set) becomes the
   * destination's `last_delivered_at` = now() and `last_error`. Nothing is
   * stored when the destination is gone.
   */
  readonly recordDelivered: (input: {
    readonly orgId: string
    readonly destinationId: string
    readonly records: ReadonlyArray<{
      readonly status: "delivered" | "partial"
      readonly meta: Readonly<Record<string, string | number | boolean | null>>
      readonly error: string | null
    }>
    readonly touch: { readonly error: string | null } | undefined
  }) => Effect.Effect<void>
}>()("svc/telemetry/DestinationsRepo") {
  static readonly layer = Layer.effect(
    DestinationsRepo,
    Effect.gen(function*() {
      const sql = yield* PgClient.PgClient
      const one = (rows: ReadonlyArray<DestinationRow>) => Option.fromNullishOr(rows[0])

      return DestinationsRepo.of({
        insert: (row) =>
          DestinationRows.all(sql`
            INSERT INTO telemetry_destinations (id, org_id, url, url_hint)
            VALUES (${row.id}, ${row.orgId}, ${row.url}, ${row.urlHint})
            ON CONFLICT (org_id) DO NOTHING
            RETURNING ${sql.literal(COLUMNS)}
          `).pipe(Effect.map(one)),
        forOrg: (orgId) =>
          DestinationRows.all(sql`
            SELECT ${sql.literal(COLUMNS)} FROM telemetry_destinations WHERE org_id = ${orgId}
          `),
        get: (orgId, id) =>
          DestinationRows.all(sql`
            SELECT ${sql.literal(COLUMNS)} FROM telemetry_destinations WHERE id = ${id} AND org_id = ${orgId}
          `).pipe(Effect.map(one)),
        byId: (id) =>
          DestinationRows.all(sql`
            SELECT ${sql.literal(COLUMNS)} FROM telemetry_destinations WHERE id = ${id}
          `).pipe(Effect.map(one)),
        remove: (orgId, id) =>
          sql<{ id: string }>`
            DELETE FROM telemetry_destinations WHERE id = ${id} AND org_id = ${orgId} RETURNING id
          `.pipe(Effect.map((rows) => rows.length > 0), Effect.orDie),
        active: () => ActiveRows.all(sql`SELECT id, org_id FROM telemetry_destinations`),
        whileExists: (id, effect) =>
          sql.withTransaction(Effect.gen(function*() {
            const rows = yield* sql`SELECT 1 FROM telemetry_destinations WHERE id = ${id} FOR SHARE`
            if (rows.length === 0) return Option.none()
            return Option.some(yield* effect)
          })).pipe(Effect.orDie),
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
        recordDelivered: (input) => {
          if (input.records.length === 0) return Effect.void
          const rows = input.records.map((record, seq) => ({ seq, id: newId(), status: record.status, meta: record.meta, error: record.error }))
          const touch = input.touch === undefined
            ? sql``
            : sql`, touched AS (
                UPDATE telemetry_destinations SET last_delivered_at = now(), last_error = ${input.touch.error}
                WHERE id = ${input.destinationId}
              )`
          return sql`
            WITH input AS (
              SELECT * FROM jsonb_to_recordset(${sql.json(rows)}::jsonb) AS x(seq int, id uuid, status text, meta jsonb, error text)
            ),
            stored AS (
              INSERT INTO deliveries (id, org_id, kind, target_id, status, payload, meta, attempts, last_error, next_attempt_at, finished_at)
              SELECT i.id, ${input.orgId}, 'telemetry', d.id, i.status, NULL, i.meta, 1, i.error, now(), now()
              FROM telemetry_destinations d CROSS JOIN input i
              WHERE d.id = ${input.destinationId}
              ORDER BY i.seq
              RETURNING id
            )
            ${touch}
            SELECT 1
          `.pipe(Effect.asVoid, Effect.orDie)
        }
      })
    })
  )
}
