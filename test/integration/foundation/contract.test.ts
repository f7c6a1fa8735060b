/**
 * The document is the behaviour: for every operation of `/openapi.json`,
 * inputs made from the document itself are answered as it says.
 *
 * - A value the document allows for a path parameter, a query parameter or
 *   a simple body member is never refused as invalid (`400
 *   INVALID_REQUEST` naming it) and never answered 5xx: a rule only a
 *   handler knows fails here.
 * - A value the document forbids there (out of its bounds, off its
 *   pattern, its format or its enum, of another type) is refused with `400
 *   INVALID_REQUEST` naming it: a rule missing from the server fails here.
 * - Every path parameter at its documented maximum length reaches its
 *   operation (not the router's 404).
 * - `Accept` is not negotiated (docs/api.md): JSON routes answer JSON.
 *
 * Allowed values come from fast-check arbitraries derived from each
 * parameter's JSON Schema (patterns through `fc.stringMatching`, bounds,
 * formats, enums), a few per value with the bounds always among them;
 * bodies are the operation's documented example with one member replaced.
 * Every answer is also checked against the document by `raw`
 * (`test/support/contract.ts`). One service for the whole file.
 */
import { assert, describe, layer } from "@effect/vitest"
import { Effect } from "effect"
import * as fc from "fast-check"
import { SvcTest } from "../../../src/testing.ts"
import { document, routes } from "../../support/contract.ts"
import { raw, type RawResponse } from "../../support/http.ts"

type Json = Record<string, any>

/** Allowed values tried per parameter or member, beside its bounds. */
const SAMPLES = 4
const SEED = 41

/**
 * Parameters whose allowed values depend on state, not on their form:
 * a cursor is an opaque token the list issued (anything else is `400`
 * naming `cursor`, as the document's description says).
 */
const STATEFUL = new Set(["cursor"])

/**
 * Operations the test's API key cannot reach: console sign-in and
 * approval links authenticate with a one-time token or the console cookie,
 * and answer before they read their input.
 */
const unreachable = (response: RawResponse) => response.status === 401 || response.status === 403

const resolve = (schema: Json): Json =>
  typeof schema.$ref === "string" ? resolve(document.components.schemas[schema.$ref.replace("#/components/schemas/", "")]) : schema

/** A string of `length` characters the pattern (if any) accepts, when one is easy to build; for a length bound. */
const longest = (schema: Json): string | undefined => {
  const pattern = typeof schema.pattern === "string" ? new RegExp(schema.pattern, "u") : undefined
  const maxLength = typeof schema.maxLength === "number" ? schema.maxLength : /\{0,(\d+)\}\$$/.exec(schema.pattern ?? "") ? Number(/\{0,(\d+)\}\$$/.exec(schema.pattern)![1]) + 1 : undefined
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

/** Values the schema allows: its bounds, then arbitraries. `undefined`: not a schema this test derives values for. */
const allowed = (schema: Json): ReadonlyArray<unknown> | undefined => {
  schema = resolve(schema)
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
        return sample(fc.date({ min: new Date("2000-01-01T00:00:00Z"), max: new Date("2100-01-01T00:00:00Z"), noInvalidDate: true }))
          .map((date) => date.toISOString())
      }
      if (schema.format !== undefined) return undefined
      const minLength = schema.minLength ?? 0
      const maxLength = schema.maxLength ?? 64
      const arbitrary = typeof schema.pattern === "string"
        ? matching(schema.pattern).filter((value) => value.length >= minLength && value.length <= maxLength)
        : fc.string({ minLength, maxLength: Math.min(maxLength, 64) })
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
      if (typeof schema.minLength === "number" && schema.minLength > 0 && !asText) out.push(["under the minimum length", ""])
      if (schema.format === "uuid") out.push(["not a UUID", "not-a-uuid"])
      if (schema.format === "date-time") {
        out.push(["a day that does not exist", "2026-02-30T08:00:00Z"], ["no time zone", "2026-11-23T08:00:00"], ["not RFC 3339", "23/11/2026"])
      }
      if (pattern !== undefined) {
        for (const candidate of ["!", "a b", "G".repeat(32), "0x10", "x".repeat(300), "-leading"]) {
          if (!pattern.test(candidate)) {
            out.push([`off the pattern (${JSON.stringify(candidate.slice(0, 12))})`, candidate])
            break
          }
        }
      }
      if (!asText) out.push(["not a string", 123])
      break
    }
  }
  return out
}

const asText = (value: unknown) => encodeURIComponent(String(value))

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

