/** Schemas shared by several groups: ids, timestamps, pagination. */
import { Schema, SchemaGetter } from "effect"
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
export const isStorable = Schema.makeFilter<string>((value) =>
  isUnstorableString(value) ? UNSTORABLE_STRING_MESSAGE : undefined
)

/** A request string: any string PostgreSQL can store. Further checks follow it (`Text.check(...)`). */
export const Text = Schema.String.check(isStorable)

/**
 * The characters ECMAScript's `\s` matches, written out for a character
 * class. The document's patterns use no class escape (`\s`, `\d`, `\w`) nor
 * Unicode property (`\p{...}`): Python's `re`, which most OpenAPI generators
 * and testers use, has no `\p` and reads `\s` and `\d` otherwise (its `\s`
 * adds U+001C-U+001F and U+0085 and lacks U+FEFF; its `\d` takes every
 * script's digits). Ranges and `\uXXXX` read alike in ECMAScript (with and
 * without the `u` flag) and Python.
 */
const SPACE_CHARACTERS = "\\t\\n\\v\\f\\r \\u00a0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000\\ufeff"

const emailPart = `[^${SPACE_CHARACTERS}@<>",;:()\\\\[\\]]+`

/** A reviewer address: at most 254 characters, one `@`, a dot in the domain, no spaces, quotes or brackets. */
export const EmailAddress = Text.check(
  Schema.isMaxLength(254),
  Schema.isPattern(new RegExp(`^${emailPart}@${emailPart}\\.${emailPart}$`, "u"), {
    message: "Expected an email address"
  })
)

/** A UUID path or body id. Checked here so a malformed id is a 400, never a database error. */
export const Uuid = Text.check(Schema.isUUID(undefined, { message: "Expected a UUID" }))

/** Timestamps travel as RFC 3339 strings in UTC. */
export const Timestamp = Schema.String.annotate({ format: "date-time", description: "RFC 3339 timestamp (UTC)" })

const DAYS_IN_MONTH = [31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31]

/** Whether a date's day exists in its month (29 February in leap years only). */
const isCalendarDay = (value: string): boolean => {
  const year = Number(value.slice(0, 4))
  const month = Number(value.slice(5, 7))
  const day = Number(value.slice(8, 10))
  const leap = year % 4 === 0 && (year % 100 !== 0 || year % 400 === 0)
  return day <= (month === 2 && leap ? 29 : DAYS_IN_MONTH[month - 1]!)
}

/**
 * An instant of a request: RFC 3339 with a time zone (no leap second), a
 * day that exists. The pattern says it in the document, days of each
 * month and 29 February of leap years included, so a value the pattern
 * allows exists (a query parameter is checked by its pattern only); the
 * day check states `format: date-time`.
 */
