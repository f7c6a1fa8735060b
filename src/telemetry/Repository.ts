/**
 * SQL of telemetry destinations. Header values are not here: they live in
 * the secret store (owner kind `telemetry_destination`); their batches are
 * deliveries, which only the delivery queue writes (`whileExists` runs its
 * statements while the destination stands).
 */
import { PgClient } from "@effect/sql-pg"
import { Context, Effect, Layer, Option, Schema } from "effect"
import { BigIntText, rowsOf, Timestamp, TimestampOrNull } from "../platform/Rows.ts"
import { type ClearUrls, SEALED_URL_COLUMN } from "../secrets/ReceiverUrls.ts"

const DestinationColumns = Schema.Struct({
  id: Schema.String,
  org_id: Schema.String,
  url: Schema.String,
  url_hint: Schema.String,
  protocol: Schema.Literals(["http/json", "http/protobuf"]),
  compression: Schema.Literals(["none", "gzip"]),
  created_at: Timestamp,
  last_delivered_at: TimestampOrNull,
  last_error: Schema.NullOr(Schema.String),
  /** A bigint counter. */
  dropped_spans: BigIntText
})
export type DestinationRow = typeof DestinationColumns.Type
const DestinationRows = rowsOf("telemetry_destinations", DestinationColumns)
const ActiveRows = rowsOf("telemetry_destinations", Schema.Struct({ id: Schema.String, org_id: Schema.String }))
const IdRows = rowsOf("telemetry_destinations", Schema.Struct({ id: Schema.String }))

const COLUMNS =
  "id, org_id, url, url_hint, protocol, compression, created_at, last_delivered_at, last_error, dropped_spans"

export class DestinationsRepo extends Context.Service<DestinationsRepo, {
  /** Inserts the organization's destination; `None` when it already has one. */
  readonly insert: (row: {
    readonly id: string
    readonly orgId: string
    readonly url: string
    readonly urlHint: string
    readonly protocol: DestinationRow["protocol"]
    readonly compression: DestinationRow["compression"]
  }) => Effect.Effect<Option.Option<DestinationRow>>
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
   * batches, recording the ones sent), which the deletion would otherwise
   * miss. With `touch`, the row is taken by setting its
   * `last_delivered_at` = now() and `last_error` = `touch.error` instead
   * (the records of batches the collector took): one lock, taken first,
   * as the deletion takes it, never a shared lock raised to an exclusive one.
   */
  readonly whileExists: <A, R>(
    id: string,
    effect: Effect.Effect<A, never, R>,
    touch?: { readonly error: string | null } | undefined
  ) => Effect.Effect<Option.Option<A>, never, R>
  readonly recordSuccess: (id: string, error: string | null) => Effect.Effect<void>
  readonly recordError: (id: string, error: string) => Effect.Effect<void>
}>()("svc/telemetry/DestinationsRepo") {
  static readonly layer = Layer.effect(
    DestinationsRepo,
    Effect.gen(function*() {
      const sql = yield* PgClient.PgClient
      const one = (rows: ReadonlyArray<DestinationRow>) => Option.fromNullishOr(rows[0])

      return DestinationsRepo.of({
        insert: (row) =>
          DestinationRows.all(sql`
            INSERT INTO telemetry_destinations (id, org_id, url, url_hint, protocol, compression)
            VALUES (${row.id}, ${row.orgId}, ${row.url}, ${row.urlHint}, ${row.protocol}, ${row.compression})
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
          IdRows.all(sql`
            DELETE FROM telemetry_destinations WHERE id = ${id} AND org_id = ${orgId} RETURNING id
          `).pipe(Effect.map((rows) => rows.length > 0)),
        active: () => ActiveRows.all(sql`SELECT id, org_id FROM telemetry_destinations`),
        whileExists: (id, effect, touch) =>
          sql.withTransaction(Effect.gen(function*() {
            const rows = yield* (touch === undefined
              ? sql`SELECT 1 FROM telemetry_destinations WHERE id = ${id} FOR SHARE`
              : sql`
                UPDATE telemetry_destinations SET last_delivered_at = now(), last_error = ${touch.error}
                WHERE id = ${id} RETURNING 1
              `)
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
          sql`UPDATE telemetry_destinations SET last_error = ${error} WHERE id = ${id}`.pipe(
            Effect.asVoid,
            Effect.orDie
          )
      })
    })
  )
}

/** The destinations' URLs still in clear, and the claim that seals one, for their move into the secret store at start (`secrets/ReceiverUrls.ts`). */
export const destinationClearUrls: ClearUrls = {
  kind: "telemetry_destination_url",
  table: "telemetry_destinations",
  clear: (sql) => sql`SELECT id, org_id, url FROM telemetry_destinations WHERE url <> ${SEALED_URL_COLUMN} LIMIT 100`,
  claim: (sql, row, hint) =>
    sql`UPDATE telemetry_destinations SET url = ${SEALED_URL_COLUMN}, url_hint = ${hint} WHERE id = ${row.id} AND url = ${row.url} RETURNING id`
}
