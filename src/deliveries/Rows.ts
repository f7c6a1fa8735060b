/**
 * The queue's rows decoded by schemas, not asserted: a row of the wrong
 * shape is a defect naming its table (`RowDecodeError`), never a value
 * silently wrong further on; database failures stay `SqlError` for the
 * worker, which tells an unreachable database from a refusal. Three hot
 * statements (the log's take and both settles) say at their definition
 * why they stay asserted.
 */
import { Effect, Schema } from "effect"
import { BigIntText, Instant, InstantOrNull, RowDecodeError } from "../platform/Rows.ts"

/** `rows` decoded by `row`; one that does not decode is a defect naming `table`. */
export const decodeRows = <S extends Schema.Constraint & { readonly DecodingServices: never }>(
  table: string,
  row: S
) => {
  const decode = Schema.decodeUnknownEffect(Schema.Array(row))
  return <E, R>(rows: Effect.Effect<ReadonlyArray<unknown>, E, R>): Effect.Effect<ReadonlyArray<S["Type"]>, E, R> =>
    Effect.flatMap(rows, (found) =>
      decode(found).pipe(
        Effect.catchTag("SchemaError", (error) => Effect.die(new RowDecodeError({ table, detail: error.message })))
      ))
}

/** `DeliveryMeta`, as the database stores it (jsonb). */
const Meta = Schema.declare(
  (value: unknown): value is Readonly<Record<string, string | number | boolean | null>> => typeof value === "object",
  { title: "jsonb meta" }
)
const Kind = Schema.Literals(["webhook", "telemetry", "email"])
const Status = Schema.Literals(["queued", "sending", "retrying", "delivered", "failed", "partial"])
const StoredStatus = Schema.Literals(["queued", "sending", "retrying", "delivered", "failed", "partial", "logged"])
const Count = Schema.Number

/** A delivery as `COLUMNS` reads it (`toDelivery` in `Types.ts` maps it). */
export const DeliveryRow = Schema.Struct({
  id: Schema.String,
  seq: BigIntText,
  org_id: Schema.String,
  kind: Kind,
  target_id: Schema.String,
  status: StoredStatus,
  label: Schema.NullOr(Schema.String),
  event_id: Schema.NullOr(Schema.String),
  payload: Schema.NullOr(Schema.String),
  meta: Meta,
  attempts: Count,
  replays: Count,
  last_error: Schema.NullOr(Schema.String),
  next_attempt_at: Instant,
  created_at: Instant,
  finished_at: InstantOrNull
})

export const deliveries = decodeRows("deliveries", DeliveryRow)
/** A row the per-row claim handed out: the delivery, its lease and its target's failures. */
export const claimed = decodeRows(
  "deliveries",
  Schema.Struct({
    ...DeliveryRow.fields,
    lease_owner: Schema.String,
    target_failures: Count,
    target_group: Schema.NullOr(Schema.String),
    claimed_from: StoredStatus
  })
)
/** One attempt as `delivery_attempt_records` reads it. */
export const attempts = decodeRows(
  "delivery_attempt_records",
  Schema.Struct({
    attempt: Count,
    at: Instant,
    status_code: Schema.NullOr(Count),
    error: Schema.NullOr(Schema.String),
    response_snippet: Schema.NullOr(Schema.String),
    duration_ms: Count
  })
)
/** A statement answering one count, `n`. */
export const count = decodeRows("deliveries", Schema.Struct({ n: Count }))
export const status = decodeRows("delivery_records", Schema.Struct({ status: Status }))
export const cooldown = decodeRows("delivery_targets", Schema.Struct({ cooldown_until: InstantOrNull }))
/** When the next delivery becomes claimable; NULL when none waits. */
export const nextDue = decodeRows("deliveries", Schema.Struct({ at: InstantOrNull }))
