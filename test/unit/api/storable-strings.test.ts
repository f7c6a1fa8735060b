/**
 * Strings PostgreSQL cannot store (NUL, an unpaired UTF-16 surrogate) are
 * refused by the schemas of the endpoints that take them, not by a wrapper
 * around every handler: every string a request's path, query or body
 * declares is checked by `isStorable` first (so its message is the one a
 * client reads), and every JSON value by `isStorableJson`.
 */
import { assert, describe, it } from "@effect/vitest"
import { Result, Schema, type SchemaAST } from "effect"
import { Api } from "../../../src/api/Api.ts"
import {
  isStorable,
  isStorableJson,
  JsonObject,
  JsonValue,
  Text,
  UNSTORABLE_STRING_MESSAGE
} from "../../../src/api/Common.ts"

const firstCheckIs = (ast: SchemaAST.AST, filter: { readonly run: unknown }) =>
  ast.checks?.[0]?._tag === "Filter" && ast.checks[0].run === filter.run
const hasCheck = (ast: SchemaAST.AST, filter: { readonly run: unknown }) =>
  ast.checks?.some((check) => check._tag === "Filter" && check.run === filter.run) === true

/** Where in `ast` a string or JSON value is declared without the check. */
const unchecked = (ast: SchemaAST.AST, at: string, seen = new Set<SchemaAST.AST>()): Array<string> => {
  if (seen.has(ast)) return []
  seen.add(ast)
  if (hasCheck(ast, isStorableJson)) return []
  switch (ast._tag) {
    case "String":
      return firstCheckIs(ast, isStorable) ? [] : [at]
    case "Objects":
      return [
        ...ast.propertySignatures.flatMap((property) =>
          unchecked(property.type, `${at}.${String(property.name)}`, seen)
        ),
        ...ast.indexSignatures.flatMap((index) => [
          ...unchecked(index.parameter, `${at}[key]`, seen),
          ...unchecked(index.type, `${at}[value]`, seen)
        ])
      ]
    case "Arrays":
      return [...ast.elements, ...ast.rest].flatMap((element) => unchecked(element, `${at}[]`, seen))
    case "Union":
      return ast.types.flatMap((member) => unchecked(member, at, seen))
    case "Suspend":
      return unchecked(ast.thunk(), at, seen)
    case "Declaration":
      // A JSON value (or any declared type) without `isStorableJson`.
      return ast.typeParameters.length === 0
        ? [at]
        : ast.typeParameters.flatMap((parameter) => unchecked(parameter, at, seen))
    default:
      return []
  }
}

describe("unstorable strings are refused by the request schemas", () => {
  it("every string and JSON value of every endpoint's path, query and body is checked", () => {
    const missing: Array<string> = []
    let strings = 0
    for (const group of Object.values(Api.groups)) {
      for (const endpoint of Object.values(group.endpoints)) {
        const name = `${endpoint.method} ${endpoint.path}`
        const parts: Array<[string, Schema.Top | undefined]> = [["path", endpoint.params], ["query", endpoint.query]]
        for (const { schemas } of endpoint.payload.values()) for (const schema of schemas) parts.push(["body", schema])
        for (const [where, schema] of parts) {
          if (schema === undefined) continue
          strings++
          missing.push(...unchecked(schema.ast, `${name} ${where}`))
        }
      }
    }
    assert.isAbove(strings, 20)
    assert.deepStrictEqual(missing, [])
  })

  it("the walk itself finds a plain string, a JSON value and a record key", () => {
    assert.deepStrictEqual(unchecked(Schema.Struct({ a: Schema.String, b: Text }).ast, "x"), ["x.a"])
    assert.deepStrictEqual(unchecked(Schema.Struct({ j: Schema.Json, k: JsonValue, o: JsonObject }).ast, "x"), ["x.j"])
    assert.deepStrictEqual(unchecked(Schema.Record(Schema.String, Text).ast, "x"), ["x[key]"])
    assert.deepStrictEqual(
      unchecked(Schema.Struct({ s: Schema.String.check(Schema.isMaxLength(3), isStorable) }).ast, "x"),
      ["x.s"]
    )
  })

  it("the checks name the string's path and say why", () => {
    const body = Schema.Struct({ name: Text.check(Schema.isMaxLength(5)), input: JsonValue })
    const decoded = Schema.decodeUnknownResult(body)({
      name: "a\u0000b",
      input: { list: ["ok", "\ud800"], ["k\u0000"]: 1 }
    }, { errors: "all" })
    assert.isTrue(Result.isFailure(decoded))
    const message = Result.isFailure(decoded) ? decoded.failure.message : ""
    assert.include(message, UNSTORABLE_STRING_MESSAGE)
    assert.include(message, `["name"]`)
    assert.include(message, `["input"]["list"][1]`)
    assert.include(message, `["input"]["k\\u0000"]`)
    assert.isTrue(Result.isSuccess(Schema.decodeUnknownResult(body)({ name: "😀", input: { a: ["é", "\u{10FFFF}"] } })))
  })
})
