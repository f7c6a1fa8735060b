/**
 * The whole OpenAPI document, after the HttpApi generated it: what JSON
 * Schema cannot say from the schemas alone (problem examples by code, open
 * objects, integer parameters, tag descriptions), the license and servers.
 * `Documentation.ts` documents each operation.
 */
import { OpenApi } from "effect/http-api"
import { ApiLicense, ApiServers, TagDescriptions } from "./Documentation.ts"
import { type ProblemContext, ProblemExamples } from "./ProblemExamples.ts"

type Operation = Record<string, any>

const PROBLEM_TYPE_PREFIX = "urn:svc:problem:"
const PROBLEM_JSON = "application/problem+json"
const METHODS = ["get", "put", "post", "delete", "options", "head", "patch", "trace"] as const

const refName = (ref: string) => ref.replace("#/components/schemas/", "")

/** The problem components an error response refers to (`$ref`, or `anyOf` of `$ref`s). */
const problemRefs = (schema: Operation | undefined): Array<string> =>
  schema === undefined
    ? []
    : typeof schema.$ref === "string"
    ? [refName(schema.$ref)]
    : Array.isArray(schema.anyOf)
    ? schema.anyOf.flatMap((member: Operation) => problemRefs(member))
    : []

const enumValue = (schema: Operation | undefined): unknown => Array.isArray(schema?.enum) ? schema.enum[0] : undefined

const isProblemSchema = (schema: Operation): boolean => {
  const type = enumValue(schema.properties?.type)
  return typeof type === "string" && type.startsWith(PROBLEM_TYPE_PREFIX)
}

const expectedOf = (schema: Operation | undefined): string =>
  schema?.format === "uuid"
    ? "Expected a UUID"
    : schema?.type === "object"
    ? "Expected an object"
    : schema?.type === "integer" || schema?.type === "number"
    ? "Expected a number"
    : "Expected a string"

const firstField = (op: Operation): Pick<ProblemContext, "field" | "expected"> => {
  const parameters = op.parameters as Array<Operation>
  const path = parameters.find((parameter) => parameter.in === "path")
  if (path !== undefined) return { field: path.name, expected: expectedOf(path.schema) }
  const body = op.requestBody?.content?.["application/json"]?.schema
  const member: string | undefined = body?.required?.[0] ?? Object.keys(body?.properties ?? {})[0]
  if (member !== undefined) return { field: member, expected: expectedOf(body.properties?.[member]) }
  const query = parameters.find((parameter) => parameter.in === "query")
  return { field: query?.name, expected: expectedOf(query?.schema) }
}

/**
 * An object schema that names no members (a JSON object of any shape, such
 * as an answer schema) says so explicitly: generators such as
 * openapi-typescript otherwise type it as an object with no members.
 */
const openObjects = (value: unknown): void => {
  if (Array.isArray(value)) {
    for (const item of value) openObjects(item)
    return
  }
  if (typeof value !== "object" || value === null) return
  const schema = value as Operation
  if (
    schema.type === "object" && schema.properties === undefined && schema.additionalProperties === undefined &&
    schema.patternProperties === undefined
  ) {
    schema.additionalProperties = true
  }
  for (const [key, inner] of Object.entries(schema)) {
    // Examples are data, not schemas.
    if (key !== "example" && key !== "examples") openObjects(inner)
  }
}

// A parameter sent as text that is a number (`IntegerFromDigits`): Effect writes `{"type": "string", "allOf": [{"type": "integer", …}]}`,
// which no value satisfies; OpenAPI describes a parameter by the value it serializes, the `integer` its check states.
const integerParameter = (schema: Operation): Operation =>
  schema.type === "string" && schema.allOf?.length === 1 && schema.allOf[0].type === "integer"
    ? (({ allOf, type: _type, ...rest }: Operation) => ({ ...allOf[0], ...rest }))(schema)
    : schema

/**
 * Completes the generated document: tag descriptions; explicit open objects; `status` and `title`
 * required in problems (always sent); 413 and 415 only where a request body
 * is read; an example per problem code on every error response, and a
 * description naming the codes.
 */
const completeDocument = (spec: Record<string, any>): Record<string, any> => {
  const schemas: Record<string, Operation> = spec.components?.schemas ?? {}
  openObjects(schemas)
  openObjects(spec.paths)
  for (const schema of Object.values(schemas)) {
    if (isProblemSchema(schema)) {
      schema.required = [...new Set([...(schema.required ?? []), "type", "status", "title", "code"])]
    }
  }
  spec.tags = (spec.tags as Array<Operation>).map((tag) =>
    tag.description === undefined && TagDescriptions[tag.name] !== undefined
      ? { ...tag, description: TagDescriptions[tag.name] }
      : tag
  )
  for (const pathItem of Object.values(spec.paths as Record<string, Operation>)) {
    for (const method of METHODS) {
      const op: Operation | undefined = pathItem[method]
      if (op === undefined) continue
      for (const parameter of op.parameters as Array<Operation>) parameter.schema = integerParameter(parameter.schema)
      if (op.requestBody === undefined) {
        delete op.responses["413"]
        delete op.responses["415"]
      }
      const scope = (op.security as Array<Record<string, Array<string>>>)
        .flatMap((requirement) => Object.values(requirement).flat())[0]
      const context: ProblemContext = { scope, ...firstField(op) }
      for (const [status, response] of Object.entries(op.responses as Record<string, Operation>)) {
        const media = response.content?.[PROBLEM_JSON]
        if (Number(status) < 400 || media === undefined) continue
        const problems = problemRefs(media.schema).map((name) => schemas[name]).filter((schema) => schema !== undefined)
        const titles = problems.map((schema) => enumValue(schema.properties?.title))
        const examples: Record<string, { summary: string; value: unknown }> = {}
        for (const schema of problems) {
          const code = enumValue(schema.properties?.code)
          const extras = typeof code === "string" ? ProblemExamples[code] : undefined
          if (typeof code !== "string" || extras === undefined) continue
          examples[code] = {
            summary: String(enumValue(schema.properties?.title)),
            value: {
              type: enumValue(schema.properties?.type),
              status: enumValue(schema.properties?.status),
              title: enumValue(schema.properties?.title),
              code,
              ...extras(context)
            }
          }
        }
        if (Object.keys(examples).length > 0) media.examples = examples
        if (response.description === titles.join(" | ")) {
          response.description = problems
            .map((schema) =>
              `\`${String(enumValue(schema.properties?.code))}\`: ${String(enumValue(schema.properties?.title))}`
            )
            .join("; ")
        }
      }
    }
  }
  return spec
}

type DocumentTransform = (spec: Record<string, any>) => Record<string, any>

/**
 * The document-wide annotations, to merge into the HttpApi with
 * `annotateMerge`. An API has one `OpenApi.Transform`: pass any other
 * document-wide transform here (it runs before `completeDocument`) rather
 * than annotating the API with it, which would replace this one.
 */
export const apiDocumentation = (...transforms: ReadonlyArray<DocumentTransform>) =>
  OpenApi.annotations({
    license: ApiLicense,
    servers: ApiServers,
    transform: (spec) => completeDocument(transforms.reduce((document, transform) => transform(document), spec))
  })
