/** Schemas shared by several groups: ids, timestamps, pagination. */
import { Schema } from "effect"

/** A UUID path or body id. Checked here so a malformed id is a 400, never a database error. */
export const Uuid = Schema.String.check(Schema.isUUID(undefined, { message: "Expected a UUID" }))

/** Timestamps travel as RFC 3339 strings in UTC. */
export const Timestamp = Schema.String.annotate({ format: "date-time", description: "RFC 3339 timestamp (UTC)" })

/** A W3C trace id: 32 lowercase hex characters, not all zero. */
export const TraceId = Schema.String.check(
  Schema.isPattern(/^(?!0{32})[0-9a-f]{32}$/, { message: "Expected a W3C trace id (32 lowercase hex characters)" })
)

/** Any JSON value. */
export const JsonValue = Schema.Json

/** A JSON object (not an array, not a scalar). */
export const JsonObject = Schema.Record(Schema.String, Schema.Json)

export const Limit = Schema.optionalKey(
  Schema.NumberFromString.check(Schema.isInt(), Schema.isBetween({ minimum: 1, maximum: 100 }))
    .annotate({ description: "Page size, 1 to 100 (default 50)" })
)

export const Cursor = Schema.optionalKey(
  Schema.String.check(Schema.isMaxLength(200)).annotate({ description: "Opaque cursor from `next_cursor`" })
)

export const NextCursor = Schema.NullOr(Schema.String)
