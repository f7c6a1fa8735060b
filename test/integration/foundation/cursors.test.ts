import { assert, describe, layer } from "@effect/vitest"
import { Effect } from "effect"
import { SvcTest } from "../../../src/testing.ts"
import { raw } from "../../support/http.ts"

const schema = { type: "object" }

layer(SvcTest.layer(), { excludeTestServices: true })("pagination cursors", (it) => {
  describe("a cursor works only in the list of the organization that got it", () => {
    it.effect("another organization's cursor, another list's, an edited or out-of-range one: 400 naming cursor", () =>
      Effect.gen(function*() {
        const svc = yield* SvcTest
        const a = yield* SvcTest.org()
        const b = yield* SvcTest.org()
        const get = (key: string, path: string) =>
          raw(`${svc.baseUrl}${path}`, { headers: { authorization: `Bearer ${key}` } })
        const task = yield* a.client.tasks.create({ payload: { name: "t0", answer_schema: schema } })
        yield* a.client.tasks.create({ payload: { name: "t1", answer_schema: schema } })
        for (let i = 0; i < 2; i++) {
          yield* a.client.tasks.logRun({ params: { task_id: task.id }, payload: { input: i, answer: {} } })
        }
        const tasksPage = yield* a.client.tasks.list({ query: { limit: 1 } })
        const cursor = tasksPage.next_cursor!
        assert.isString(cursor)
        // its own list: works
        const next = yield* get(a.key, `/v1/tasks?limit=1&cursor=${cursor}`)
        assert.strictEqual(next.status, 200)
        assert.strictEqual(next.json.tasks.length, 1)
        const refused = (response: { status: number; json: any }) => {
          assert.strictEqual(response.status, 400)
          assert.strictEqual(response.json.code, "INVALID_REQUEST")
          assert.strictEqual(response.json.field, "cursor")
        }
        // another organization
        refused(yield* get(b.key, `/v1/tasks?limit=1&cursor=${cursor}`))
        // another list of the same organization
        refused(yield* get(a.key, `/v1/tasks/${task.id}/runs?limit=1&cursor=${cursor}`))
        refused(yield* get(a.key, `/v1/feedback?limit=1&cursor=${cursor}`))
        const runsPage = yield* a.client.tasks.listRuns({ params: { task_id: task.id }, query: { limit: 1 } })
        const other = yield* a.client.tasks.create({ payload: { name: "t2", answer_schema: schema } })
        refused(yield* get(a.key, `/v1/tasks/${other.id}/runs?limit=1&cursor=${runsPage.next_cursor}`))
        // the sequence changed, even to one outside bigint
        const [, tag] = cursor.split(".")
        for (const seq of ["1", "9223372036854775808", "99999999999999999999", "-1"]) {
          refused(yield* get(a.key, `/v1/tasks?cursor=${Buffer.from(seq).toString("base64url")}.${tag}`))
        }
        // the old, unsigned format (a JSON object in base64url) with an out-of-range sequence
        refused(
          yield* get(
            a.key,
            `/v1/tasks?cursor=${Buffer.from(JSON.stringify({ s: "9999999999999999999" })).toString("base64url")}`
          )
        )
      }))

    it.effect("feedback cursors are bound to the filters they were issued with", () =>
      Effect.gen(function*() {
        const svc = yield* SvcTest
        const org = yield* SvcTest.org()
        const task = yield* org.client.tasks.create({ payload: { name: "t", answer_schema: schema } })
        for (let i = 0; i < 3; i++) {
          const run = yield* org.client.tasks.logRun({
            params: { task_id: task.id },
            payload: { input: i, answer: {} }
          })
          yield* org.client.feedback.submit({
            payload: { inference_log_id: run.trace_id, score: 1, correction: { i } }
          })
        }
        const first = yield* org.client.feedback.list({ query: { task_id: task.id, limit: 1 } })
        const get = (query: string) =>
          raw(`${svc.baseUrl}/v1/feedback?${query}`, { headers: { authorization: `Bearer ${org.key}` } })
        const same = yield* get(`task_id=${task.id}&limit=1&cursor=${first.next_cursor}`)
        assert.strictEqual(same.status, 200)
        assert.strictEqual(same.json.feedback.length, 1)
        const changed = yield* get(`status=pending&limit=1&cursor=${first.next_cursor}`)
        assert.strictEqual(changed.status, 400)
        assert.strictEqual(changed.json.field, "cursor")
      }))
  })
})
