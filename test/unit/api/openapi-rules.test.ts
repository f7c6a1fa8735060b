/**
 * The rules the server enforces on inputs are written in `/openapi.json`
 * (what a generated client and a REST user read), as the server checks
 * them: integer bounds for `limit` and `after`, the trace id and action
 * class patterns, `date-time` for a bulk replay's window, the header-name
 * pattern. And the problems say what svc sends: a finite `limit_value`,
 * the router's 404 with its `request_id`.
 */
import { assert, describe, it } from "@effect/vitest"
import { OpenApi } from "effect/http-api"
import { Api } from "../../../src/api/Api.ts"

const spec: Record<string, any> = OpenApi.fromApi(Api)

const parameter = (path: string, method: string, name: string) =>
  (spec.paths[path][method].parameters as Array<any>).find((p) => p.name === name)?.schema

const body = (path: string, method: string) => spec.paths[path][method].requestBody.content["application/json"].schema

describe("the document states each input rule the server enforces", () => {
  it("limit of every list: an integer from 1 to 100 (not a string)", () => {
    const limits = Object.entries(spec.paths as Record<string, any>).flatMap(([path, item]) =>
      Object.values(item).flatMap((op: any) =>
        (op.parameters ?? []).filter((p: any) => p.name === "limit").map((p: any) => [path, p.schema])
      )
    )
    assert.isAbove(limits.length, 8)
    for (const [path, schema] of limits) {
      assert.deepInclude(schema, { type: "integer", minimum: 1, maximum: 100 }, path)
      assert.isUndefined(schema.allOf, path)
    }
  })

  it("after: an integer from 0 on the dataset export and both event streams", () => {
    assert.deepInclude(parameter("/v1/datasets/{dataset_id}/export", "get", "after"), {
      type: "integer",
      minimum: 0,
      maximum: 2 ** 31 - 1
    })
    for (const path of ["/v1/agent-sessions/{session_id}/events/stream", "/v1/agent-approvals/events/stream"]) {
      assert.deepInclude(parameter(path, "get", "after"), {
        type: "integer",
        minimum: 0,
        maximum: Number.MAX_SAFE_INTEGER
      }, path)
    }
  })

  it("trace_id and inference_log_id: 32 lowercase hex characters; action_class: its pattern, in the path and the step body", () => {
    const traceId = parameter("/v1/runs/{trace_id}", "get", "trace_id")
    assert.strictEqual(traceId.pattern, "^(?!0{32})[0-9a-f]{32}$")
    assert.strictEqual(body("/v1/feedback", "post").properties.inference_log_id.pattern, traceId.pattern)
    const actionClass = parameter("/v1/approval-policies/{action_class}", "put", "action_class")
    assert.strictEqual(actionClass.pattern, "^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$")
    assert.strictEqual(
      body("/v1/agent-sessions/{session_id}/steps", "post").properties.action_class.pattern,
      actionClass.pattern
    )
  })

  it("since and until of a bulk replay: RFC 3339 date-times with a zone", () => {
    const replay = body("/v1/notification-endpoints/{id}/deliveries/replay", "post")
    for (const member of ["since", "until"]) {
      assert.strictEqual(replay.properties[member].format, "date-time")
      assert.isString(replay.properties[member].pattern)
      assert.isString(replay.properties[member].description)
    }
  })

  it("custom header names: propertyNames with the HTTP field-name pattern", () => {
    for (
      const [path, member] of [["/v1/notification-endpoints", "headers"], [
        "/v1/telemetry-destinations",
        "headers"
      ]] as const
    ) {
      const names = body(path, "post").properties[member].propertyNames
      const pattern = new RegExp(names.pattern, "u")
      for (const ok of ["X-Token", "authorization", "a.b_c~d", "__proto__"]) assert.isTrue(pattern.test(ok), ok)
      for (const bad of ["", "Bad Name", "x:y", "Ключ"]) assert.isFalse(pattern.test(bad), bad)
    }
  })

  it("custom headers: at most 10 (maxProperties); transport, trace-context and cookie names refused in any case (propertyNames not), and svc's own for webhooks", () => {
    const refuses = (path: string, name: string) => {
      const headers = body(path, "post").properties.headers
      assert.strictEqual(headers.maxProperties, 10, path)
      return headers.propertyNames.allOf.some((part: any) => new RegExp(part.not.pattern, "u").test(name))
    }
    for (const path of ["/v1/notification-endpoints", "/v1/telemetry-destinations"]) {
      for (const name of ["Host", "CONTENT-LENGTH", "traceparent", "X-B3-TraceId", "Proxy-Authorization", "Cookie"]) {
        assert.isTrue(refuses(path, name), `${path} ${name}`)
      }
      for (const name of ["X-Token", "Authorization", "X-Hostname", "Content-Language"]) {
        assert.isFalse(refuses(path, name), `${path} ${name}`)
      }
    }
    for (const name of ["X-Svc-Signature", "webhook-id", "User-Agent"]) {
      assert.isTrue(refuses("/v1/notification-endpoints", name), name)
      assert.isFalse(refuses("/v1/telemetry-destinations", name), name)
    }
  })

  it("a reviewer group's members: no two identical entries (uniqueItems)", () => {
    assert.isTrue(body("/v1/reviewer-groups/{name}", "put").properties.members.uniqueItems)
  })
})

describe("the escalation chain's rules are in the document", () => {
  const schemaOf = (
    schema: any
  ) => (schema.$ref === undefined ? schema : spec.components.schemas[schema.$ref.replace("#/components/schemas/", "")])
  const policy = schemaOf(body("/v1/approval-policies/{action_class}", "put"))
  const ruleResult = policy.properties.rules.items.properties.result.anyOf.find((r: any) =>
    r.properties.decision.enum[0] === "require_approval"
  )

  it("escalation_chain: 1 to 5 distinct group names, in a policy and in a rule's result, and only with escalation_seconds", () => {
    for (const [where, holder] of [["policy", policy], ["rule", ruleResult]] as const) {
      const chain = holder.properties.escalation_chain
      assert.deepInclude(chain, { type: "array", minItems: 1, maxItems: 5, uniqueItems: true }, where)
      assert.strictEqual(chain.items.pattern, holder.properties.group.pattern, where)
      assert.deepInclude(holder.allOf, { dependentRequired: { escalation_chain: ["escalation_seconds"] } }, where)
      assert.notProperty(holder.properties, "escalation_group", where)
    }
  })

  it("the snapshot's escalation_level: 0 to 5", () => {
    const snapshot = schemaOf(
      spec.paths["/v1/agent-approvals/{approval_id}"].get.responses["200"].content["application/json"].schema
    )
    assert.deepInclude(snapshot.properties.escalation_level, { type: "integer", minimum: 0, maximum: 5 })
  })
})

describe("problems are typed as sent", () => {
  it("limit_value is a finite number, never \"Infinity\" or \"NaN\"", () => {
    for (const [name, schema] of Object.entries(spec.components.schemas as Record<string, any>)) {
      if (schema.properties?.limit_value !== undefined) {
        assert.deepStrictEqual(schema.properties.limit_value.type, "number", name)
      }
    }
  })

  it("the not-found problem allows the request_id the router's own 404 carries", () => {
    assert.isDefined(spec.components.schemas.NotFoundEncoded.properties.request_id)
  })
})
