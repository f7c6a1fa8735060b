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

/**
 * How deeply arrays and objects may nest inside one JSON field of a request
 * (the field itself is level 1). Deeper values are refused at decoding
 * (`400 INVALID_REQUEST` naming the field): every later step that walks a
 * value (the database driver's encoder, the scrubber, schema validation,
 * copying it to a worker) recurses, and would otherwise overflow the stack
 * on a value a few thousand levels deep. Part of the contract, not a
 * setting: a client must be able to rely on it.
 */
export const MAX_JSON_DEPTH = 64

/** Whether `value` nests arrays and objects deeper than `max` levels (iterative: never recurses itself). */
export const nestsDeeperThan = (value: unknown, max: number): boolean => {
  if (typeof value !== "object" || value === null) return false
  // Containers only, with their depths beside them (no allocation per member).
  const containers: Array<object> = [value]
  const depths: Array<number> = [1]
  while (containers.length > 0) {
    const current = containers.pop()!
    const depth = depths.pop()!
    if (depth > max) return true
    if (Array.isArray(current)) {
      for (const child of current) {
        if (typeof child === "object" && child !== null) {
          containers.push(child)
          depths.push(depth + 1)
        }
      }
    } else {
      for (const key in current) {
        const child = (current as Record<string, unknown>)[key]
        if (typeof child === "object" && child !== null) {
          containers.push(child)
          depths.push(depth + 1)
        }
      }
    }
  }
  return false
}

const withinDepth = Schema.makeFilter<unknown>(
  (value) => nestsDeeperThan(value, MAX_JSON_DEPTH) ? `nests arrays and objects deeper than ${MAX_JSON_DEPTH} levels` : undefined,
  { description: `arrays and objects nest at most ${MAX_JSON_DEPTH} levels deep` }
)

/** Any JSON value, nested at most `MAX_JSON_DEPTH` levels. */
export const JsonValue = Schema.Json.check(withinDepth)

/** A JSON object (not an array, not a scalar), nested at most `MAX_JSON_DEPTH` levels. */
export const JsonObject = Schema.Record(Schema.String, Schema.Json).check(withinDepth)

export const Limit = Schema.optionalKey(
  Schema.NumberFromString.check(Schema.isInt(), Schema.isBetween({ minimum: 1, maximum: 100 }))
    .annotate({ description: "Page size, 1 to 100 (default 50)" })
)

export const Cursor = Schema.optionalKey(
  Schema.String.check(Schema.isMaxLength(200)).annotate({ description: "Opaque cursor from `next_cursor`" })
)

export const NextCursor = Schema.NullOr(Schema.String)