export const Instant = Text.check(
  Schema.isPattern(
    /^(?:[0-9]{4}-(?:(?:0[13578]|1[02])-(?:0[1-9]|[12][0-9]|3[01])|(?:0[469]|11)-(?:0[1-9]|[12][0-9]|30)|02-(?:0[1-9]|1[0-9]|2[0-8]))|(?:[0-9]{2}(?:0[48]|[2468][048]|[13579][26])|(?:[02468][048]|[13579][26])00)-02-29)T(?:[01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](?:\.[0-9]{1,9})?(?:Z|[+-](?:[01][0-9]|2[0-3]):[0-5][0-9])$/u,
    { message: "Expected an RFC 3339 timestamp with a time zone, e.g. 2026-11-23T08:00:00Z" }
  ),
  Schema.makeFilter((value: string) => isCalendarDay(value) || "Expected a date that exists", {
    toJsonSchema: () => ({ format: "date-time" })
  })
)

/**
 * A W3C trace id: 32 lowercase hex characters, not all zero.
 *
 * Every pattern of the API carries the `u` flag: Effect writes a pattern
 * into the OpenAPI document only for a Unicode RegExp, and without it the
 * document would show a plain string where the server checks a pattern.
 */
export const TraceId = Text.check(
  Schema.isPattern(/^(?!0{32})[0-9a-f]{32}$/u, { message: "Expected a W3C trace id (32 lowercase hex characters)" })
)

/**
 * A whole number carried as text (a query parameter, a path segment):
 * decimal digits only, so `0x10`, `1e1`, `+5`, ` 5` and `5.0` are refused,
 * then the bounds. The document states it as what it is, an `integer`
 * with its bounds (`toJsonSchema` below; `completeDocument` drops the
 * `string` type Effect writes for every parameter), so a generated client
 * passes a number and `?limit=10` is what it sends.
 */
export const IntegerFromDigits = (options: {
  readonly minimum: number
  readonly maximum: number
  readonly description: string
}) => {
  const { description, ...bounds } = options
  const digits = new RegExp(`^[0-9]{1,${String(bounds.maximum).length}}$`, "u")
  return Schema.String.check(
    Schema.makeFilter<string>(
      (value) =>
        digits.test(value)
          ? undefined
          : `Expected a whole number from ${bounds.minimum} to ${bounds.maximum} in decimal digits`,
      { toJsonSchema: () => ({ type: "integer", ...bounds, description }) }
    )
  ).pipe(
    Schema.decodeTo(Schema.Int.check(Schema.isBetween(bounds)), {
      decode: SchemaGetter.transform((value: string) => Number(value)),
      encode: SchemaGetter.transform((value: number) => String(value))
    })
  )
}

/**
 * The same kept as the text that was sent (event ids, which clients hold as
 * text): decimal digits, at most 2^53 - 1 so that every client can hold it
 * as a number too.
 */
const IntegerText = (description: string) =>
  Text.check(
    Schema.makeFilter<string>(
      (value) =>
        /^[0-9]{1,16}$/u.test(value) && Number(value) <= Number.MAX_SAFE_INTEGER
          ? undefined
          : `Expected a whole number from 0 to ${Number.MAX_SAFE_INTEGER} in decimal digits`,
      { toJsonSchema: () => ({ type: "integer", minimum: 0, maximum: Number.MAX_SAFE_INTEGER, description }) }
    )
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
const nestsDeeperThan = (value: unknown, max: number): boolean => {
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
 * most 100 of them. Iterative, like `nestsDeeperThan`. A member name at
 * fault is reported at the path of its member.
 */
export const findUnstorableStrings = (value: unknown): Array<ReadonlyArray<string | number>> => {
  const max = 100
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
const containsUnstorableString = (value: unknown): boolean => {
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
  (value) =>
    nestsDeeperThan(value, MAX_JSON_DEPTH)
      ? `nests arrays and objects deeper than ${MAX_JSON_DEPTH} levels`
      : undefined,
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
  IntegerFromDigits({ minimum: 1, maximum: 100, description: "Page size, 1 to 100 (default 50)" })
)

export const Cursor = Schema.optionalKey(
  Text.check(Schema.isMaxLength(200)).annotate({ description: "Opaque cursor from `next_cursor`" })
)

export const NextCursor = Schema.NullOr(Schema.String)

/** Where a server-sent event stream resumes: `after` in the query… */
export const ResumeQuery = {
  after: Schema.optionalKey(IntegerText("Replay the events after this id (same as `Last-Event-ID`)"))
}

/**
 * …or the `Last-Event-ID` header a reconnecting `EventSource` sends (it
 * wins; empty: absent). Read by the stream's handler with this schema, not
 * declared on the endpoint: a declared header would become a required
 * argument of every typed-client call.
 */
export const LastEventId = Schema.String.check(
  Schema.makeFilter<string>((value) => value === "" || Schema.is(ResumeQuery.after.schema)(value))
)

/**
 * The name of a header an organization adds to what svc sends: an RFC 9110
 * field name (a `token`; `__proto__` is one, stored and sent like any
 * other). What the header may be beyond its syntax (not a transport or
 * svc's own header, at most 10, values without control characters) is
 * checked by the service and answered `INVALID_HEADERS`.
 */
export const HeaderName = Text.check(
  Schema.isPattern(/^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/u, {
    message: "Expected a header name that is an RFC 9110 token: letters, digits and !#$%&'*+-.^_`|~"
  })
)

/**
 * A schema rule answered with a problem of its own rather than
 * `INVALID_REQUEST`: the rule is stated in the schema (so the document and
 * the typed client say it) and keeps the code the documentation promises
 * for it. Put on a schema or a check with `.annotate(answeredAs(code))`;
 * the server reads it from the failure (`src/server/Validation.ts`).
 */
export const ANSWERED_AS = "svc/api/answeredAs"
export type AnsweredAs = "INVALID_WEBHOOK_EVENTS" | "INVALID_URL" | "INVALID_HEADERS"
export const answeredAs = (code: AnsweredAs): { readonly [ANSWERED_AS]: AnsweredAs } => ({ [ANSWERED_AS]: code })

/** At most this many UTF-8 bytes in a custom header's value. */
const MAX_HEADER_VALUE_BYTES = 4096

/**
 * The value of a header an organization adds: visible characters, spaces,
 * tabs and the Latin-1 part of obs-text (RFC 9110 `field-value`), at most
 * 4096 characters; no line breaks nor other control characters. Its UTF-8
 * length (at most 4096 bytes: a character above U+007F takes two) is
 * checked by the service. Answered `INVALID_HEADERS` naming the header.
 */
export const HeaderValue = Text.check(
  Schema.isMaxLength(MAX_HEADER_VALUE_BYTES, {
    message: `Expected at most ${MAX_HEADER_VALUE_BYTES} bytes`,
    ...answeredAs("INVALID_HEADERS")
  }),
  Schema.isPattern(/^[\t\x20-\x7E\xA0-\xFF]*$/u, {
    message: "Expected a header value without line breaks or other control characters",
    ...answeredAs("INVALID_HEADERS")
  })
)

/**
 * An absolute URL of one of `schemes` (any case), at most 2048 characters:
 * `format: uri` and a pattern in the document. Whether the address is an
 * allowed public one is the service's rule; both are answered `INVALID_URL`,
 * or, with `answered` `INVALID_REQUEST`, the schema's rules as any other
 * member's (a URL other than the endpoint's `url`).
 */
export const UrlOf = (
  schemes: ReadonlyArray<string>,
  message: string,
  answered: "INVALID_URL" | "INVALID_REQUEST" = "INVALID_URL"
) => {
  const anyCase = schemes.map((scheme) =>
    [...scheme].map((c) => /[a-z]/.test(c) ? `[${c}${c.toUpperCase()}]` : c).join("")
  )
  const code = answered === "INVALID_URL" ? answeredAs("INVALID_URL") : {}
  return Text.check(
    Schema.isMaxLength(2048, { ...code }),
    Schema.isPattern(new RegExp(`^(?:${anyCase.join("|")})://[^${SPACE_CHARACTERS}]+$`, "u"), { message, ...code }),
    Schema.makeFilter((value: string) => URL.canParse(value) || message, {
      toJsonSchema: () => ({ format: "uri" }),
      ...code
    })
  )
}
