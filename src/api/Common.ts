/** Schemas shared by several groups: ids, timestamps, pagination. */
import { Schema } from "effect"
import { ParsedJsonObject } from "./ParsedJsonObject.ts"

/**
 * A string PostgreSQL cannot store: it holds the NUL character (`\u0000`,
 * refused by `text` and `jsonb`) or a UTF-16 surrogate without its pair
 * (`jsonb` refuses its `\ud800` escape; `text` would silently turn it into
 * U+FFFD). Every request string is checked for these at decoding
 * (`isStorable` below), so one never reaches the database (where it would
 * be a 500).
 */
export const isUnstorableString = (value: string): boolean => value.includes("\u0000") || !value.isWellFormed()

/** What a client is told about such a string. */
export const UNSTORABLE_STRING_MESSAGE = "must not contain the NUL character (\\u0000) or an unpaired UTF-16 surrogate"

/**
 * Refuses a string PostgreSQL cannot store (`isUnstorableString`), with
 * the message the client gets. Every string a request carries to the
 * database goes through it at decoding (`Text`, `JsonValue`, `JsonObject`),
 * first among its checks so that its message is the one reported; a test
 * walks every endpoint's path, query and body schemas for it.
 */
export const isStorable = Schema.makeFilter<string>((value) => isUnstorableString(value) ? UNSTORABLE_STRING_MESSAGE : undefined)

/** A request string: any string PostgreSQL can store. Further checks follow it (`Text.check(...)`). */
export const Text = Schema.String.check(isStorable)

/** A UUID path or body id. Checked here so a malformed id is a 400, never a database error. */
export const Uuid = Text.check(Schema.isUUID(undefined, { message: "Expected a UUID" }))

/** Timestamps travel as RFC 3339 strings in UTC. */
export const Timestamp = Schema.String.annotate({ format: "date-time", description: "RFC 3339 timestamp (UTC)" })

/** A W3C trace id: 32 lowercase hex characters, not all zero. */
export const TraceId = Text.check(
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

/**
 * The paths (as segments: member names and array indexes) of every string,
 * member names included, in `value` that `isUnstorableString` refuses, at
 * most `max` of them. Iterative, like `nestsDeeperThan`. A member name at
 * fault is reported at the path of its member.
 */
export const findUnstorableStrings = (
  value: unknown,
  max = 100
): Array<ReadonlyArray<string | number>> => {
  // Each entry links to its parent: a path is built only for what is found.
  interface Entry {
    readonly value: unknown
    readonly key: string | number | undefined
    readonly parent: Entry | undefined
  }
  const pathOf = (entry: Entry | undefined, last?: string): Array<string | number> => {
    const path: Array<string | number> = last === undefined ? [] : [last]
    for (let at = entry; at !== undefined && at.key !== undefined; at = at.parent) path.push(at.key)
    return path.reverse()
  }
  const found: Array<ReadonlyArray<string | number>> = []
  const stack: Array<Entry> = [{ value, key: undefined, parent: undefined }]
  while (stack.length > 0 && found.length < max) {
    const entry = stack.pop()!
    const current = entry.value
    if (typeof current === "string") {
      if (isUnstorableString(current)) found.push(pathOf(entry))
    } else if (Array.isArray(current)) {
      for (let i = current.length - 1; i >= 0; i--) {
        const child: unknown = current[i]
        if (typeof child === "string" || (typeof child === "object" && child !== null)) {
          stack.push({ value: child, key: i, parent: entry })
        }
      }
    } else if (typeof current === "object" && current !== null) {
      const keys = Object.keys(current)
      for (let i = keys.length - 1; i >= 0; i--) {
        const key = keys[i]!
        if (isUnstorableString(key)) {
          found.push(pathOf(entry, key))
          if (found.length >= max) break
          continue
        }
        const child = (current as Record<string, unknown>)[key]
        if (typeof child === "string" || (typeof child === "object" && child !== null)) {
          stack.push({ value: child, key, parent: entry })
        }
      }
    }
  }
  return found
}

/** Whether any string in `value` (member names included) is unstorable: the walk without a path, allocating nothing per string. */
export const containsUnstorableString = (value: unknown): boolean => {
  if (typeof value === "string") return isUnstorableString(value)
  if (typeof value !== "object" || value === null) return false
  const stack: Array<object> = [value]
  while (stack.length > 0) {
    const current = stack.pop()!
    if (Array.isArray(current)) {
      for (const child of current) {
        if (typeof child === "string") {
          if (isUnstorableString(child)) return true
        } else if (typeof child === "object" && child !== null) stack.push(child)
      }
    } else {
      for (const key in current) {
        if (isUnstorableString(key)) return true
        const child = (current as Record<string, unknown>)[key]
        if (typeof child === "string") {
          if (isUnstorableString(child)) return true
        } else if (typeof child === "object" && child !== null) stack.push(child)
      }
    }
  }
  return false
}

/** The same for every string inside a JSON value, each reported at its own path (member names at their member's). */
export const isStorableJson = Schema.makeFilter<unknown>((value) =>
  containsUnstorableString(value)
    ? findUnstorableStrings(value).map((path) => ({ path, issue: UNSTORABLE_STRING_MESSAGE }))
    : undefined
)

const withinDepth = Schema.makeFilter<unknown>(
  (value) => nestsDeeperThan(value, MAX_JSON_DEPTH) ? `nests arrays and objects deeper than ${MAX_JSON_DEPTH} levels` : undefined,
  { description: `arrays and objects nest at most ${MAX_JSON_DEPTH} levels deep` }
)

/** Any JSON value, nested at most `MAX_JSON_DEPTH` levels. */
export const JsonValue = Schema.Json.check(isStorableJson, withinDepth)

/**
 * A JSON object (not an array, not a scalar), nested at most `MAX_JSON_DEPTH`
 * levels. Bodies are parsed JSON already: the object is checked, not copied
 * member by member (`ParsedJsonObject.ts`).
 */
export const JsonObject = ParsedJsonObject.check(isStorableJson, withinDepth)

export const Limit = Schema.optionalKey(
  Schema.NumberFromString.check(Schema.isInt(), Schema.isBetween({ minimum: 1, maximum: 100 }))
    .annotate({ description: "Page size, 1 to 100 (default 50)" })
)

export const Cursor = Schema.optionalKey(
  Text.check(Schema.isMaxLength(200)).annotate({ description: "Opaque cursor from `next_cursor`" })
)

export const NextCursor = Schema.NullOr(Schema.String)
