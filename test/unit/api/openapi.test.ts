/**
 * The OpenAPI document is complete: every operation has a
 * summary, a description and examples; every error it can answer is
 * documented with its problem schema and an example; tags are described;
 * servers and license are set. An endpoint added later without these fails
 * here, naming itself.
 */
import { assert, describe, it } from "@effect/vitest"
import { Context, Schema } from "effect"
import { HttpApi, HttpApiSchema, OpenApi } from "effect/http-api"
import { Api } from "../../../src/api/Api.ts"
import { OperationExamples } from "../../../src/api/Documentation.ts"
import { ProblemExamples } from "../../../src/api/ProblemExamples.ts"

const doc = OpenApi.fromApi(Api) as unknown as Record<string, any>
const schemas: Record<string, any> = doc.components.schemas

const operations: Array<{ readonly name: string; readonly op: Record<string, any> }> = []
for (const [path, item] of Object.entries(doc.paths as Record<string, Record<string, any>>)) {
  for (const [method, op] of Object.entries(item)) operations.push({ name: `${method.toUpperCase()} ${path}`, op })
}

const refs = (schema: any): Array<string> =>
  typeof schema?.$ref === "string"
    ? [schema.$ref.replace("#/components/schemas/", "")]
    : Array.isArray(schema?.anyOf)
    ? schema.anyOf.flatMap(refs)
    : []

/** The problem codes a response documents, checking each schema is a problem with a code. */
const problemCodes = (name: string, status: string, response: any): Array<string> => {
  assert.deepStrictEqual(
    Object.keys(response.content ?? {}),
    ["application/problem+json"],
    `${name} ${status}: content type`
  )
  const members = refs(response.content["application/problem+json"].schema)
  assert.isAbove(members.length, 0, `${name} ${status}: the schema is a problem component`)
  return members.map((member) => {
    const schema = schemas[member]
    assert.isDefined(schema, `${name} ${status}: ${member} is defined`)
    assert.match(schema.properties.type.enum[0], /^urn:svc:problem:/, `${name} ${status}: ${member} is a problem type`)
    assert.strictEqual(schema.properties.status.enum[0], Number(status), `${name} ${status}: ${member} status`)
    for (const key of ["type", "status", "title", "code"]) {
      assert.include(schema.required, key, `${name} ${status}: ${member} requires ${key}`)
    }
    return schema.properties.code.enum[0] as string
  })
}

const codesAt = (op: any, status: string): Array<string> =>
  op.responses[status] === undefined ? [] : problemCodes("", status, op.responses[status])

