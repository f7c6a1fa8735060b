/**
 * The document is the behaviour: for every operation of `/openapi.json`,
 * inputs made from the document itself are answered as it says.
 *
 * - A value the document allows for a path parameter, a query parameter or
 *   a body member at any depth (members of objects inside objects, items
 *   of arrays, members of arrays of objects, a map's keys) is never refused
 *   as invalid (`400 INVALID_REQUEST` naming it) and never answered 5xx: a
 *   rule only a handler knows fails here.
 * - A value the document forbids there (out of its bounds, off its
 *   pattern, its format or its enum, of another type) is refused with `400
 *   INVALID_REQUEST` naming it: a rule missing from the server fails here.
 * - A `cursor` a list issued gives its next page; any other string (made
 *   up within the documented 200 characters, edited, another list's, or
 *   longer) is refused with `400 INVALID_REQUEST` naming `cursor`.
 * - Every string and integer an operation accepts is bounded in the
 *   document (a length, a pattern, an enum or a format; both bounds), so a
 *   bound dropped from a schema fails here even where nothing else checks it.
 * - Every path parameter at its documented maximum length reaches its
 *   operation (not the router's 404).
 * - `Accept` is not negotiated (docs/api.md): JSON routes answer JSON.
 * - Whole requests generated from the document (every path and query
 *   parameter, every body member at once, optional ones present or not;
 *   kept only when ajv finds them valid by the document) are never refused
 *   as invalid nor answered 5xx, as a property-based API tester sends them.
 *   Refusals for rules the document states in words and the service checks
 *   (a public address, an endpoint's own events, names differing only in
 *   case) are allowed.
 *
 * Allowed values come from fast-check arbitraries derived from each
 * parameter's JSON Schema (patterns through `fc.stringMatching`, bounds,
 * formats, enums), a few per value with the bounds always among them;
 * bodies are the operation's documented example with one member replaced,
 * at any depth (an object the example leaves out is made from its schema);
 * a member the document calls a CEL condition gets sentences of CEL.
 * A field is named as the server names it (`rules[0].result.reason`,
 * `headers["a b"]`); a value no variant of a union has may name the union.
 * Every answer is also checked against the document by `raw`
 * (`test/support/contract.ts`). One service for the whole file.
 */
import { assert, describe, layer } from "@effect/vitest"
import { Effect } from "effect"
import * as fc from "fast-check"
import { toJsonPath } from "../../../src/server/Validation.ts"
import { SvcTest } from "../../../src/testing.ts"
import { document, routes, schemaViolation } from "../../support/contract.ts"
import { raw, type RawResponse } from "../../support/http.ts"

type Json = Record<string, any>

/** Allowed values tried per parameter or member, beside its bounds. */
const SAMPLES = 4
const SEED = 41

/**
 * Parameters whose allowed values depend on state, not on their form:
 * a cursor is an opaque token the list issued (anything else is `400`
 * naming `cursor`, as the document's description says); "cursors" below
 * tries the ones each list issues and every other kind.
 */
const STATEFUL = new Set(["cursor"])

/**
 * Operations the test's API key cannot reach: console sign-in and
 * approval links authenticate with a one-time token or the console cookie,
 * and answer before they read their input.
 */
const unreachable = (response: RawResponse) => response.status === 401 || response.status === 403

const resolve = (schema: Json): Json =>
  typeof schema.$ref === "string"
    ? resolve(document.components.schemas[schema.$ref.replace("#/components/schemas/", "")])
    : schema

/** A string of `length` characters the pattern (if any) accepts, when one is easy to build; for a length bound. */
const longest = (schema: Json): string | undefined => {
  const pattern = typeof schema.pattern === "string" ? new RegExp(schema.pattern, "u") : undefined
  const maxLength = typeof schema.maxLength === "number"
    ? schema.maxLength
    : /\{0,(\d+)\}\$$/.exec(schema.pattern ?? "")
    ? Number(/\{0,(\d+)\}\$$/.exec(schema.pattern)![1]) + 1
    : undefined
  if (maxLength === undefined) return undefined
  for (const unit of ["a", "0", "é"]) {
    const value = unit.repeat(maxLength)
    if (pattern === undefined || pattern.test(value)) return value
  }
  return undefined
}

/**
 * Strings a pattern accepts. fast-check cannot generate from a lookahead
 * (`^(?!0{32})…`): it generates without them, and the whole pattern filters.
 */
const matching = (pattern: string): fc.Arbitrary<string> => {
  const full = new RegExp(pattern, "u")
  const withoutLookaheads = pattern.replace(/\(\?[!=][^()]*\)/g, "")
  return fc.stringMatching(new RegExp(withoutLookaheads, "u")).filter((value) => full.test(value))
}

/** The schema of a nullable member (`anyOf` of one schema and `null`); `undefined` for anything else. */
const nullableOf = (schema: Json): Json | undefined => {
  if (!Array.isArray(schema.anyOf) || schema.anyOf.length !== 2) return undefined
  const [a, b] = (schema.anyOf as Array<Json>).map(resolve)
  if (b!.type === "null" && a!.type !== "null") return a
  if (a!.type === "null" && b!.type !== "null") return b
  return undefined
}

/**
 * Conditions in the language a member's description names (CEL, of type
 * bool over `tool`, `arguments` and `session`): a string JSON Schema cannot
 * describe is allowed when it is a sentence of that language.
 */
const celCondition: fc.Arbitrary<string> = (() => {
  const name = fc.stringMatching(/^[a-z][a-z0-9_]{0,11}$/)
  const number = fc.double({ min: -1e6, max: 1e6, noNaN: true }).map((value) => value.toFixed(1))
  const comparison = fc.oneof(
    fc.tuple(name, fc.constantFrom(">", ">=", "<", "<=", "==", "!="), number).map(([member, op, value]) =>
      `double(arguments.${member}) ${op} ${value}`
    ),
    fc.string({ maxLength: 20 }).map((text) => `tool == ${JSON.stringify(text)}`),
    name.map((member) => `has(arguments.${member})`),
    fc.constantFrom("true", "false", "session.id != \"\"")
  )
  return fc.array(comparison, { minLength: 1, maxLength: 4 }).chain((parts) =>
    fc.array(fc.constantFrom(" && ", " || "), { minLength: parts.length - 1, maxLength: parts.length - 1 })
      .map((ops) => parts.reduce((out, part, i) => (i === 0 ? part : `${out}${ops[i - 1]}${part}`), ""))
  )
})()

