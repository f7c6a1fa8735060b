/**
 * Answer schemas are JSON Schema, checked and applied by Ajv (draft-07,
 * 2019-09 and 2020-12; 2020-12 when `$schema` is absent). Formats come from
 * ajv-formats. Remote `$ref`s are never fetched: a schema must be
 * self-contained.
 *
 * This module is synchronous and runs where it is called: the service runs
 * it only inside its validation workers (`validation-worker.ts`), whose
 * deadline bounds what a schema or a value can cost. Compiled validators
 * live in a cache bounded by count and nowhere else: each schema is removed
 * from Ajv's own registries as soon as it is compiled (Ajv would keep every
 * compiled schema forever otherwise), so an evicted validator is collected.
 */
import { Ajv as AjvDraft07, type ErrorObject, type ValidateFunction } from "ajv"
import addFormatsModule from "ajv-formats"
import { Ajv2019 } from "ajv/dist/2019.js"
import { Ajv2020 } from "ajv/dist/2020.js"

// ajv-formats is CommonJS; its default export arrives wrapped under Node ESM.
const addFormats = ((addFormatsModule as unknown as { default?: typeof addFormatsModule }).default ??
  addFormatsModule) as unknown as (ajv: unknown) => void

const DRAFT_07 = /^https?:\/\/json-schema\.org\/draft-07\/schema#?$/
const DRAFT_2019 = /^https:\/\/json-schema\.org\/draft\/2019-09\/schema#?$/
const DRAFT_2020 = /^https:\/\/json-schema\.org\/draft\/2020-12\/schema#?$/

type AnyAjv = InstanceType<typeof AjvDraft07>

const makeAjv = <A extends AnyAjv>(ajv: A): A => {
  addFormats(ajv)
  return ajv
}

const options = { allErrors: true, strict: false, validateFormats: true } as const

/** At most this many violations are reported for one value (the first ones Ajv finds). */
export const MAX_VIOLATIONS = 100

/** One way a value breaks its schema, located by a JSON path relative to the value. */
export interface SchemaViolation {
  /** `items[2].price`; empty for the value itself. */
  readonly path: string
  readonly message: string
  readonly keyword: string
}

/**
 * One more segment on a JSON path: identifiers dotted (`items.price`), array
 * indexes in brackets (`items[2]`), any other member name as a JSON string in
 * brackets (`["unit price"]`, `["a.b"]`).
 */
export const appendPath = (path: string, segment: string | number): string =>
  typeof segment === "number"
    ? `${path}[${segment}]`
    : /^[A-Za-z_$][A-Za-z0-9_$]*$/.test(segment)
    ? path === "" ? segment : `${path}.${segment}`
    : `${path}[${JSON.stringify(segment)}]`

/** A JSON Pointer (`/items/2/price`) as a JSON path (`items[2].price`). */
export const pointerToPath = (pointer: string): string => {
  if (pointer === "") return ""
  let out = ""
  for (const raw of pointer.split("/").slice(1)) {
    const segment = raw.replaceAll("~1", "/").replaceAll("~0", "~")
    out = /^\d+$/.test(segment) ? `${out}[${segment}]` : appendPath(out, segment)
  }
  return out
}

const describe = (error: ErrorObject): SchemaViolation => {
  let path = pointerToPath(error.instancePath)
  let message = error.message ?? "is invalid"
  const params = error.params as Record<string, unknown>
  if (error.keyword === "required" && typeof params.missingProperty === "string") {
    path = appendPath(path, params.missingProperty)
    message = "is required"
  } else if (error.keyword === "additionalProperties" && typeof params.additionalProperty === "string") {
    path = appendPath(path, params.additionalProperty)
    message = "is not allowed by the schema"
  } else if (error.keyword === "enum" && Array.isArray(params.allowedValues)) {
    message = `must be one of ${JSON.stringify(params.allowedValues).slice(0, 500)}`
  } else if (error.keyword === "const") {
    message = `must equal ${JSON.stringify(params.allowedValue).slice(0, 500)}`
  }
  return { path, message, keyword: error.keyword }
}

export type Compiled =
  | { readonly ok: true; readonly validate: ValidateFunction }
  | { readonly ok: false; readonly message: string }

export type Validated =
  | { readonly _tag: "Checked"; readonly violations: ReadonlyArray<SchemaViolation> }
  | { readonly _tag: "Unusable"; readonly message: string }

