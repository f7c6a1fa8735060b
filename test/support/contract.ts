/**
 * The answers svc gives, checked against what `/openapi.json` says of them:
 * every JSON answer (success or problem) must validate against the schema
 * the document gives for its operation, status and media type, and its
 * status must be one the operation documents. `raw` (./http.ts) checks every
 * answer the integration suites receive through it.
 *
 * The document is the one `/openapi.json` serves (`OpenApi.fromApi(Api)`,
 * `completeDocument` included), compiled once per test process with ajv
 * (JSON Schema 2020-12, OpenAPI 3.1's dialect) and ajv-formats.
 */
import addFormatsModule from "ajv-formats"
import { Ajv2020 } from "ajv/dist/2020.js"
import { OpenApi } from "effect/http-api"
import { Api } from "../../src/api/Api.ts"

type Json = Record<string, any>

const addFormats = addFormatsModule as unknown as (ajv: Ajv2020) => Ajv2020

/** The document, as served. */
export const document: Json = OpenApi.fromApi(Api)

const DOCUMENT_ID = "https://svc.invalid/openapi.json"
const ajv = new Ajv2020({ strict: false, allErrors: true, validateFormats: true })
addFormats(ajv)
ajv.addSchema({ $id: DOCUMENT_ID, components: document.components })

const METHODS = ["get", "put", "post", "delete", "patch"] as const

interface Route {
  readonly method: string
  readonly template: string
  readonly pattern: RegExp
  readonly params: number
  readonly operation: Json
}

/** Every operation, literal paths before templated ones (`/history` before `/{approval_id}`). */
export const routes: ReadonlyArray<Route> = Object.entries(document.paths as Record<string, Json>)
  .flatMap(([template, item]) =>
    METHODS.filter((method) => item[method] !== undefined).map((method) => ({
      method: method.toUpperCase(),
      template,
      pattern: new RegExp(`^${template.replace(/[.*+?^$()|[\]\\]/g, "\\$&").replace(/\{[^}]+\}/g, "[^/]+")}$`),
      params: (template.match(/\{/g) ?? []).length,
      operation: item[method] as Json
    }))
  )
  .sort((a, b) => a.params - b.params)

export const routeOf = (method: string, path: string): Route | undefined =>
  routes.find((route) => route.method === method && route.pattern.test(path))

const pointer = (...segments: ReadonlyArray<string>) =>
  segments.map((segment) => segment.replaceAll("~", "~0").replaceAll("/", "~1")).join("/")

const validators = new Map<string, ReturnType<Ajv2020["compile"]>>()

/** The validator of one schema of the document, found by its place in it (refs resolve inside the document). */
const validatorOf = (schema: Json, key: string) => {
  let validate = validators.get(key)
  if (validate === undefined) {
    validate = ajv.compile({ $id: `https://svc.invalid/answers/${validators.size}`, ...rebase(schema) })
    validators.set(key, validate)
  }
  return validate
}

/** `#/components/...` refs point into the document's schema. */
const rebase = (value: unknown): any => {
  if (Array.isArray(value)) return value.map(rebase)
  if (typeof value !== "object" || value === null) return value
  return Object.fromEntries(
    Object.entries(value).map(([key, inner]) =>
      key === "$ref" && typeof inner === "string" && inner.startsWith("#/")
        ? [key, `${DOCUMENT_ID}${inner}`]
        : [key, rebase(inner)]
    )
  )
}

/** What the schema (a schema of the document, `$ref`s into it) refuses in `value`; `undefined` when it accepts it. */
export const schemaViolation = (schema: Json, key: string, value: unknown): string | undefined => {
  const validate = validatorOf(schema, key)
  return validate(value) ? undefined : ajv.errorsText(validate.errors)
}

/**
 * What is wrong with an answer, by the document, or `undefined` when it is
 * what the document says. Answers to paths the document does not have, and
 * bodies that are not JSON, are only checked for their status; a 404 to a
 * path or method no operation has must be the document's `NotFound`.
 */
export const contractViolation = (
  method: string,
  url: string,
  status: number,
  contentType: string | null,
  body: unknown
): string | undefined => {
  const path = new URL(url).pathname
  const route = routeOf(method, path)
  if (route === undefined) {
    // No such operation: the router's 404 must still be the document's not-found problem.
    if (status !== 404) return undefined
    const validate = validatorOf({ $ref: "#/components/schemas/NotFoundEncoded" }, "no route 404")
    return validate(body)
      ? undefined
      : `${method} ${path} (no such operation) answered a 404 the document's NotFound refuses: ${
        ajv.errorsText(validate.errors)
      }`
  }
  const where = `${method} ${route.template} answered ${status}`
  const response: Json | undefined = route.operation.responses[String(status)]
  if (response === undefined) {
    return `${where}, a status the document does not give for it (${Object.keys(route.operation.responses).join(", ")})`
  }
  const media = (contentType ?? "").split(";")[0]!.trim()
  if (media !== "application/json" && media !== "application/problem+json") return undefined
  const content: Json | undefined = response.content?.[media]
  if (content === undefined) {
    return `${where} with ${media}, which the document does not give for that status (${
      Object.keys(response.content ?? {}).join(", ") || "no body"
    })`
  }
  const validate = validatorOf(content.schema, pointer(route.template, route.method, String(status), media))
  if (validate(body)) return undefined
  return `${where} with a body the document's schema refuses: ${ajv.errorsText(validate.errors)}\n${
    JSON.stringify(body).slice(0, 2000)
  }`
}