/** The patterns a string schema's `not` members refuse (`allOf: [{not: {pattern}}]`). */
const refusedPatterns = (schema: Json): Array<RegExp> =>
  ((schema.allOf ?? []) as Array<Json>).flatMap((part) =>
    typeof part.not?.pattern === "string" ? [new RegExp(part.not.pattern, "u")] : []
  )

/** Values the schema allows: its bounds, then arbitraries. `undefined`: not a schema this test derives values for. */
const allowed = (schema: Json): ReadonlyArray<unknown> | undefined => {
  schema = resolve(schema)
  const nullable = nullableOf(schema)
  if (nullable !== undefined) return [null, ...(allowed(nullable) ?? [])]
  if (Array.isArray(schema.enum)) return schema.enum
  const sample = <A>(arbitrary: fc.Arbitrary<A>) => fc.sample(arbitrary, { numRuns: SAMPLES, seed: SEED })
  switch (schema.type) {
    case "boolean":
      return [true, false]
    case "integer": {
      const min = schema.minimum ?? -(2 ** 31)
      const max = schema.maximum ?? 2 ** 31 - 1
      return [min, max, ...sample(fc.integer({ min: Math.max(min, -(2 ** 31)), max: Math.min(max, 2 ** 31 - 1) }))]
    }
    case "string": {
      if (schema.format === "uuid") return sample(fc.uuid())
      if (schema.format === "date-time") {
        return sample(
          fc.date({ min: new Date("2000-01-01T00:00:00Z"), max: new Date("2100-01-01T00:00:00Z"), noInvalidDate: true })
        )
          .map((date) => date.toISOString())
      }
      if (schema.format !== undefined) return undefined
      if (String(schema.description ?? "").startsWith("A CEL expression of type bool")) return sample(celCondition)
      const minLength = schema.minLength ?? 0
      const maxLength = schema.maxLength ?? 64
      const refused = refusedPatterns(schema)
      const arbitrary = (typeof schema.pattern === "string"
        ? matching(schema.pattern).filter((value) => value.length >= minLength && value.length <= maxLength)
        : fc.string({ minLength, maxLength: Math.min(maxLength, 64) })).filter((value) =>
          !refused.some((pattern) => pattern.test(value))
        )
      const bound = longest(schema)
      return [...(bound === undefined ? [] : [bound]), ...sample(arbitrary)]
    }
    default:
      return undefined
  }
}

/** Values the schema forbids, with what each shows. `asText`: the value travels as text (a parameter). */
const forbidden = (schema: Json, asText: boolean): ReadonlyArray<readonly [string, unknown]> => {
  schema = resolve(schema)
  const nullable = nullableOf(schema)
  if (nullable !== undefined) return forbidden(nullable, asText)
  const out: Array<readonly [string, unknown]> = []
  if (Array.isArray(schema.enum)) {
    out.push(["not in the enum", "not-a-member-of-the-enum"])
    return out
  }
  switch (schema.type) {
    case "integer":
      if (typeof schema.minimum === "number") out.push(["under the minimum", schema.minimum - 1])
      if (typeof schema.maximum === "number") out.push(["over the maximum", schema.maximum + 1])
      out.push(["not whole", 1.5])
      if (asText) out.push(["hexadecimal", "0x10"], ["exponent", "1e1"], ["signed", "+5"], ["not a number", "ten"])
      else out.push(["a string", "5"])
      break
    case "boolean":
      out.push(["not a boolean", asText ? "yes" : "true"])
      break
    case "string": {
      const pattern = typeof schema.pattern === "string" ? new RegExp(schema.pattern, "u") : undefined
      if (typeof schema.maxLength === "number") out.push(["over the maximum length", "a".repeat(schema.maxLength + 1)])
      if (typeof schema.minLength === "number" && schema.minLength > 0 && !asText) {
        out.push(["under the minimum length", ""])
      }
      if (schema.format === "uuid") out.push(["not a UUID", "not-a-uuid"])
      if (schema.format === "date-time") {
        out.push(["a day that does not exist", "2026-02-30T08:00:00Z"], ["no time zone", "2026-11-23T08:00:00"], [
          "not RFC 3339",
          "23/11/2026"
        ])
      }
      if (pattern !== undefined) {
        for (const candidate of ["!", "a b", "G".repeat(32), "0x10", "x".repeat(300), "-leading"]) {
          if (!pattern.test(candidate)) {
            out.push([`off the pattern (${JSON.stringify(candidate.slice(0, 12))})`, candidate])
            break
          }
        }
      }
      for (const refused of refusedPatterns(schema)) {
        const value = fc.sample(matching(refused.source), { numRuns: 20, seed: SEED }).find((candidate) =>
          pattern === undefined || pattern.test(candidate)
        )
        if (value !== undefined) out.push([`matching a refused pattern (${JSON.stringify(value.slice(0, 12))})`, value])
      }
      if (!asText) out.push(["not a string", 123])
      break
    }
    case "array": {
      if (asText) break
      if (typeof schema.maxItems === "number") {
        out.push([
          "over the maximum of items",
          Array.from({ length: schema.maxItems + 1 }, () => built(schema.items))
        ])
      }
      if (typeof schema.minItems === "number" && schema.minItems > 0) out.push(["under the minimum of items", []])
      out.push(["not an array", "x"])
      break
    }
    case "object":
      if (!asText && isRecord(schema.properties)) out.push(["not an object", 5])
      break
  }
  return out
}

const asText = (value: unknown) => encodeURIComponent(String(value))

