/**
 * A JSON object as the HTTP layer hands it over: the value `JSON.parse`
 * made of a request body (or svc's own answer about to be serialised), so
 * every member is already JSON. The schema checks only that it is an
 * object, not an array or a scalar, and lets the value through as it is;
 * `JsonObject` (`Common.ts`) adds the storable-string and depth checks.
 *
 * Speeds up: `Schema.Record(Schema.String, Schema.Json)` decoded a
 * correction key by key through Effect's object parser (a generator step
 * per member, a copy of the object) and walked every value again for
 * `Schema.Json` (a `WeakMap` per walk), on the way in and again when the
 * answer was encoded. Measured on the PostgreSQL server with
 * `bench/profile-writes.ts` (`PROF_ALLOC=1`, 2026-11-24): schemas were
 * 19 % of what the main thread allocated per feedback POST; with this the
 * POST allocates 88-90 KB instead of 99 (decoding the body and encoding the
 * answer: 6.7 and 3.6 µs instead of 11 and 7.1 in a micro-benchmark;
 * bench/notes/request-path.md, "The feedback POST beyond the cheapest write").
 *
 * Its JSON Schema is `{"type": "object"}`, as the record's was: a
 * declaration has no JSON Schema of its own, so a check that always passes
 * carries it, and `toCodecJson` says the value is already in JSON form
 * (HttpApi derives its body and answer codecs through it).
 */
import { Schema } from "effect"

/** The JSON object type (the record's). */
export type JsonObjectType = { readonly [key: string]: Schema.Json }

const isObject = (value: unknown): value is JsonObjectType =>
  typeof value === "object" && value !== null && !Array.isArray(value)

/** Documents the declaration as a JSON object (`{"type": "object"}`); never fails. */
const documentedAsObject = Schema.makeFilter<JsonObjectType>(() => undefined, {
  toJsonSchema: () => ({ type: "object" })
})

/** A JSON object from `JSON.parse` (see above): checked to be an object, passed through as it is. */
export const ParsedJsonObject = Schema.declare(isObject, {
  expected: "object",
  toCodecJson: () => undefined
}).check(documentedAsObject)
