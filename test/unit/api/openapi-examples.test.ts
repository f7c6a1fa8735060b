/**
 * The document's examples are what they illustrate: every request example
 * is a request the operation's schema accepts (a tool that sends the
 * examples as they are, as property-based testers and "try it" pages do,
 * sends valid requests), and every response example (success or problem,
 * `example` or each of `examples`) is an answer the schema of its status
 * and media type accepts. Validated with ajv (JSON Schema 2020-12, formats)
 * against the document `/openapi.json` serves.
 */
import { assert, describe, it } from "@effect/vitest"
import { document, schemaViolation } from "../../support/contract.ts"

type Json = Record<string, any>

const METHODS = ["get", "put", "post", "delete", "patch"]

const operations = Object.entries(document.paths as Record<string, Json>).flatMap(([path, item]) =>
  METHODS.filter((method) => item[method] !== undefined).map((method) => ({
    name: `${method.toUpperCase()} ${path}`,
    op: item[method] as Json
  }))
)

/** Each example of a media type: `example`, and the `value` of each of `examples`. */
const examplesOf = (media: Json): ReadonlyArray<readonly [string, unknown]> => [
  ...(media.example === undefined ? [] : [["example", media.example] as const]),
  ...Object.entries((media.examples ?? {}) as Record<string, Json>).map(([name, example]) =>
    [`examples.${name}`, example.value] as const
  )
]

describe("the document's examples", () => {
  it("every request example is a valid request: the operation's request schema accepts it", () => {
    const refused: Array<string> = []
    let checked = 0
    for (const { name, op } of operations) {
      for (const [media, content] of Object.entries((op.requestBody?.content ?? {}) as Record<string, Json>)) {
        for (const [which, value] of examplesOf(content)) {
          checked++
          const why = schemaViolation(content.schema, `request ${name} ${media}`, value)
          if (why !== undefined) refused.push(`${name} ${media} ${which}: ${why}`)
        }
      }
    }
    assert.deepStrictEqual(refused, [])
    assert.isAbove(checked, 20)
  })

  it("every response example is an answer the schema of its status and media type accepts", () => {
    const refused: Array<string> = []
    let checked = 0
    for (const { name, op } of operations) {
      for (const [status, response] of Object.entries(op.responses as Record<string, Json>)) {
        for (const [media, content] of Object.entries((response.content ?? {}) as Record<string, Json>)) {
          // An event stream's example is one event; its schema is the event's.
          for (const [which, value] of examplesOf(content)) {
            checked++
            const why = schemaViolation(content.schema, `response ${name} ${status} ${media}`, value)
            if (why !== undefined) refused.push(`${name} ${status} ${media} ${which}: ${why}`)
          }
        }
      }
    }
    assert.deepStrictEqual(refused, [])
    assert.isAbove(checked, 400)
  })
})