describe("the OpenAPI document", () => {
  it("is OpenAPI 3.1 with servers, a license and a description for every tag", () => {
    assert.match(doc.openapi, /^3\.1\./)
    assert.isAbove(doc.servers.length, 0)
    for (const server of doc.servers) assert.isString(server.description)
    assert.strictEqual(doc.info.license.identifier, "MIT")
    assert.isAbove(doc.tags.length, 0)
    for (const tag of doc.tags) assert.isAbove(tag.description?.length ?? 0, 20, `tag ${tag.name} has a description`)
    const tagNames = new Set(doc.tags.map((tag: { name: string }) => tag.name))
    for (const { name, op } of operations) {
      for (const tag of op.tags) assert.isTrue(tagNames.has(tag), `${name}: tag ${tag} is declared`)
    }
  })

  it("every operation has a summary and a description of its own (beyond the scope it needs)", () => {
    assert.isAbove(operations.length, 30)
    for (const { name, op } of operations) {
      assert.isAbove(op.summary?.trim().length ?? 0, 3, `${name}: summary (documented({ summary }))`)
      assert.isBelow(op.summary.length, 60, `${name}: a summary is a few words`)
      const own = (op.description ?? "").replace(/Requires scope `[^`]+`\./, "").trim()
      assert.isAbove(own.length, 10, `${name}: description`)
    }
  })

  it("an authenticated operation names its scope and documents 401 and 403 (with required_scope)", () => {
    for (const { name, op } of operations) {
      if (op.security.length === 0) continue
      const scopes: Array<string> = op.security.flatMap((requirement: Record<string, Array<string>>) =>
        Object.values(requirement).flat()
      )
      assert.isAbove(scopes.length, 0, `${name}: the scope it needs is in its security requirement`)
      for (const requirement of op.security) {
        for (const named of Object.values(requirement) as Array<Array<string>>) {
          assert.isAtMost(named.length, 1, `${name}: one scope per requirement`)
        }
      }
      for (const scope of scopes) {
        assert.include(op.description, `\`${scope}\``, `${name}: the description names ${scope}`)
      }
      assert.match(op.description, /Requires /, name)
      assert.deepStrictEqual(codesAt(op, "401"), ["UNAUTHENTICATED"], name)
      // A console-cookie request that changes state from another site is 403 CROSS_SITE_REQUEST;
      // a decision on an approval assigned to a group the caller is not in, 403 NOT_ASSIGNED.
      assert.deepStrictEqual(codesAt(op, "403").filter((code: string) => code !== "NOT_ASSIGNED"), [
        "INSUFFICIENT_SCOPE",
        "CROSS_SITE_REQUEST"
      ], name)
      const forbidden = refs(op.responses["403"].content["application/problem+json"].schema).map((ref: string) =>
        schemas[ref]
      )
      assert.isTrue(
        forbidden.some((schema: { required: Array<string> }) => schema.required.includes("required_scope")),
        name
      )
      const example = op.responses["403"].content["application/problem+json"].examples.INSUFFICIENT_SCOPE.value
      assert.include(scopes, example.required_scope, `${name}: the 403 example names the operation's scope`)
    }
  })

  it("every operation documents 400 INVALID_REQUEST and 500 INTERNAL; 413 and 415 exactly where a body is read", () => {
    for (const { name, op } of operations) {
      assert.include(codesAt(op, "400"), "INVALID_REQUEST", name)
      assert.include(codesAt(op, "500"), "INTERNAL", name)
      if (op.requestBody === undefined) {
        assert.notProperty(op.responses, "413", `${name} reads no body`)
        assert.notProperty(op.responses, "415", `${name} reads no body`)
      } else {
        assert.deepStrictEqual(codesAt(op, "413"), ["PAYLOAD_TOO_LARGE"], name)
        assert.deepStrictEqual(codesAt(op, "415"), ["UNSUPPORTED_MEDIA_TYPE"], name)
      }
    }
  })

  it("every error response is a problem (application/problem+json, code) with a description and an example per code", () => {
    const seen = new Set<string>()
    for (const { name, op } of operations) {
      for (const [status, response] of Object.entries(op.responses as Record<string, any>)) {
        if (Number(status) < 400) continue
        const codes = problemCodes(name, status, response)
        assert.notStrictEqual(response.description, "Error", `${name} ${status}: description`)
        const examples = response.content["application/problem+json"].examples ?? {}
        for (const code of codes) {
          seen.add(code)
          assert.property(ProblemExamples, code, `${name} ${status}: ${code} has an example in ProblemExamples`)
          assert.property(examples, code, `${name} ${status}: example of ${code}`)
          assert.strictEqual(examples[code].value.code, code)
          assert.strictEqual(examples[code].value.status, Number(status))
        }
      }
    }
    // Every documented code is an error some operation can answer, and the other way round.
    assert.sameMembers(Object.keys(ProblemExamples), [...seen])
  })

  it("request and response examples are given and decode with the endpoint's own schemas", () => {
    const strict = { onExcessProperty: "error" } as const
    let checked = 0
    HttpApi.reflect(Api, {
      onGroup: () => undefined,
      onEndpoint: ({ endpoint, group }) => {
        const name = `${group.identifier}.${endpoint.identifier}`
        const examples = Context.getOption(endpoint.annotations, OperationExamples)
        assert.isTrue(examples._tag === "Some", `${name}: documented(...)`)
        if (examples._tag !== "Some") return
        const payloads = [...endpoint.payload.values()].flatMap((entry: any) => entry.schemas as Array<Schema.Top>)
          .filter((schema) => !HttpApiSchema.isNoContent(schema.ast))
        if (payloads.length > 0 && endpoint.method !== "GET") {
          assert.isDefined(examples.value.request, `${name}: request example`)
          Schema.decodeUnknownSync(payloads[0]! as Schema.Codec<unknown, unknown>)(examples.value.request, strict)
          checked++
        }
        const [success] = [...endpoint.success] as Array<
          Schema.Top & { readonly _tag?: string; readonly events?: Schema.Top }
        >
        if (success === undefined || HttpApiSchema.isNoContent(success.ast)) return
        assert.isDefined(examples.value.response, `${name}: response example`)
        // A stream's example is one of its elements (an event, a line), inside any response headers.
        type Body = Schema.Top & { readonly _tag?: string; readonly events?: Schema.Top; readonly schema?: Schema.Top }
        const inner: Body = HttpApiSchema.isWithHeaders(success) ? success.schema : success
        const body = inner._tag === "StreamSse" ? inner.events! : inner._tag === "StreamNdjson" ? inner.schema! : inner
        Schema.decodeUnknownSync(body as Schema.Codec<unknown, unknown>)(examples.value.response, strict)
        checked++
      }
    })
    assert.isAbove(checked, 40)
  })

  it("the examples reach the document: request bodies and success answers carry them", () => {
    for (const { name, op } of operations) {
      const request = op.requestBody?.content?.["application/json"]
      if (request !== undefined) assert.property(request, "example", `${name}: request example`)
      const success = Object.entries(op.responses as Record<string, any>).find(([status]) => status.startsWith("2"))
      for (const media of Object.values(success?.[1].content ?? {}) as Array<any>) {
        assert.property(media, "example", `${name}: response example`)
      }
    }
  })
})