/** Whole requests generated per operation, beside the one-member variations. */
const GENERATED = 4

/** Strings a string schema allows, as an arbitrary (the same rules as `allowed`). */
const stringArbitrary = (schema: Json): fc.Arbitrary<string> => {
  if (schema.format === "uuid") return fc.uuid()
  if (schema.format === "date-time" && typeof schema.pattern !== "string") {
    return fc.date({
      min: new Date("2000-01-01T00:00:00Z"),
      max: new Date("2100-01-01T00:00:00Z"),
      noInvalidDate: true
    }).map((date) => date.toISOString())
  }
  if (String(schema.description ?? "").startsWith("A CEL expression of type bool")) return celCondition
  const minLength = schema.minLength ?? 0
  const maxLength = schema.maxLength ?? 64
  const refused = refusedPatterns(schema)
  const base = typeof schema.pattern === "string"
    ? matching(schema.pattern).filter((value) => value.length >= minLength && value.length <= maxLength)
    : fc.string({ minLength, maxLength: Math.min(maxLength, 64) })
  return base.filter((value) =>
    !refused.some((pattern) => pattern.test(value)) && (schema.format !== "uri" || URL.canParse(value))
  )
}

/**
 * Values the schema allows, as an arbitrary, for a whole request: every
 * member generated, optional ones present or not, arrays and maps of a few
 * items. Where the document states a rule in words the generator cannot
 * read (a member whose description names a sibling, a free-form JSON
 * value such as an answer schema), the example's value stands.
 */
const arbitraryOf = (schema: Json, example: unknown): fc.Arbitrary<unknown> => {
  schema = resolve(schema)
  const nullable = nullableOf(schema)
  if (nullable !== undefined) return fc.oneof(fc.constant(null), arbitraryOf(nullable, example))
  if (Array.isArray(schema.anyOf)) {
    return fc.oneof(...(schema.anyOf as Array<Json>).map((variant) => arbitraryOf(variant, example)))
  }
  if (Array.isArray(schema.enum)) return fc.constantFrom(...schema.enum)
  switch (schema.type) {
    case "boolean":
      return fc.boolean()
    case "integer":
      return fc.integer({
        min: Math.max(schema.minimum ?? -(2 ** 31), -(2 ** 31)),
        max: Math.min(schema.maximum ?? 2 ** 31 - 1, 2 ** 31 - 1)
      })
    case "number":
      return fc.double({
        min: schema.minimum ?? -1e9,
        max: schema.maximum ?? 1e9,
        noNaN: true,
        noDefaultInfinity: true
      })
    case "string":
      return stringArbitrary(schema)
    case "array": {
      const items = Array.isArray(example) ? example[0] : undefined
      return fc.array(arbitraryOf(schema.items ?? {}, items), {
        minLength: schema.minItems ?? 0,
        maxLength: Math.min(schema.maxItems ?? 3, 3)
      })
    }
    case "object": {
      const members = isRecord(example) ? example : {}
      if (isRecord(schema.properties)) {
        const names = Object.keys(schema.properties)
        const required = new Set((schema.required ?? []) as Array<string>)
        const describe = (name: string) => String(resolve(schema.properties[name]).description ?? "")
        const entries = names.flatMap((name) => {
          const inner = resolve(schema.properties[name])
          // A rule between two members, stated in either one's description: both keep the example's values.
          const acrossMembers = names.some((other) =>
            other !== name && (describe(name).includes(`\`${other}\``) || describe(other).includes(`\`${name}\``))
          )
          // Any JSON value: the example's, or absent when the example has none.
          const free = inner.type === undefined && inner.anyOf === undefined && inner.enum === undefined
          if (acrossMembers || free) {
            return members[name] === undefined
              ? []
              : [[name, fc.constant(members[name])] as const]
          }
          return [[name, arbitraryOf(inner, members[name])] as const]
        })
        return fc.record(Object.fromEntries(entries), {
          requiredKeys: entries.map(([name]) => name).filter((name) => required.has(name))
        })
      }
      if (isRecord(schema.propertyNames) || isRecord(schema.additionalProperties)) {
        const keys = isRecord(schema.propertyNames)
          ? stringArbitrary(resolve(schema.propertyNames))
          : fc.string({ minLength: 1, maxLength: 16 })
        const values = isRecord(schema.additionalProperties)
          ? arbitraryOf(schema.additionalProperties, Object.values(members)[0])
          : fc.constant("v")
        if (schema.additionalProperties === true) return fc.constant(example ?? {})
        return fc.dictionary(keys, values, {
          minKeys: schema.minProperties ?? 0,
          maxKeys: Math.min(schema.maxProperties ?? 3, 3)
        })
      }
      return fc.constant(example ?? {})
    }
    default:
      // Any JSON value (a run's input, a step's arguments): the example's.
      return fc.constant(example ?? {})
  }
}

/** A parameter's values as text (they travel in the URL). */
const stringOrText = (schema: Json): fc.Arbitrary<string> =>
  arbitraryOf(schema, undefined).map((value) => String(value))

/** A member no object of the document has. */
const UNKNOWN = "unknown_member"

/**
 * A refusal's detail says what the rule is: never only Effect's default
 * words for a failure ("Expected no excess property", "Missing key", …).
 */
const RULELESS =
  /Expected no excess property|Unexpected key with value|: Missing key$|Expected a valid value|Invalid data |Forbidden operation|Expected exactly one member to match/

/**
 * Rules of the service the document states in words, each answered with its
 * own problem: a URL must be an allowed public HTTPS address (`INVALID_URL`),
 * an event type one the description lists (`INVALID_WEBHOOK_EVENTS`), a custom
 * header one svc may send (`INVALID_HEADERS`). A problem naming another
 * field, or another problem naming a field, is a rule the document does not
 * show.
 */
const SERVICE_RULES: Record<string, RegExp> = {
  INVALID_URL: /^url$/,
  INVALID_WEBHOOK_EVENTS: /^event_type$/,
  INVALID_HEADERS: /^headers\b/
}

