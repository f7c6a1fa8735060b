/**
 * Answer schemas are JSON Schema, checked and applied by Ajv (draft-07,
 * 2019-09 and 2020-12; 2020-12 when `$schema` is absent). Formats come from
 * ajv-formats. Remote `$ref`s are never fetched: a schema must be
 * self-contained.
 */
import { Context, Layer, Result } from "effect"
import { Ajv as AjvDraft07, type ErrorObject, type ValidateFunction } from "ajv"
import { Ajv2019 } from "ajv/dist/2019.js"
import { Ajv2020 } from "ajv/dist/2020.js"
import addFormatsModule from "ajv-formats"

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
    message = `must be one of ${JSON.stringify(params.allowedValues)}`
  } else if (error.keyword === "const") {
    message = `must equal ${JSON.stringify(params.allowedValue)}`
  }
  return { path, message, keyword: error.keyword }
}

export class AnswerSchemas extends Context.Service<AnswerSchemas, {
  /** `Failure` with what is wrong when `schema` is not a usable JSON Schema. */
  readonly check: (schema: unknown) => Result.Result<void, string>
  /**
   * Validates `value` against `schema`. Compiled validators are cached by
   * `cacheKey` (a task id: a task's schema never changes).
   */
  readonly validate: (
    cacheKey: string,
    schema: unknown,
    value: unknown
  ) => ReadonlyArray<SchemaViolation>
}>()("svc/tasks/AnswerSchemas") {
  static readonly make = () => {
    const draft07 = makeAjv(new AjvDraft07(options))
    const draft2019 = makeAjv(new Ajv2019(options) as unknown as AnyAjv)
    const draft2020 = makeAjv(new Ajv2020(options) as unknown as AnyAjv)
    const cache = new Map<string, ValidateFunction>()
    const CACHE_LIMIT = 2000

    const pick = (schema: Record<string, unknown>): Result.Result<AnyAjv, string> => {
      const declared = schema.$schema
      if (declared === undefined) return Result.succeed(draft2020)
      if (typeof declared !== "string") return Result.fail("$schema must be a string")
      if (DRAFT_2020.test(declared)) return Result.succeed(draft2020)
      if (DRAFT_2019.test(declared)) return Result.succeed(draft2019)
      if (DRAFT_07.test(declared)) return Result.succeed(draft07)
      return Result.fail(`unsupported $schema ${JSON.stringify(declared)}: use draft-07, 2019-09 or 2020-12`)
    }

    const compile = (schema: unknown): Result.Result<ValidateFunction, string> => {
      if (typeof schema !== "object" || schema === null || Array.isArray(schema)) {
        return Result.fail("must be a JSON Schema object")
      }
      return Result.flatMap(pick(schema as Record<string, unknown>), (ajv) => {
        const { $id: _ignored, ...withoutId } = schema as Record<string, unknown>
        if (!ajv.validateSchema(withoutId)) {
          const first = ajv.errors?.[0]
          const where = first ? pointerToPath(first.instancePath) : ""
          return Result.fail(`${where === "" ? "schema" : where} ${first?.message ?? "is not valid JSON Schema"}`)
        }
        try {
          // `$id` is dropped so that identical ids in different tasks never
          // clash in Ajv's schema registry.
          return Result.succeed(ajv.compile(withoutId))
        } catch (error) {
          return Result.fail(error instanceof Error ? error.message : String(error))
        }
      })
    }

    return AnswerSchemas.of({
      check: (schema) => Result.map(compile(schema), () => undefined),
      validate: (cacheKey, schema, value) => {
        let validator = cache.get(cacheKey)
        if (validator === undefined) {
          const compiled = compile(schema)
          // A stored schema was checked on the way in; failing now is a bug.
          if (Result.isFailure(compiled)) throw new Error(`stored answer schema does not compile: ${compiled.failure}`)
          validator = compiled.success
          if (cache.size >= CACHE_LIMIT) cache.delete(cache.keys().next().value!)
          cache.set(cacheKey, validator)
        }
        return validator(value) ? [] : (validator.errors ?? []).map(describe)
      }
    })
  }

  static readonly layer = Layer.sync(AnswerSchemas, AnswerSchemas.make)
}

