import { assert, describe, layer } from "@effect/vitest"
import { Effect } from "effect"
import { SvcTest } from "../../../src/testing.ts"
import { raw } from "../../support/http.ts"

const schema = { type: "object", properties: { label: { type: "string" } }, required: ["label"] }

layer(SvcTest.layer(), { excludeTestServices: true })("tasks, runs and dataset versions", (it) => {
  describe("tasks", () => {
    it.effect("creating a task creates its first, empty dataset version", () =>
      Effect.gen(function*() {
        const org = yield* SvcTest.org()
        const task = yield* org.client.tasks.create({ payload: { name: "triage", answer_schema: schema } })
        assert.deepStrictEqual(task.answer_schema, schema)
        const { datasets } = yield* org.client.datasets.listForTask({ params: { task_id: task.id }, query: {} })
        assert.strictEqual(datasets.length, 1)
        assert.strictEqual(datasets[0]!.version, 1)
        assert.strictEqual(datasets[0]!.example_count, 0)
        const dataset = yield* org.client.datasets.get({ params: { dataset_id: datasets[0]!.id }, query: {} })
        assert.deepStrictEqual(dataset.examples, [])
        assert.strictEqual(dataset.task_id, task.id)
      }))

    it.effect("create answers 201; read back by id and in the list", () =>
      Effect.gen(function*() {
        const svc = yield* SvcTest
        const org = yield* SvcTest.org()
        const response = yield* raw(`${svc.baseUrl}/v1/tasks`, {
          method: "POST",
          headers: { authorization: `Bearer ${org.key}`, "content-type": "application/json" },
          body: JSON.stringify({ name: "raw", answer_schema: schema })
        })
        assert.strictEqual(response.status, 201)
        const got = yield* org.client.tasks.get({ params: { task_id: response.json.id } })
        assert.strictEqual(got.name, "raw")
        const list = yield* org.client.tasks.list({ query: {} })
        assert.include(list.tasks.map((t) => t.id), got.id)
      }))

    it.effect("a schema that is not valid JSON Schema: 400 naming answer_schema and the problem", () =>
      Effect.gen(function*() {
        const org = yield* SvcTest.org()
        for (
          const bad of [{ type: 12 }, { properties: { a: { minimum: "x" } } }, { $ref: "https://example.com/x.json" }]
        ) {
          const error = yield* org.client.tasks.create({ payload: { name: "bad", answer_schema: bad } }).pipe(
            Effect.flip
          )
          assert.strictEqual(error._tag, "InvalidRequest")
          if (error._tag === "InvalidRequest") {
            assert.strictEqual(error.field, "answer_schema")
            assert.isAbove((error.detail ?? "").length, 30)
          }
        }
      }))

    it.effect("lists page newest first with an opaque cursor; nothing skipped or repeated while tasks arrive", () =>
      Effect.gen(function*() {
        const org = yield* SvcTest.org()
        const created: Array<string> = []
        for (let i = 0; i < 7; i++) {
          created.push((yield* org.client.tasks.create({ payload: { name: `t${i}`, answer_schema: schema } })).id)
        }
        const seen: Array<string> = []
        let cursor: string | undefined
        let pages = 0
        do {
          const page = yield* org.client.tasks.list({ query: { limit: 3, ...(cursor ? { cursor } : {}) } })
          seen.push(...page.tasks.map((t) => t.id))
          cursor = page.next_cursor ?? undefined
          if (pages++ === 0) yield* org.client.tasks.create({ payload: { name: "late", answer_schema: schema } })
        } while (cursor !== undefined)
        assert.deepStrictEqual(seen, [...created].reverse())
      }))
  })

  describe("logged runs", () => {
    it.effect("a run answers 201 with a W3C trace_id, also in the x-svc-trace-id header", () =>
      Effect.gen(function*() {
        const svc = yield* SvcTest
        const org = yield* SvcTest.org()
        const task = yield* org.client.tasks.create({ payload: { name: "t", answer_schema: schema } })
        const response = yield* raw(`${svc.baseUrl}/v1/tasks/${task.id}/runs`, {
          method: "POST",
          headers: { authorization: `Bearer ${org.key}`, "content-type": "application/json" },
          body: JSON.stringify({ input: { question: "q" }, answer: { label: "a" } })
        })
        assert.strictEqual(response.status, 201)
        assert.match(response.json.trace_id, /^[0-9a-f]{32}$/)
        assert.notStrictEqual(response.json.trace_id, "0".repeat(32))
        assert.strictEqual(response.headers.get("x-svc-trace-id"), response.json.trace_id)
        const run = yield* org.client.tasks.getRun({ params: { trace_id: response.json.trace_id } })
        assert.deepStrictEqual(run.input, { question: "q" })
        assert.deepStrictEqual(run.answer, { label: "a" })
        assert.strictEqual(run.task_id, task.id)
      }))

    it.effect("the run as answered is the run as stored, field for field (the answer echoes the request's input and answer)", () =>
      Effect.gen(function*() {
        const svc = yield* SvcTest
        const org = yield* SvcTest.org()
        const task = yield* org.client.tasks.create({ payload: { name: "t", answer_schema: schema } })
        // JSON the database stores in its own form: numbers written several
        // ways, a repeated member name (the last one counts), member order,
        // escapes and non-ASCII text, nesting, and an upper-case task id in the path.
        const body =
          `{"input": {"zeta": 1.50, "a": [1e3, -0, 0.1, 12345678901234567890], "a": {"kept": true}, "t\\u00e9xt": "caf\\u00e9 \\ud83d\\ude00"},
          "answer": [null, false, {"b": {"c": [[]]}, "": "empty name"}, -1.5e-7]}`
        const response = yield* raw(`${svc.baseUrl}/v1/tasks/${task.id.toUpperCase()}/runs`, {
          method: "POST",
          headers: { authorization: `Bearer ${org.key}`, "content-type": "application/json" },
          body
        })
        assert.strictEqual(response.status, 201)
        const stored = yield* org.client.tasks.getRun({ params: { trace_id: response.json.trace_id } })
        assert.deepStrictEqual(response.json, { ...stored })
        assert.strictEqual(response.json.task_id, task.id)
        assert.deepStrictEqual(response.json.input, JSON.parse(body).input)
        const listed = yield* org.client.tasks.listRuns({ params: { task_id: task.id }, query: {} })
        assert.deepStrictEqual(listed.runs.map((r) => ({ ...r })), [response.json])
      }))

    it.effect("every run gets its own trace id; runs list newest first", () =>
      Effect.gen(function*() {
        const org = yield* SvcTest.org()
        const task = yield* org.client.tasks.create({ payload: { name: "t", answer_schema: schema } })
        const ids: Array<string> = []
        for (let i = 0; i < 5; i++) {
          ids.push(
            (yield* org.client.tasks.logRun({
              params: { task_id: task.id },
              payload: { input: i, answer: { label: `${i}` } }
            })).trace_id
          )
        }
        assert.strictEqual(new Set(ids).size, 5)
        const first = yield* org.client.tasks.listRuns({ params: { task_id: task.id }, query: { limit: 2 } })
        assert.deepStrictEqual(first.runs.map((r) => r.trace_id), [ids[4], ids[3]])
        const second = yield* org.client.tasks.listRuns({
          params: { task_id: task.id },
          query: { limit: 10, cursor: first.next_cursor! }
        })
        assert.deepStrictEqual(second.runs.map((r) => r.trace_id), [ids[2], ids[1], ids[0]])
        assert.isNull(second.next_cursor)
      }))

    it.effect("logging a run on an unknown task: 404", () =>
      Effect.gen(function*() {
        const org = yield* SvcTest.org()
        const error = yield* org.client.tasks.logRun({
          params: { task_id: "01900000-0000-7000-8000-000000000000" },
          payload: { input: 1, answer: 1 }
        }).pipe(Effect.flip)
        assert.strictEqual(error._tag, "NotFound")
      }))
  })
})