/**
 * Rules the document states (an enum, a pattern, a format, a length) that
 * the documentation answers with a code of their own rather than
 * `INVALID_REQUEST` (`answeredAs` in `src/api/Common.ts`): a value they
 * forbid is refused with that code, naming the field.
 */
const ANSWERED_AS: Record<string, RegExp> = {
  INVALID_URL: /^url$/,
  INVALID_WEBHOOK_EVENTS: /^(events(\[\d+\])?|event_type)$/,
  INVALID_HEADERS: /^headers\b/
}

/** `headers["X-Key"]` as the header rules name it: `headers.X-Key`. */
const dotted = (field: string) => field.replace(/^headers\["([A-Za-z_$][A-Za-z0-9_$-]*)"\]$/, "headers.$1")

/** A 400 other than `INVALID_REQUEST` naming `field` (or listing it) that is not one of the service's stated rules. */
const refusedByOwnRule = (response: RawResponse, field: string): boolean => {
  if (response.status !== 400 || response.json?.code === "INVALID_REQUEST") return false
  const named = response.json?.field === field ||
    ((response.json?.errors ?? []) as Array<{ field?: string }>).some((error) => error.field === field)
  return named && !(SERVICE_RULES[response.json?.code]?.test(field) ?? false)
}

const isRecord = (value: unknown): value is Record<string, unknown> =>
  typeof value === "object" && value !== null && !Array.isArray(value)

/** The variant of a union (`anyOf`) a value is of: the one whose enum members it has; `undefined` for `null` or no object variant. */
const variantOf = (schema: Json, value: unknown): Json | undefined => {
  schema = resolve(schema)
  if (!Array.isArray(schema.anyOf)) return schema
  if (value === null) return undefined
  const variants = (schema.anyOf as Array<Json>).map(resolve).filter((variant) => variant.type !== "null")
  return variants.find((variant) =>
    Object.entries((variant.properties ?? {}) as Record<string, Json>).every(([name, inner]) => {
      const member = resolve(inner)
      return !Array.isArray(member.enum) || !isRecord(value) || member.enum.includes(value[name])
    })
  ) ?? variants[0]
}

/** The smallest value a schema allows (required members only), to stand for a member the example leaves out. */
const built = (schema: Json): unknown => {
  schema = resolve(schema)
  if (Array.isArray(schema.anyOf)) return built(variantOf(schema, {}) ?? { type: "null" })
  if (Array.isArray(schema.enum)) return schema.enum[0]
  switch (schema.type) {
    case "object": {
      // The required members, and as many optional ones, in order, as `minProperties` asks for.
      const required = (schema.required ?? []) as Array<string>
      const optional = Object.keys(schema.properties ?? {}).filter((name) => !required.includes(name))
      const names = [...required, ...optional.slice(0, Math.max(0, (schema.minProperties ?? 0) - required.length))]
      return Object.fromEntries(names.map((name) => [name, built(schema.properties[name])]))
    }
    case "array":
      return []
    case "integer":
      return schema.minimum ?? 0
    case "boolean":
      return true
    case "null":
      return null
    default:
      return allowed(schema)?.at(-1) ?? "a"
  }
}

/** `body` with the value at `at` replaced (members and array items on the way copied). */
const setAt = (body: unknown, at: ReadonlyArray<string | number>, value: unknown): unknown => {
  if (at.length === 0) return value
  const [head, ...rest] = at
  if (typeof head === "number") {
    const items = Array.isArray(body) ? [...body] : []
    items[head] = setAt(items[head], rest, value)
    return items
  }
  const members = isRecord(body) ? body : {}
  return { ...members, [head!]: setAt(members[head!], rest, value) }
}

/** A member of a body at any depth: where it is, its schema, the body around it, its siblings' names. */
interface BodyMember {
  readonly at: ReadonlyArray<string | number>
  readonly schema: Json
  /** The whole body, with the objects on the way to this member made when the example leaves them out. */
  readonly body: unknown
  readonly siblings: ReadonlyArray<string>
  /** Names of a map's keys (`propertyNames`): the member is a key of it, not a value. */
  readonly keys?: Json
  /**
   * A union's tag (`decision` of a rule's result): a value no variant has
   * fails the whole union, so the refusal may name the union's member instead.
   */
  readonly union?: string
}

/**
 * Every member of a body: members of objects inside objects, items of arrays
 * (each item of the example's arrays, objects or not), a map's keys, down to
 * any depth. An object member the example leaves out is made from its schema
 * (`built`) so what is inside it is tried too.
 */
const bodyMembers = (schema: Json, body: unknown, at: ReadonlyArray<string | number> = []): Array<BodyMember> => {
  const value = at.reduce<unknown>((inner, segment) => (inner as any)?.[segment], body)
  const node = variantOf(schema, value)
  if (node === undefined) return []
  const resolved = resolve(schema)
  const isUnion = Array.isArray(resolved.anyOf) &&
    (resolved.anyOf as Array<Json>).filter((variant) => resolve(variant).type !== "null").length > 1
  const out: Array<BodyMember> = []
  if (node.type === "object" && isRecord(node.properties)) {
    const names = Object.keys(node.properties)
    for (const name of names) {
      const inner = node.properties[name] as Json
      const present = isRecord(value) && value[name] !== undefined
      const filled = present ? body : setAt(body, [...at, name], built(inner))
      const tag = isUnion && Array.isArray(resolve(inner).enum)
      out.push({
        at: [...at, name],
        schema: inner,
        body,
        siblings: names.filter((other) => other !== name),
        ...(tag ? { union: toJsonPath(at) } : {})
      })
      out.push(...bodyMembers(inner, filled, [...at, name]))
    }
  }
  if (node.type === "object" && isRecord(node.propertyNames) && isRecord(value)) {
    out.push({ at, schema: node.propertyNames, body, siblings: [], keys: node.propertyNames })
  }
  if (node.type === "array" && isRecord(node.items)) {
    const items = Array.isArray(value) && value.length > 0 ? value : [built(node.items)]
    const filled = Array.isArray(value) && value.length > 0 ? body : setAt(body, at, items)
    items.forEach((_, index) => {
      out.push({ at: [...at, index], schema: node.items, body: filled, siblings: [] })
      out.push(...bodyMembers(node.items, filled, [...at, index]))
    })
  }
  return out
}