export interface SchemaCompiler {
  /** Compiles `schema`; `ok: false` says what is wrong when it is not a usable JSON Schema. */
  readonly compile: (schema: unknown) => Compiled
  /**
   * Compiles `schema` under `key` (a task id: a task's schema never
   * changes) and keeps it, or reuses what is kept under `key`.
   */
  readonly prepare: (key: string, schema: unknown) => Compiled
  /** Whether a validator is kept under `key`. */
  readonly has: (key: string) => boolean
  /** Validates with the validator kept under `key`, compiling `schema` first when none is. */
  readonly validate: (key: string, schema: unknown, value: unknown) => Validated
  /** How many validators are kept, and how many schemas Ajv's registries hold (for tests). */
  readonly stats: () => { readonly cached: number; readonly registered: number }
}

export const makeSchemaCompiler = (cacheEntries: number): SchemaCompiler => {
  const draft07 = makeAjv(new AjvDraft07(options))
  const draft2019 = makeAjv(new Ajv2019(options) as unknown as AnyAjv)
  const draft2020 = makeAjv(new Ajv2020(options) as unknown as AnyAjv)
  const cache = new Map<string, ValidateFunction>()

  const pick = (schema: Record<string, unknown>): AnyAjv | string => {
    const declared = schema.$schema
    if (declared === undefined) return draft2020
    if (typeof declared !== "string") return "$schema must be a string"
    if (DRAFT_2020.test(declared)) return draft2020
    if (DRAFT_2019.test(declared)) return draft2019
    if (DRAFT_07.test(declared)) return draft07
    return `unsupported $schema ${JSON.stringify(declared.slice(0, 200))}: use draft-07, 2019-09 or 2020-12`
  }

  const compile = (schema: unknown): Compiled => {
    if (typeof schema !== "object" || schema === null || Array.isArray(schema)) {
      return { ok: false, message: "must be a JSON Schema object" }
    }
    const ajv = pick(schema as Record<string, unknown>)
    if (typeof ajv === "string") return { ok: false, message: ajv }
    // `$id` is dropped so that identical ids in different tasks never clash
    // in Ajv's schema registry.
    const { $id: _ignored, ...withoutId } = schema as Record<string, unknown>
    if (!ajv.validateSchema(withoutId)) {
      const first = ajv.errors?.[0]
      const where = first ? pointerToPath(first.instancePath) : ""
      return {
        ok: false,
        message: `${where === "" ? "schema" : where} ${first?.message ?? "is not valid JSON Schema"}`
      }
    }
    const registry = ajv as unknown as { refs: Record<string, unknown> }
    const before = { ...registry.refs }
    try {
      return { ok: true, validate: ajv.compile(withoutId) }
    } catch (error) {
      return { ok: false, message: error instanceof Error ? error.message.slice(0, 500) : "does not compile" }
    } finally {
      // The compiled function holds what it needs; Ajv's registries would
      // keep every schema ever compiled (memory) and let one task's nested
      // `$id`s be seen by the next compile (another organization's task).
      ajv.removeSchema(withoutId)
      for (const key of Object.keys(registry.refs)) {
        if (!Object.hasOwn(before, key)) delete registry.refs[key]
        else registry.refs[key] = before[key]
      }
    }
  }

  const prepare = (key: string, schema: unknown): Compiled => {
    const kept = cache.get(key)
    if (kept !== undefined) {
      // Least recently used first: a hit moves to the end.
      cache.delete(key)
      cache.set(key, kept)
      return { ok: true, validate: kept }
    }
    const compiled = compile(schema)
    if (!compiled.ok) return compiled
    while (cache.size >= cacheEntries) cache.delete(cache.keys().next().value!)
    cache.set(key, compiled.validate)
    return compiled
  }

  const validate = (key: string, schema: unknown, value: unknown): Validated => {
    const compiled = prepare(key, schema)
    if (!compiled.ok) return { _tag: "Unusable", message: compiled.message }
    if (compiled.validate(value)) return { _tag: "Checked", violations: [] }
    return { _tag: "Checked", violations: (compiled.validate.errors ?? []).slice(0, MAX_VIOLATIONS).map(describe) }
  }

  const registered = (ajv: AnyAjv) => (ajv as unknown as { _cache: Map<unknown, unknown> })._cache.size

  return {
    compile,
    prepare,
    has: (key) => cache.has(key),
    validate,
    stats: () => ({
      cached: cache.size,
      registered: registered(draft07) + registered(draft2019) + registered(draft2020)
    })
  }
}

/**
 * Makes Ajv compile each draft's meta-schema (a good part of a second on
 * first use): a worker does it before taking requests, so no request's
 * deadline pays for it.
 */
export const warmUp = (compiler: SchemaCompiler): void => {
  compiler.compile({ type: "object" })
  compiler.compile({ $schema: "https://json-schema.org/draft/2019-09/schema", type: "object" })
  compiler.compile({ $schema: "http://json-schema.org/draft-07/schema#", type: "object" })
}
