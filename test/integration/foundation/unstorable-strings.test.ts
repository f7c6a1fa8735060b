import { assert, describe, layer } from "@effect/vitest"
import { Effect } from "effect"
import * as fc from "fast-check"
import { toJsonPath } from "../../../src/server/Validation.ts"
import { SvcTest } from "../../../src/testing.ts"
import { raw } from "../../support/http.ts"

/**
 * Strings PostgreSQL cannot store (NUL, an unpaired UTF-16 surrogate) are
 * refused at decoding, wherever they are in a request: 400 INVALID_REQUEST
 * naming the field, never a 500.
 */
const BAD = ["\u0000", "a\u0000b", "\ud800", "x\udfffy", "\udc00\ud800", "😀\ud83d"]

const schema = { type: "object" }

layer(SvcTest.layer(), { excludeTestServices: true })("strings the database cannot store", (it) => {
  const setup = Effect.gen(function*() {
    const svc = yield* SvcTest
    const org = yield* SvcTest.org()
    const task = yield* org.client.tasks.create({ payload: { name: "t", answer_schema: schema } })
    const send = (method: string, path: string, body?: unknown) =>
      raw(`${svc.baseUrl}${path}`, {
        method,
        headers: {
          authorization: `Bearer ${org.key}`,
          ...(body === undefined ? {} : { "content-type": "application/json" })
        },
        ...(body === undefined ? {} : { body: JSON.stringify(body) })
      })
    return { svc, org, task, send }
  })

  const refused = (response: { status: number; json: any; text: string }, field: string | undefined) => {
    assert.strictEqual(response.status, 400, response.text)
    assert.strictEqual(response.json.code, "INVALID_REQUEST")
    assert.strictEqual(response.json.field, field)
    assert.match(response.json.detail, /NUL character|surrogate/)
  }

  describe("every body that reaches PostgreSQL", () => {
    it.effect("run input and answer, task name and schema, correction, step arguments, reviewer email, collector headers", () =>
      Effect.gen(function*() {
        const { send, task, org } = yield* setup
        for (const bad of BAD) {
          refused(yield* send("POST", "/v1/tasks", { name: bad, answer_schema: schema }), "name")
          refused(
            yield* send("POST", "/v1/tasks", { name: "n", answer_schema: { type: "object", description: bad } }),
            "answer_schema.description"
          )
          refused(
            yield* send("POST", `/v1/tasks/${task.id}/runs`, { input: { a: [1, { b: bad }] }, answer: {} }),
            "input.a[1].b"
          )
          refused(
            yield* send("POST", `/v1/tasks/${task.id}/runs`, { input: 1, answer: { [`k${bad}`]: 1 } }),
            `answer[${JSON.stringify(`k${bad}`)}]`
          )
          const run = yield* org.client.tasks.logRun({
            params: { task_id: task.id },
            payload: { input: 1, answer: {} }
          })
          refused(
            yield* send("POST", "/v1/feedback", {
              inference_log_id: run.trace_id,
              score: 0,
              correction: { note: bad }
            }),
            "correction.note"
          )
          const session = yield* send("POST", "/v1/agent-sessions", {})
          assert.strictEqual(session.status, 201)
          refused(
            yield* send("POST", `/v1/agent-sessions/${session.json.id}/steps`, {
              step_id: "s1",
              tool: "t",
              action_class: "a",
              arguments: { list: [bad] }
            }),
            "arguments.list[0]"
          )
          refused(
            yield* send("POST", `/v1/agent-sessions/${session.json.id}/steps`, {
              step_id: bad,
              tool: "t",
              action_class: "a",
              arguments: {}
            }),
            "step_id"
          )
          refused(
            yield* send("PUT", "/v1/notification-settings", { reviewer_email: `a${bad}@example.com` }),
            "reviewer_email"
          )
          refused(
            yield* send("POST", "/v1/telemetry-destinations", {
              url: "https://collector.example.com/v1/traces",
              headers: { "x-token": `t${bad}` }
            }),
            "headers[\"x-token\"]"
          )
        }
      }))

    it.effect("a path parameter or a query value: the same 400 naming it", () =>
      Effect.gen(function*() {
        const { send } = yield* setup
        const session = yield* send("POST", "/v1/agent-sessions", {})
        for (const bad of ["%00", "%ED%A0%80"]) {
          const outcome = yield* send("POST", `/v1/agent-sessions/${session.json.id}/steps/s${bad}/outcome`, {
            status: "succeeded"
          })
          if (bad === "%00") refused(outcome, "step_id")
          else assert.notStrictEqual(outcome.status, 500) // percent-encoded surrogate bytes decode to U+FFFD: storable
        }
        refused(yield* send("GET", "/v1/tasks?cursor=%00"), "cursor")
      }))

    it.effect("JSON null is a value like any other: run input and answer, step arguments (not a 500)", () =>
      Effect.gen(function*() {
        const { send, task, org } = yield* setup
        const run = yield* send("POST", `/v1/tasks/${task.id}/runs`, { input: null, answer: null })
        assert.strictEqual(run.status, 201, run.text)
        const got = yield* org.client.tasks.getRun({ params: { trace_id: run.json.trace_id } })
        assert.isNull(got.input)
        const session = yield* send("POST", "/v1/agent-sessions", {})
        const step = { step_id: "n", tool: "t", action_class: "a", arguments: null }
        const first = yield* send("POST", `/v1/agent-sessions/${session.json.id}/steps`, step)
        assert.strictEqual(first.status, 200, first.text)
        const again = yield* send("POST", `/v1/agent-sessions/${session.json.id}/steps`, step)
        assert.deepStrictEqual(again.json, first.json)
      }))

    it.effect("authentication still answers first", () =>
      Effect.gen(function*() {
        const { svc, task } = yield* setup
        const response = yield* raw(`${svc.baseUrl}/v1/tasks/${task.id}/runs`, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify({ input: "\u0000", answer: {} })
        })
        assert.strictEqual(response.status, 401)
      }))
  })

  describe("property: anywhere in a body", () => {
    // A JSON value with one string (a value or a member name) made unstorable.
    const key = fc.string({ unit: "grapheme", maxLength: 6 })
    const tree: fc.Arbitrary<{ value: unknown; path: Array<string | number> }> =
      fc.letrec<{ node: { value: unknown; path: Array<string | number> } }>((tie) => ({
        node: fc.oneof(
          { depthSize: "small", withCrossShrink: true },
          fc.tuple(fc.string({ unit: "grapheme" }), fc.constantFrom(...BAD), fc.nat({ max: 8 })).map(([s, bad, at]) => {
            // Between code points: a lone surrogate never pairs with a neighbour.
            const points = Array.from(s)
            const i = Math.min(at, points.length)
            return {
              value: [...points.slice(0, i), bad, ...points.slice(i)].join(""),
              path: [] as Array<string | number>
            }
          }),
          fc.tuple(fc.array(fc.jsonValue({ maxDepth: 2 }), { maxLength: 3 }), tie("node"), fc.nat()).map(
            ([items, inner, at]) => {
              const i = at % (items.length + 1)
              const value = [...items.slice(0, i), inner.value, ...items.slice(i)]
              return { value, path: [i, ...inner.path] }
            }
          ),
          fc.tuple(fc.dictionary(key, fc.jsonValue({ maxDepth: 2 }), { maxKeys: 3 }), key, tie("node")).map(
            ([members, name, inner]) => {
              const value: Record<string, unknown> = {}
              for (const [k, v] of Object.entries(members)) if (k !== name) value[k] = v
              Object.defineProperty(value, name, {
                value: inner.value,
                enumerable: true,
                writable: true,
                configurable: true
              })
              return { value, path: [name, ...inner.path] }
            }
          ),
          fc.tuple(key, fc.constantFrom(...BAD), fc.jsonValue({ maxDepth: 1 })).map(([name, bad, inner]) => {
            const badName = name + bad
            const value: Record<string, unknown> = {}
            Object.defineProperty(value, badName, {
              value: inner,
              enumerable: true,
              writable: true,
              configurable: true
            })
            return { value, path: [badName] }
          })
        )
      })).node

    it.effect("any string with NUL or a lone surrogate is refused with its path", () =>
      Effect.gen(function*() {
        const { send, task } = yield* setup
        const samples = fc.sample(tree, { numRuns: 60, seed: 1405 })
        for (const { value, path } of samples) {
          const response = yield* send("POST", `/v1/tasks/${task.id}/runs`, { input: value, answer: {} })
          refused(response, toJsonPath(["input", ...path]))
        }
      }))

    it.effect("valid Unicode, astral characters and emoji included, is accepted and kept exactly", () =>
      Effect.gen(function*() {
        const { send, task, org } = yield* setup
        const samples = fc.sample(
          fc.jsonValue({
            maxDepth: 3,
            stringUnit: fc.constantFrom("a", "é", "😀", "𝄞", "\u{10FFFF}", "\ufffd", "\u0001", "\ud7ff", "\ue000", "👩‍👩‍👧")
          }),
          { numRuns: 40, seed: 1406 }
        )
        for (const value of [...samples, "😀𝄞", { "emoji 😀": ["\u{1F600}", "\\u0000", "\\ud800"] }]) {
          const response = yield* send("POST", `/v1/tasks/${task.id}/runs`, { input: value, answer: {} })
          assert.strictEqual(response.status, 201, `${response.text} for ${JSON.stringify(value)}`)
          const run = yield* org.client.tasks.getRun({ params: { trace_id: response.json.trace_id } })
          assert.deepStrictEqual(run.input, JSON.parse(JSON.stringify(value)))
        }
      }))
  })
})