interface Operation {
  readonly method: string
  readonly template: string
  readonly parameters: ReadonlyArray<Json>
  readonly body: Json | undefined
  readonly example: Json | undefined
  /** Answers an event stream (`text/event-stream`). */
  readonly stream: boolean
}

const operations: ReadonlyArray<Operation> = routes.map((route) => {
  const body = route.operation.requestBody?.content?.["application/json"]
  return {
    method: route.method,
    template: route.template,
    parameters: (route.operation.parameters ?? []) as ReadonlyArray<Json>,
    body: body === undefined ? undefined : resolve(body.schema),
    example: body?.example,
    stream: route.operation.responses["200"]?.content?.["text/event-stream"] !== undefined
  }
})

/** A path parameter's value when another one is under test: the first value its schema allows. */
const defaultPath = (parameter: Json): string => String(allowed(parameter.schema)?.at(-1) ?? "x")

// Loopback receivers allowed: the cursor test lists an endpoint's and a destination's deliveries.
layer(SvcTest.layer({ config: { allowedTargetCidrs: ["127.0.0.0/8"] } }), { excludeTestServices: true })(
  "the document is the behaviour",
  (it) => {
    const send = (
      key: string,
      operation: Operation,
      path: Record<string, string>,
      query: Record<string, string>,
      body: unknown
    ) =>
      Effect.gen(function*() {
        const svc = yield* SvcTest
        const url = new URL(
          operation.template.replace(/\{([^}]+)\}/g, (_, name: string) => asText(path[name])),
          svc.baseUrl
        )
        for (const [name, value] of Object.entries(query)) url.searchParams.set(name, value)
        const init = {
          method: operation.method,
          headers: {
            authorization: `Bearer ${key}`,
            ...(body === undefined ? {} : { "content-type": "application/json" })
          },
          ...(body === undefined ? {} : { body: JSON.stringify(body) })
        }
        if (!operation.stream) return yield* raw(url.toString(), init)
        // An event stream that opens never ends: its status is the answer; a refusal is read whole.
        return yield* Effect.promise(async (): Promise<RawResponse> => {
          const controller = new AbortController()
          const response = await fetch(url, { ...init, signal: controller.signal })
          if (response.status === 200) {
            controller.abort()
            return { status: 200, headers: response.headers, text: "", json: undefined }
          }
          const text = await response.text()
          return { status: response.status, headers: response.headers, text, json: JSON.parse(text) }
        })
      })

    /** Every variation of one operation: each parameter and simple body member in turn, allowed then forbidden values. */
    const variations = (operation: Operation) => {
      const out: Array<{
        readonly field: string
        /** Another name a refusal of this value may give: the union it is the tag of. */
        readonly union?: string
        readonly value: unknown
        readonly why: string | undefined
        readonly path: Record<string, string>
        readonly query: Record<string, string>
        readonly body: unknown
      }> = []
      const paths = Object.fromEntries(
        operation.parameters.filter((p) => p.in === "path").map((p) => [p.name, defaultPath(p)])
      )
      const baseBody = operation.body === undefined ? undefined : operation.example ?? {}
      for (const parameter of operation.parameters) {
        if (STATEFUL.has(parameter.name) || (parameter.in !== "path" && parameter.in !== "query")) continue
        for (const value of allowed(parameter.schema) ?? []) {
          if (parameter.in === "path" && value === "") continue
          out.push(
            parameter.in === "path"
              ? {
                field: parameter.name,
                value,
                why: undefined,
                path: { ...paths, [parameter.name]: String(value) },
                query: {},
                body: baseBody
              }
              : {
                field: parameter.name,
                value,
                why: undefined,
                path: paths,
                query: { [parameter.name]: String(value) },
                body: baseBody
              }
          )
        }
        for (const [why, value] of forbidden(parameter.schema, true)) {
          if (parameter.in === "path" && (value === "" || String(value).includes("/"))) continue
          out.push(
            parameter.in === "path"
              ? {
                field: parameter.name,
                value,
                why,
                path: { ...paths, [parameter.name]: String(value) },
                query: {},
                body: baseBody
              }
              : {
                field: parameter.name,
                value,
                why,
                path: paths,
                query: { [parameter.name]: String(value) },
                body: baseBody
              }
          )
        }
      }
      if (operation.body?.type === "object" && isRecord(baseBody)) {
        for (const member of bodyMembers(operation.body, baseBody)) {
          if (member.keys !== undefined) {
            // A map's keys: each allowed name is accepted; each forbidden one is refused naming the key.
            const map = member.at.reduce<unknown>((inner, segment) => (inner as any)?.[segment], member.body) as Record<
              string,
              unknown
            >
            const sample = Object.values(map)[0] ?? "v"
            for (const name of allowed(member.keys) ?? []) {
              if (typeof name !== "string" || name === "") continue
              out.push({
                field: toJsonPath([...member.at, name]),
                value: name,
                why: undefined,
                path: paths,
                query: {},
                body: setAt(member.body, member.at, { [name]: sample })
              })
            }
            for (const [why, name] of forbidden(member.keys, false)) {
              if (typeof name !== "string") continue
              out.push({
                field: toJsonPath([...member.at, name]),
                value: name,
                why: `a key ${why}`,
                path: paths,
                query: {},
                body: setAt(member.body, member.at, { [name]: sample })
              })
            }
            continue
          }
          const field = toJsonPath(member.at)
          const union = member.union === undefined ? {} : { union: member.union }
          // A rule across members (JSON Schema cannot compare two members) is stated in the member's description,
          // naming the others: a value it refuses is not "allowed by the document".
          const acrossMembers = member.siblings.some((other) =>
            String(resolve(member.schema).description ?? "").includes(`\`${other}\``)
          )
          for (const value of acrossMembers ? [] : allowed(member.schema) ?? []) {
            out.push({
              field,
              ...union,
              value,
              why: undefined,
              path: paths,
              query: {},
              body: setAt(member.body, member.at, value)
            })
          }
          for (const [why, value] of forbidden(member.schema, false)) {
            out.push({
              field,
              ...union,
              value,
              why,
              path: paths,
              query: {},
              body: setAt(member.body, member.at, value)
            })
          }
          const closed = resolve(member.schema)
          if (closed.type === "object" && closed.additionalProperties === false && isRecord(closed.properties)) {
            const current = member.at.reduce<unknown>((inner, segment) => (inner as any)?.[segment], member.body)
            const object = { ...(isRecord(current) ? current : built(closed) as Json), [UNKNOWN]: 1 }
            out.push({
              field: toJsonPath([...member.at, UNKNOWN]),
              value: 1,
              why: "a member the object does not have",
              path: paths,
              query: {},
              body: setAt(member.body, member.at, object)
            })
          }
        }
        if (operation.body.additionalProperties === false) {
          out.push({
            field: UNKNOWN,
            value: 1,
            why: "a member the body does not have",
            path: paths,
            query: {},
            body: { ...baseBody, [UNKNOWN]: 1 }
          })
        }
      }
      return out
    }

    describe("for every operation", () => {
      it.effect(
        "allowed values are never refused as invalid nor 5xx; forbidden ones are 400 naming the field (INVALID_REQUEST, or the code the documentation gives the rule)",
        () =>
          Effect.gen(function*() {
            const org = yield* SvcTest.org()
            const failures: Array<string> = []
            const skipped: Array<string> = []
            let checked = 0
            const tried = new Set<string>()
            for (const operation of operations) {
              const name = `${operation.method} ${operation.template}`
              for (const variation of variations(operation)) {
                const started = performance.now()
                const response = yield* send(org.key, operation, variation.path, variation.query, variation.body)
                if (process.env.CONTRACT_DEBUG) {
                  console.log(Math.round(performance.now() - started), name, variation.field, response.status)
                }
                if (unreachable(response)) {
                  skipped.push(name)
                  break
                }
                checked++
                tried.add(variation.field)
                const shown = `${name} ${variation.field}=${JSON.stringify(variation.value)?.slice(0, 60)}`
                const code: string | undefined = response.json?.code
                const byCode = code === "INVALID_REQUEST" ||
                  (code !== undefined && (ANSWERED_AS[code]?.test(variation.field) ?? false))
                const namesIt = response.status === 400 && byCode &&
                  (response.json?.field === variation.field || response.json?.field === dotted(variation.field) ||
                    (variation.union !== undefined && response.json?.field === variation.union))
                if (variation.why === undefined) {
                  if (response.status >= 500) {
                    failures.push(`${shown}: allowed, answered ${response.status}`)
                  } else if (namesIt) {
                    failures.push(`${shown}: allowed by the document, refused: ${response.json.detail}`)
                  } else if (refusedByOwnRule(response, variation.field)) {
                    failures.push(
                      `${shown}: allowed by the document, refused ${response.json.code}: ${response.json.detail}`
                    )
                  }
                } else if (!namesIt) {
                  failures.push(
                    `${shown}: ${variation.why}, answered ${response.status} ${response.json?.code ?? ""} ${
                      response.json?.field ?? ""
                    }`
                  )
                } else if (RULELESS.test(String(response.json.detail))) {
                  failures.push(`${shown}: ${variation.why}, refused without saying the rule: ${response.json.detail}`)
                }
              }
            }
            assert.deepStrictEqual(failures, [])
            assert.isAbove(checked, 300)
            // Members of objects inside objects, of arrays of objects, items of arrays and a map's keys were tried too.
            for (
              const field of [
                "rules[0].condition",
                "rules[1].result.reason",
                "policy.rules[0].name",
                "session.id",
                "action_classes[0]",
                "scopes[0]",
                "headers[\"a b\"]"
              ]
            ) {
              assert.isTrue(tried.has(field), field)
            }
            // Only the operations that a key cannot reach by design.
            for (const name of new Set(skipped)) {
              assert.match(name, /\/v1\/console\/(sign-in|sign-out|me)|\/v1\/approval-links\//, name)
            }
          }),
        { timeout: 120_000 }
      )
    })

    describe("generated requests", () => {
      /** Codes of rules the document states in words and the service checks (a public address, an endpoint's events, names differing only in case). */
      const SERVICE_CODES = new Set(["INVALID_URL", "INVALID_WEBHOOK_EVENTS", "INVALID_HEADERS"])

      it.effect(
        "whole requests generated from the document (path, query and every body member) are never refused as invalid nor 5xx",
        () =>
          Effect.gen(function*() {
            const org = yield* SvcTest.org()
            const failures: Array<string> = []
            let sent = 0
            for (const operation of operations) {
              const name = `${operation.method} ${operation.template}`
              const pathParameters = operation.parameters.filter((p) => p.in === "path")
              const queryParameters = operation.parameters.filter((p) => p.in === "query" && !STATEFUL.has(p.name))
              const request = fc.record({
                path: fc.record(
                  Object.fromEntries(pathParameters.map((p) => [
                    p.name,
                    stringOrText(p.schema).filter((value) => value !== "" && !value.includes("/"))
                  ]))
                ),
                query: fc.record(Object.fromEntries(queryParameters.map((p) => [p.name, stringOrText(p.schema)])), {
                  requiredKeys: queryParameters.filter((p) => p.required === true).map((p) => p.name) as Array<never>
                }),
                body: operation.body === undefined
                  ? fc.constant(undefined)
                  : arbitraryOf(operation.body, operation.example)
              })
              // Only requests the document itself accepts (ajv on the body), so a refusal is the server's, never the generator's.
              const valid = request.filter(({ body }) =>
                operation.body === undefined || schemaViolation(operation.body, `generated ${name}`, body) === undefined
              )
              for (const { path, query, body } of fc.sample(valid, { numRuns: GENERATED, seed: SEED })) {
                const response = yield* send(
                  org.key,
                  operation,
                  path as Record<string, string>,
                  query as Record<string, string>,
                  body
                )
                if (unreachable(response)) break
                sent++
                const shown = `${name} ${JSON.stringify({ path, query, body }).slice(0, 300)}`
                if (response.status >= 500) failures.push(`${shown}: answered ${response.status}`)
                else if (response.status === 400 && !SERVICE_CODES.has(response.json?.code)) {
                  failures.push(`${shown}: refused ${response.json?.code}: ${response.json?.detail}`)
                }
              }
            }
            assert.deepStrictEqual(failures, [])
            assert.isAbove(sent, 200)
          }),
        { timeout: 180_000 }
      )
    })

    describe("bounds", () => {
      it("every string and integer an operation accepts is bounded in the document: a length, a pattern, an enum or a format; a minimum and a maximum", () => {
        const unbounded: Array<string> = []
        const walk = (schema: Json, at: string, where: string): void => {
          schema = resolve(schema)
          for (const variant of (schema.anyOf ?? []) as Array<Json>) walk(variant, at, where)
          const name = `${where} ${at}`
          if (
            schema.type === "string" && schema.enum === undefined && schema.maxLength === undefined &&
            schema.pattern === undefined && schema.format === undefined
          ) unbounded.push(name)
          if (
            schema.type === "integer" && schema.enum === undefined &&
            (schema.minimum === undefined || schema.maximum === undefined)
          ) unbounded.push(name)
          if (schema.type === "object") {
            for (const [member, inner] of Object.entries((schema.properties ?? {}) as Record<string, Json>)) {
              walk(
                inner,
                at === "" ? member : `${at}.${member}`,
                where
              )
            }
            if (isRecord(schema.additionalProperties)) walk(schema.additionalProperties, `${at}{}`, where)
          }
          if (schema.type === "array" && isRecord(schema.items)) walk(schema.items, `${at}[]`, where)
        }
        for (const operation of operations) {
          const where = `${operation.method} ${operation.template}`
          if (operation.body !== undefined) walk(operation.body, "", where)
          for (const parameter of operation.parameters) {
            if (parameter.in === "path" || parameter.in === "query") {
              walk(parameter.schema, parameter.name, where)
            }
          }
        }
        assert.deepStrictEqual(unbounded, [])
      })
    })

    describe("cursors", () => {
      /** Strings a list never issued: made up (any text up to the documented 200 characters, and cursor-shaped ones). */
      const madeUp = [
        "",
        ".",
        "MA.",
        "a".repeat(200),
        ...fc.sample(fc.string({ maxLength: 200 }), { numRuns: SAMPLES, seed: SEED }),
        ...fc.sample(fc.stringMatching(/^[A-Za-z0-9_-]{1,27}\.[A-Za-z0-9_-]{22}$/), { numRuns: SAMPLES, seed: SEED })
      ]

      it.effect(
        "a cursor a list issued gives its next page; any other value (made up, edited, another list's, over 200 characters) is 400 naming cursor",
        () =>
          Effect.gen(function*() {
            const org = yield* SvcTest.org()
            const client = org.client
            // Two items or more in every list that takes a cursor, so that a page of one has a next one.
            const task = yield* client.tasks.create({ payload: { name: "paged", answer_schema: { type: "object" } } })
            yield* client.tasks.create({ payload: { name: "paged-too", answer_schema: { type: "object" } } })
            const feedback: Array<string> = []
            for (let i = 0; i < 5; i++) {
              const run = yield* client.tasks.logRun({
                params: { task_id: task.id },
                payload: { input: { n: i }, answer: {} }
              })
              feedback.push(
                (yield* client.feedback.submit({
                  payload: { inference_log_id: run.trace_id, score: -1, correction: { n: i } }
                })).id
              )
            }
            const promote = (ids: ReadonlyArray<string>) =>
              Effect.gen(function*() {
                for (const id of ids) yield* client.feedback.stage({ params: { feedback_id: id } })
                const preview = yield* client.feedback.promotePreview({ params: { task_id: task.id }, query: {} })
                return yield* client.feedback.promote({
                  params: { task_id: task.id },
                  payload: {
                    base_dataset_id: preview.base_dataset_id,
                    expected_feedback_revision: preview.expected_feedback_revision
                  }
                })
              })
            const dataset = yield* promote(feedback.slice(0, 2))
            yield* promote(feedback.slice(2, 3))
            for (const id of feedback.slice(3)) yield* client.feedback.stage({ params: { feedback_id: id } })
            const session = yield* client.agentSessions.create({ payload: {} })
            const steps: Array<string> = []
            for (let i = 0; i < 4; i++) {
              const step = yield* client.agentSessions.governStep({
                params: { session_id: session.id },
                payload: { step_id: `step-${i}`, tool: "t", action_class: "paged.review", arguments: {} }
              })
              steps.push(step.approval_id!)
            }
            for (const id of steps.slice(0, 2)) {
              yield* client.approvals.decide({ params: { approval_id: id }, payload: { decision: "approve" } })
            }

            // Delivery records of an endpoint and of a telemetry destination (rows as the queue keeps them).
            const svc = yield* SvcTest
            const { endpoint } = yield* client.notifications.create({ payload: { url: "https://127.0.0.1:9/paged" } })
            const destination = yield* client.telemetry.create({ payload: { url: "https://127.0.0.1:9/v1/traces" } })
            for (
              const [kind, target] of [["webhook", endpoint.id], ["webhook", endpoint.id], [
                "telemetry",
                destination.id
              ], ["telemetry", destination.id]]
            ) {
              yield* svc.sql`
            INSERT INTO deliveries (id, org_id, kind, target_id, status, label, event_id, finished_at)
            VALUES (gen_random_uuid(), ${org.orgId}, ${kind}, ${target}, 'failed', 'approval.requested x', gen_random_uuid(), now())`
            }
            const paths: Record<string, string> = {
              task_id: task.id,
              dataset_id: dataset.dataset_id,
              session_id: session.id
            }
            const pathsOf = (operation: Operation) => ({
              ...paths,
              id: operation.template.startsWith("/v1/telemetry") ? destination.id : endpoint.id
            })
            const listing = operations.filter((operation) =>
              operation.parameters.some((p) => p.name === "cursor" && p.in === "query")
            )
            const cursorOf = (response: RawResponse) => response.json?.next_cursor as string | null | undefined
            const failures: Array<string> = []
            const issued = new Map<string, string>()
            for (const operation of listing) {
              const name = `${operation.method} ${operation.template}`
              const first = yield* send(org.key, operation, pathsOf(operation), { limit: "1" }, undefined)
              const cursor = cursorOf(first)
              if (first.status !== 200 || typeof cursor !== "string") {
                failures.push(
                  `${name}: a first page of one answered ${first.status} with next_cursor ${JSON.stringify(cursor)}`
                )
                continue
              }
              issued.set(name, cursor)
              const next = yield* send(org.key, operation, pathsOf(operation), { limit: "1", cursor }, undefined)
              if (next.status !== 200) {
                failures.push(`${name}: its own cursor answered ${next.status} ${next.text.slice(0, 200)}`)
              }
            }
            for (const operation of listing) {
              const name = `${operation.method} ${operation.template}`
              const own = issued.get(name) ?? "MA.AAAAAAAAAAAAAAAAAAAAAA"
              const others = [...issued].filter(([other]) => other !== name).map(([, cursor]) => cursor)
              const edited = `${own.slice(0, -1)}${own.endsWith("A") ? "B" : "A"}`
              const refused: ReadonlyArray<readonly [string, string]> = [
                ...madeUp.map((value) => ["made up", value] as const),
                ["edited", edited],
                ["another list's", others[0]!],
                ["over 200 characters", "a".repeat(201)]
              ]
              for (const [why, cursor] of refused) {
                const response = yield* send(org.key, operation, pathsOf(operation), { limit: "1", cursor }, undefined)
                if (
                  !(response.status === 400 && response.json?.code === "INVALID_REQUEST" &&
                    response.json?.field === "cursor")
                ) {
                  failures.push(
                    `${name} cursor=${JSON.stringify(cursor).slice(0, 60)} (${why}): answered ${response.status} ${
                      response.json?.code ?? ""
                    } ${response.json?.field ?? ""}`
                  )
                }
              }
            }
            assert.deepStrictEqual(failures, [])
            assert.isAtLeast(listing.length, 9)
          }),
        { timeout: 60_000 }
      )
    })

    describe("media types", () => {
      it.effect("Accept is not negotiated: Accept: text/plain on a JSON route still answers JSON, never 406", () =>
        Effect.gen(function*() {
          const svc = yield* SvcTest
          const org = yield* SvcTest.org()
          for (const accept of ["text/plain", "application/xml", "*/*"]) {
            const response = yield* raw(`${svc.baseUrl}/v1/tasks`, {
              headers: { authorization: `Bearer ${org.key}`, accept }
            })
            assert.strictEqual(response.status, 200, accept)
            assert.match(response.headers.get("content-type") ?? "", /^application\/json/, accept)
          }
        }))
    })

    describe("path parameters", () => {
      it.effect("each reaches its operation at its documented maximum length (a step_id of 200, an action_class of 128)", () =>
        Effect.gen(function*() {
          const org = yield* SvcTest.org()
          const names = new Set(
            operations.flatMap((operation) =>
              operation.parameters.filter((p) => p.in === "path").map((p) => p.name as string)
            )
          )
          const reached: Array<string> = []
          for (const operation of operations) {
            for (const parameter of operation.parameters.filter((p) => p.in === "path")) {
              const value = longest(resolve(parameter.schema)) ?? defaultPath(parameter)
              const paths = Object.fromEntries(
                operation.parameters.filter((p) => p.in === "path").map((p) => [p.name, defaultPath(p)])
              )
              const response = yield* send(
                org.key,
                operation,
                { ...paths, [parameter.name]: value },
                {},
                operation.body === undefined ? undefined : operation.example ?? {}
              )
              // The router's own 404 (no such route) carries `request_id`; an operation's never does.
              assert.isFalse(
                response.status === 404 && response.json?.request_id !== undefined,
                `${operation.method} ${operation.template} ${parameter.name} (${value.length})`
              )
              assert.notStrictEqual(
                response.status,
                400,
                `${operation.method} ${operation.template} ${parameter.name}: ${response.text}`
              )
              reached.push(parameter.name)
            }
          }
          assert.deepStrictEqual(new Set(reached), names)
        }))

      it.effect("a step whose step_id has 200 characters gets its outcome; an action class of 128 gets its policy", () =>
        Effect.gen(function*() {
          const org = yield* SvcTest.org()
          const session = yield* org.client.agentSessions.create({ payload: {} })
          const actionClass = `a${"b".repeat(127)}`
          const policy = yield* org.client.approvalPolicies.put({
            params: { action_class: actionClass },
            payload: { mode: "allow", review_seconds: 60, expiring_notice_seconds: 0, timeout_action: "reject" }
          })
          assert.strictEqual(policy.action_class, actionClass)
          for (const stepId of ["s".repeat(200), "é".repeat(200)]) {
            yield* org.client.agentSessions.governStep({
              params: { session_id: session.id },
              payload: { step_id: stepId, tool: "t", action_class: actionClass, arguments: {} }
            })
            const outcome = yield* org.client.agentSessions.reportOutcome({
              params: { session_id: session.id, step_id: stepId },
              payload: { status: "succeeded" }
            })
            assert.strictEqual(outcome.step_id, stepId)
          }
        }))
    })
  }
)