layer(SvcTest.layer(), { excludeTestServices: true })("the document is the behaviour", (it) => {
  const send = (key: string, operation: Operation, path: Record<string, string>, query: Record<string, string>, body: unknown) =>
    Effect.gen(function*() {
      const svc = yield* SvcTest
      const url = new URL(operation.template.replace(/\{([^}]+)\}/g, (_, name: string) => asText(path[name])), svc.baseUrl)
      for (const [name, value] of Object.entries(query)) url.searchParams.set(name, value)
      const init = {
        method: operation.method,
        headers: { authorization: `Bearer ${key}`, ...(body === undefined ? {} : { "content-type": "application/json" }) },
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
      readonly value: unknown
      readonly why: string | undefined
      readonly path: Record<string, string>
      readonly query: Record<string, string>
      readonly body: unknown
    }> = []
    const paths = Object.fromEntries(operation.parameters.filter((p) => p.in === "path").map((p) => [p.name, defaultPath(p)]))
    const baseBody = operation.body === undefined ? undefined : operation.example ?? {}
    for (const parameter of operation.parameters) {
      if (STATEFUL.has(parameter.name) || (parameter.in !== "path" && parameter.in !== "query")) continue
      for (const value of allowed(parameter.schema) ?? []) {
        if (parameter.in === "path" && value === "") continue
        out.push(parameter.in === "path"
          ? { field: parameter.name, value, why: undefined, path: { ...paths, [parameter.name]: String(value) }, query: {}, body: baseBody }
          : { field: parameter.name, value, why: undefined, path: paths, query: { [parameter.name]: String(value) }, body: baseBody })
      }
      for (const [why, value] of forbidden(parameter.schema, true)) {
        if (parameter.in === "path" && (value === "" || String(value).includes("/"))) continue
        out.push(parameter.in === "path"
          ? { field: parameter.name, value, why, path: { ...paths, [parameter.name]: String(value) }, query: {}, body: baseBody }
          : { field: parameter.name, value, why, path: paths, query: { [parameter.name]: String(value) }, body: baseBody })
      }
    }
    if (operation.body?.type === "object" && typeof baseBody === "object" && baseBody !== null) {
      for (const [member, schema] of Object.entries((operation.body.properties ?? {}) as Record<string, Json>)) {
        // A rule across members (JSON Schema cannot compare two members) is stated in the member's description,
        // naming the others: a value it refuses is not "allowed by the document".
        const others = Object.keys(operation.body.properties ?? {}).filter((other) => other !== member)
        const acrossMembers = others.some((other) => String(resolve(schema).description ?? "").includes(`\`${other}\``))
        for (const value of acrossMembers ? [] : allowed(schema) ?? []) {
          out.push({ field: member, value, why: undefined, path: paths, query: {}, body: { ...baseBody, [member]: value } })
        }
        for (const [why, value] of forbidden(schema, false)) {
          out.push({ field: member, value, why, path: paths, query: {}, body: { ...baseBody, [member]: value } })
        }
      }
    }
    return out
  }

  describe("for every operation", () => {
    it.effect("allowed values are never refused as invalid nor 5xx; forbidden ones are 400 INVALID_REQUEST naming the field", () =>
      Effect.gen(function*() {
        const org = yield* SvcTest.org()
        const failures: Array<string> = []
        const skipped: Array<string> = []
        let checked = 0
        for (const operation of operations) {
          const name = `${operation.method} ${operation.template}`
          for (const variation of variations(operation)) {
            const started = performance.now()
            const response = yield* send(org.key, operation, variation.path, variation.query, variation.body)
            if (process.env.CONTRACT_DEBUG) console.log(Math.round(performance.now() - started), name, variation.field, response.status)
            if (unreachable(response)) {
              skipped.push(name)
              break
            }
            checked++
            const shown = `${name} ${variation.field}=${JSON.stringify(variation.value)?.slice(0, 60)}`
            if (variation.why === undefined) {
              if (response.status >= 500) failures.push(`${shown}: allowed, answered ${response.status}`)
              else if (response.status === 400 && response.json?.code === "INVALID_REQUEST" && response.json?.field === variation.field) {
                failures.push(`${shown}: allowed by the document, refused: ${response.json.detail}`)
              }
            } else if (!(response.status === 400 && response.json?.code === "INVALID_REQUEST" && response.json?.field === variation.field)) {
              failures.push(`${shown}: ${variation.why}, answered ${response.status} ${response.json?.code ?? ""} ${response.json?.field ?? ""}`)
            }
          }
        }
        assert.deepStrictEqual(failures, [])
        assert.isAbove(checked, 300)
        // Only the operations that a key cannot reach by design.
        for (const name of new Set(skipped)) assert.match(name, /\/v1\/console\/(sign-in|sign-out|me)|\/v1\/approval-links\//, name)
      }), { timeout: 120_000 })
  })

  describe("media types", () => {
    it.effect("Accept is not negotiated: Accept: text/plain on a JSON route still answers JSON, never 406", () =>
      Effect.gen(function*() {
        const svc = yield* SvcTest
        const org = yield* SvcTest.org()
        for (const accept of ["text/plain", "application/xml", "*/*"]) {
          const response = yield* raw(`${svc.baseUrl}/v1/tasks`, { headers: { authorization: `Bearer ${org.key}`, accept } })
          assert.strictEqual(response.status, 200, accept)
          assert.match(response.headers.get("content-type") ?? "", /^application\/json/, accept)
        }
      }))
  })

  describe("path parameters", () => {
    it.effect("each reaches its operation at its documented maximum length (a step_id of 200, an action_class of 128)", () =>
      Effect.gen(function*() {
        const org = yield* SvcTest.org()
        const names = new Set(operations.flatMap((operation) => operation.parameters.filter((p) => p.in === "path").map((p) => p.name as string)))
        const reached: Array<string> = []
        for (const operation of operations) {
          for (const parameter of operation.parameters.filter((p) => p.in === "path")) {
            const value = longest(resolve(parameter.schema)) ?? defaultPath(parameter)
            const paths = Object.fromEntries(operation.parameters.filter((p) => p.in === "path").map((p) => [p.name, defaultPath(p)]))
            const response = yield* send(org.key, operation, { ...paths, [parameter.name]: value }, {}, operation.body === undefined ? undefined : operation.example ?? {})
            // The router's own 404 (no such route) carries `request_id`; an operation's never does.
            assert.isFalse(response.status === 404 && response.json?.request_id !== undefined, `${operation.method} ${operation.template} ${parameter.name} (${value.length})`)
            assert.notStrictEqual(response.status, 400, `${operation.method} ${operation.template} ${parameter.name}: ${response.text}`)
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
})
