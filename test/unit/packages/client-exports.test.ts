/**
 * `@svc/client` exports every error class the API can answer: a consumer
 * names a problem's class (for `instanceof`, or a type annotation on the
 * handler of `Effect.catchTag`) by importing it from the client.
 */
import { assert, describe, it } from "@effect/vitest"
import { HttpApi } from "effect/http-api"
import * as Client from "../../../src/client.ts"

/** Every class among the error schemas of every endpoint of the API (middleware's errors included). */
const errorClasses = (): Map<string, unknown> => {
  const found = new Map<string, unknown>()
  HttpApi.reflect(Client.Api, {
    onGroup: () => {},
    onEndpoint: ({ errors }) => {
      for (const schemas of errors.values()) {
        for (const wrapped of schemas) {
          // A status annotation wraps the class: its `schema` is the class itself.
          let schema: unknown = wrapped
          while (typeof schema === "function" && "schema" in schema && schema.schema !== schema) schema = schema.schema
          if (typeof schema === "function" && schema.name !== "") found.set(schema.name, schema)
        }
      }
    }
  })
  return found
}

describe("the client's exports", () => {
  it("every error class an endpoint of the API answers is exported by @svc/client under its own name", () => {
    const classes = errorClasses()
    assert.isAtLeast(classes.size, 20)
    assert.isTrue(classes.has("CorrectionShapeMismatch"))
    const exported = Client as Record<string, unknown>
    const missing = [...classes].filter(([name, schema]) => exported[name] !== schema).map(([name]) => name)
    assert.deepStrictEqual(missing.sort(), [])
  })
})
