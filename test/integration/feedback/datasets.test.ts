/**
 * Dataset versions by reference: a version is its base plus the rows it
 * adds, so a promote writes the staged rows and nothing else; examples and
 * the promote preview come in pages; the organization's quotas (feedback
 * bytes, examples per dataset, promotes per minute) are answered with a
 * problem naming their setting.
 */
import * as NodeServices from "@effect/platform-node/NodeServices"
import { PgMigrator } from "@effect/sql-pg"
import { assert, describe, it, layer } from "@effect/vitest"
import { Effect, Layer } from "effect"
import { SqlClient } from "effect/sql"
import { migrations } from "../../../src/database/migrations/index.ts"
import { FEEDBACK_RECORD_BYTES } from "../../../src/feedback/Quota.ts"
import { newId } from "../../../src/platform/Ids.ts"
import { RUN_RECORD_BYTES } from "../../../src/tasks/RunInsert.ts"
import { SvcTest, type TestOrg } from "../../../src/testing.ts"
import { databases } from "../../support/databases.ts"
import { raw } from "../../support/http.ts"

const schema = {
  type: "object",
  required: ["label"],
  properties: { label: { type: "string" } },
  additionalProperties: false
}

/** A task with `count` staged corrections, one run each (inputs `{n: i}`). */
const stagedTask = (org: TestOrg, count: number, taskId?: string) =>
  Effect.gen(function*() {
    const id = taskId ?? (yield* org.client.tasks.create({ payload: { name: "tickets", answer_schema: schema } })).id
    const ids: Array<string> = []
    for (let i = 0; i < count; i++) {
      const run = yield* org.client.tasks.logRun({
        params: { task_id: id },
        payload: { input: { n: i }, answer: { label: "wrong" } }
      })
      const item = yield* org.client.feedback.submit({
        payload: { inference_log_id: run.trace_id, score: -1, correction: { label: `right-${i}` } }
      })
      yield* org.client.feedback.stage({ params: { feedback_id: item.id } })
      ids.push(item.id)
    }
    return { taskId: id, ids }
  })

const promoteAll = (org: TestOrg, taskId: string) =>
  Effect.gen(function*() {
    const preview = yield* org.client.feedback.promotePreview({ params: { task_id: taskId }, query: {} })
    return yield* org.client.feedback.promote({
      params: { task_id: taskId },
      payload: {
        base_dataset_id: preview.base_dataset_id,
        expected_feedback_revision: preview.expected_feedback_revision
      }
    })
  })

const send = (org: TestOrg, method: string, path: string, body?: unknown) =>
  Effect.flatMap(SvcTest, (svc) =>
    raw(`${svc.baseUrl}${path}`, {
      method,
      headers: {
        authorization: `Bearer ${org.key}`,
        ...(body === undefined ? {} : { "content-type": "application/json" })
      },
      ...(body === undefined ? {} : { body: JSON.stringify(body) })
    }))

const MAX_EXAMPLES = 7
const MAX_PROMOTES = 3
const MAX_FEEDBACK_BYTES = 4096
const MAX_RUN_BYTES = 64 * 1024

layer(
  SvcTest.layer({
    config: {
      maxExamplesPerDataset: MAX_EXAMPLES,
      maxPromotesPerMinute: MAX_PROMOTES,
      maxFeedbackBytesPerOrg: MAX_FEEDBACK_BYTES,
      maxRunBytesPerOrg: MAX_RUN_BYTES
    }
  }),
  { excludeTestServices: true }
)("datasets by reference", (it) => {
  describe("a promote writes only the staged rows", () => {
    it.effect("promoting 2 onto a version of 5 adds 2 example rows and 1 version row, and every version reads as before", () =>
      Effect.gen(function*() {
        const svc = yield* SvcTest
        const org = yield* SvcTest.org()
        const { taskId } = yield* stagedTask(org, 5)
        const first = yield* promoteAll(org, taskId)
        const v2 = yield* org.client.datasets.get({ params: { dataset_id: first.dataset_id }, query: {} })
        const count = (table: "dataset_examples" | "datasets") =>
          svc.sql<{ n: number }>`SELECT count(*)::int AS n FROM ${svc.sql(table)}`.pipe(
            Effect.map((rows) => rows[0]!.n)
          )
        const examplesBefore = yield* count("dataset_examples")
        const versionsBefore = yield* count("datasets")

        const { ids } = yield* stagedTask(org, 2, taskId)
        const second = yield* promoteAll(org, taskId)
        assert.strictEqual(second.promoted_count, 2)
        assert.strictEqual((yield* count("dataset_examples")) - examplesBefore, 2)
        assert.strictEqual((yield* count("datasets")) - versionsBefore, 1)
        // The rows written belong to the new version; the base's are untouched.
        const added = yield* svc.sql<{ feedback_id: string }>`
          SELECT feedback_id FROM dataset_examples WHERE dataset_id = ${second.dataset_id} ORDER BY position`
        assert.deepStrictEqual(added.map((row) => row.feedback_id), ids)

        const v3 = yield* org.client.datasets.get({ params: { dataset_id: second.dataset_id }, query: {} })
        assert.strictEqual(v3.example_count, 7)
        assert.deepStrictEqual(v3.examples.slice(0, 5), v2.examples)
        assert.deepStrictEqual(v3.examples.slice(5).map((e) => e.answer), [{ label: "right-0" }, { label: "right-1" }])
        assert.deepStrictEqual(
          yield* org.client.datasets.get({ params: { dataset_id: first.dataset_id }, query: {} }),
          v2
        )
      }))
  })

  describe("examples of a version are paginated (limit <= 100, cursor)", () => {
    it.effect("pages in order cover every example once; the last page has next_cursor null; a version stays the same while newer ones are made", () =>
      Effect.gen(function*() {
        const org = yield* SvcTest.org()
        const { taskId } = yield* stagedTask(org, 5)
        const { dataset_id } = yield* promoteAll(org, taskId)
        const whole = yield* org.client.datasets.get({ params: { dataset_id }, query: {} })
        assert.strictEqual(whole.examples.length, 5)
        assert.isNull(whole.next_cursor)
        const seen: Array<unknown> = []
        let cursor: string | undefined
        let pages = 0
        do {
          const page = yield* org.client.datasets.get({
            params: { dataset_id },
            query: { limit: 2, ...(cursor === undefined ? {} : { cursor }) }
          })
          assert.isAtMost(page.examples.length, 2)
          assert.strictEqual(page.example_count, 5)
          seen.push(...page.examples)
          cursor = page.next_cursor ?? undefined
          // A newer version made between pages does not change this one.
          if (pages++ === 0) {
            yield* stagedTask(org, 1, taskId)
            yield* promoteAll(org, taskId)
          }
        } while (cursor !== undefined)
        assert.strictEqual(pages, 3)
        assert.deepStrictEqual(seen, [...whole.examples])
        assert.deepStrictEqual(seen.map((e: any) => e.input), [0, 1, 2, 3, 4].map((n) => ({ n })))
      }))

    it.effect("limit over 100, or a cursor of another version: 400 naming the field", () =>
      Effect.gen(function*() {
        const org = yield* SvcTest.org()
        const { taskId } = yield* stagedTask(org, 3)
        const { dataset_id } = yield* promoteAll(org, taskId)
        const page = yield* org.client.datasets.get({ params: { dataset_id }, query: { limit: 1 } })
        const over = yield* send(org, "GET", `/v1/datasets/${dataset_id}?limit=101`)
        assert.strictEqual(over.status, 400)
        assert.strictEqual(over.json.field, "limit")
        const { datasets } = yield* org.client.datasets.listForTask({ params: { task_id: taskId }, query: {} })
        const foreign = yield* send(org, "GET", `/v1/datasets/${datasets[0]!.id}?cursor=${page.next_cursor}`)
        assert.strictEqual(foreign.status, 400)
        assert.strictEqual(foreign.json.field, "cursor")
      }))
  })

  describe("a task's dataset versions are paginated (limit <= 100, cursor), oldest first", () => {
    it.effect("pages of versions in order cover every version once; the last page has next_cursor null; versions made between pages come on a later page", () =>
      Effect.gen(function*() {
        const svc = yield* SvcTest
        const org = yield* SvcTest.org()
        // More versions than SVC_MAX_PROMOTES_PER_MINUTE allows in a minute: its allowance is freed before each.
        const promote = (taskId: string) =>
          Effect.andThen(
            svc.sql`UPDATE org_rate_limits SET tat = now() WHERE org_id = ${org.orgId}`,
            promoteAll(org, taskId)
          )
        const { taskId } = yield* stagedTask(org, 1)
        yield* promote(taskId)
        for (let i = 0; i < 3; i++) {
          yield* stagedTask(org, 1, taskId)
          yield* promote(taskId)
        }
        const whole = yield* org.client.datasets.listForTask({ params: { task_id: taskId }, query: {} })
        assert.deepStrictEqual(whole.datasets.map((d) => d.version), [1, 2, 3, 4, 5])
        assert.isNull(whole.next_cursor)
        const seen: Array<number> = []
        let cursor: string | undefined
        let pages = 0
        do {
          const page = yield* org.client.datasets.listForTask({
            params: { task_id: taskId },
            query: { limit: 2, ...(cursor === undefined ? {} : { cursor }) }
          })
          assert.isAtMost(page.datasets.length, 2)
          seen.push(...page.datasets.map((d) => d.version))
          cursor = page.next_cursor ?? undefined
          if (pages++ === 0) {
            yield* stagedTask(org, 1, taskId)
            yield* promote(taskId)
          }
        } while (cursor !== undefined)
        assert.strictEqual(pages, 3)
        assert.deepStrictEqual(seen, [1, 2, 3, 4, 5, 6])
        const last = yield* org.client.datasets.listForTask({ params: { task_id: taskId }, query: { limit: 6 } })
        assert.strictEqual(last.datasets.length, 6)
        assert.isNull(last.next_cursor)
      }))

    it.effect("limit 0 or over 100: 400 naming limit; 100 is taken; a cursor of another task, another list or edited: 400 naming cursor", () =>
      Effect.gen(function*() {
        const org = yield* SvcTest.org()
        const { taskId } = yield* stagedTask(org, 1)
        yield* promoteAll(org, taskId)
        for (const limit of ["0", "101", "x"]) {
          const bad = yield* send(org, "GET", `/v1/tasks/${taskId}/datasets?limit=${limit}`)
          assert.strictEqual(bad.status, 400, limit)
          assert.strictEqual(bad.json.code, "INVALID_REQUEST")
          assert.strictEqual(bad.json.field, "limit")
        }
        const most = yield* org.client.datasets.listForTask({ params: { task_id: taskId }, query: { limit: 100 } })
        assert.strictEqual(most.datasets.length, 2)
        const page = yield* org.client.datasets.listForTask({ params: { task_id: taskId }, query: { limit: 1 } })
        assert.isNotNull(page.next_cursor)
        const other = yield* stagedTask(org, 1)
        yield* promoteAll(org, other.taskId)
        const tasks = yield* org.client.tasks.list({ query: { limit: 1 } })
        const edited = `${page.next_cursor!.slice(0, -1)}${page.next_cursor!.endsWith("A") ? "B" : "A"}`
        const otherOrg = yield* SvcTest.org()
        const theirs = yield* stagedTask(otherOrg, 1)
        yield* promoteAll(otherOrg, theirs.taskId)
        const theirPage = yield* otherOrg.client.datasets.listForTask({
          params: { task_id: theirs.taskId },
          query: { limit: 1 }
        })
        for (
          const [path, cursor] of [
            [`/v1/tasks/${other.taskId}/datasets`, page.next_cursor!],
            [`/v1/tasks/${taskId}/datasets`, edited],
            [`/v1/tasks/${taskId}/datasets`, theirPage.next_cursor!],
            [`/v1/tasks/${taskId}/datasets`, "garbage"]
          ] as const
        ) {
          const bad = yield* send(org, "GET", `${path}?cursor=${encodeURIComponent(cursor)}`)
          assert.strictEqual(bad.status, 400, cursor)
          assert.strictEqual(bad.json.code, "INVALID_REQUEST")
          assert.strictEqual(bad.json.field, "cursor")
        }
        // A cursor of another list (the tasks) is not one of this list.
        const sole = yield* send(
          org,
          "GET",
          `/v1/tasks/${taskId}/datasets?cursor=${encodeURIComponent(tasks.next_cursor!)}`
        )
        assert.strictEqual(sole.status, 400)
        assert.strictEqual(sole.json.field, "cursor")
      }))
  })

  describe("the promote preview is paginated; its revision covers the whole staged set", () => {
    it.effect("pages of staged corrections, oldest first; staged_count and the revision are the same on every page; promote takes them all", () =>
      Effect.gen(function*() {
        const org = yield* SvcTest.org()
        const { taskId, ids } = yield* stagedTask(org, 5)
        const first = yield* org.client.feedback.promotePreview({ params: { task_id: taskId }, query: { limit: 2 } })
        assert.strictEqual(first.staged_count, 5)
        assert.deepStrictEqual(first.staged.map((f) => f.id), ids.slice(0, 2))
        const seen = [...first.staged.map((f) => f.id)]
        let cursor = first.next_cursor
        while (cursor !== null) {
          const page = yield* org.client.feedback.promotePreview({
            params: { task_id: taskId },
            query: { limit: 2, cursor }
          })
          assert.strictEqual(page.expected_feedback_revision, first.expected_feedback_revision)
          assert.strictEqual(page.staged_count, 5)
          seen.push(...page.staged.map((f) => f.id))
          cursor = page.next_cursor
        }
        assert.deepStrictEqual(seen, ids)
        const done = yield* org.client.feedback.promote({
          params: { task_id: taskId },
          payload: {
            base_dataset_id: first.base_dataset_id,
            expected_feedback_revision: first.expected_feedback_revision
          }
        })
        assert.strictEqual(done.promoted_count, 5)
      }))
  })

  describe("quotas, each an SVC_* setting named in the problem", () => {
    it.effect("examples per dataset: a promote past SVC_MAX_EXAMPLES_PER_DATASET is 409 LIMIT_REACHED; nothing promoted", () =>
      Effect.gen(function*() {
        const org = yield* SvcTest.org()
        const { taskId } = yield* stagedTask(org, MAX_EXAMPLES - 1)
        yield* promoteAll(org, taskId)
        yield* stagedTask(org, 2, taskId)
        const preview = yield* org.client.feedback.promotePreview({ params: { task_id: taskId }, query: {} })
        const over = yield* send(org, "POST", `/v1/tasks/${taskId}/feedback/promote`, {
          base_dataset_id: preview.base_dataset_id,
          expected_feedback_revision: preview.expected_feedback_revision
        })
        assert.strictEqual(over.status, 409)
        assert.strictEqual(over.json.code, "LIMIT_REACHED")
        assert.strictEqual(over.json.limit, "SVC_MAX_EXAMPLES_PER_DATASET")
        assert.strictEqual(over.json.limit_value, MAX_EXAMPLES)
        const still = yield* org.client.feedback.promotePreview({ params: { task_id: taskId }, query: {} })
        assert.strictEqual(still.staged_count, 2)
        assert.strictEqual(still.base_dataset_id, preview.base_dataset_id)
      }))

    it.effect("promotes per minute: one more than SVC_MAX_PROMOTES_PER_MINUTE is 429 RATE_LIMITED with Retry-After; the rate is the organization's, kept in the database", () =>
      Effect.gen(function*() {
        const svc = yield* SvcTest
        const org = yield* SvcTest.org()
        const { taskId } = yield* stagedTask(org, 1)
        for (let i = 0; i < MAX_PROMOTES; i++) {
          if (i > 0) yield* stagedTask(org, 1, taskId)
          yield* promoteAll(org, taskId)
        }
        yield* stagedTask(org, 1, taskId)
        const preview = yield* org.client.feedback.promotePreview({ params: { task_id: taskId }, query: {} })
        const over = yield* send(org, "POST", `/v1/tasks/${taskId}/feedback/promote`, {
          base_dataset_id: preview.base_dataset_id,
          expected_feedback_revision: preview.expected_feedback_revision
        })
        assert.strictEqual(over.status, 429)
        assert.strictEqual(over.json.code, "RATE_LIMITED")
        assert.strictEqual(over.json.limit, "SVC_MAX_PROMOTES_PER_MINUTE")
        assert.strictEqual(over.json.limit_value, MAX_PROMOTES)
        const retryAfter = Number(over.headers.get("retry-after"))
        assert.isAtLeast(retryAfter, 1)
        assert.isAtMost(retryAfter, 60)
        assert.strictEqual(over.json.retry_after_seconds, retryAfter)
        const typed = yield* org.client.feedback.promote({
          params: { task_id: taskId },
          payload: {
            base_dataset_id: preview.base_dataset_id,
            expected_feedback_revision: preview.expected_feedback_revision
          }
        }).pipe(Effect.flip)
        assert.strictEqual(typed._tag, "RateLimited")
        // Another organization has its own rate.
        const other = yield* SvcTest.org()
        const theirs = yield* stagedTask(other, 1)
        yield* promoteAll(other, theirs.taskId)
        // Every process reads the same allowance: it is a row, not process memory.
        const [row] = yield* svc.sql<{ ahead: boolean }>`
          SELECT tat > now() + interval '30 seconds' AS ahead FROM org_rate_limits WHERE org_id = ${org.orgId} AND name = 'promote'`
        assert.isTrue(row!.ahead)
        // Once the allowance frees up (as if a minute had passed), the promote goes through.
        yield* svc.sql`UPDATE org_rate_limits SET tat = now() WHERE org_id = ${org.orgId}`
        const after = yield* promoteAll(org, taskId)
        assert.strictEqual(after.promoted_count, 1)
      }))

    it.effect("feedback bytes: a correction that would pass SVC_MAX_FEEDBACK_BYTES_PER_ORG is refused before it is checked against the answer schema; a full organization before its body is parsed", () =>
      Effect.gen(function*() {
        const org = yield* SvcTest.org()
        // Checking `slow` against this schema takes longer than the check's
        // deadline: had the correction reached a worker, the answer would be
        // 422 CORRECTION_TOO_COMPLEX after a second, not 409 at once.
        const slowSchema = { type: "object", properties: { s: { type: "string", pattern: "^(a+)+$" } } }
        const task = yield* org.client.tasks.create({ payload: { name: "slow", answer_schema: slowSchema as never } })
        const run = yield* org.client.tasks.logRun({
          params: { task_id: task.id },
          payload: { input: {}, answer: { s: "aaa" } }
        })
        const slow = { s: "a".repeat(40) + "!", pad: "p".repeat(MAX_FEEDBACK_BYTES) }
        const started = Date.now()
        const over = yield* send(org, "POST", "/v1/feedback", {
          inference_log_id: run.trace_id,
          score: -1,
          correction: slow
        })
        assert.strictEqual(over.status, 409)
        assert.strictEqual(over.json.code, "LIMIT_REACHED")
        assert.strictEqual(over.json.limit, "SVC_MAX_FEEDBACK_BYTES_PER_ORG")
        assert.strictEqual(over.json.limit_value, MAX_FEEDBACK_BYTES)
        assert.isBelow(Date.now() - started, 900)
        // A correction that fits is checked (and here times out): the refusal above was the quota's.
        const fits = yield* send(org, "POST", "/v1/feedback", {
          inference_log_id: run.trace_id,
          score: -1,
          correction: { s: slow.s }
        })
        assert.strictEqual(fits.status, 422)
        // Bare scores fill the quota; then even a body that is not JSON is
        // refused by the quota: it is decided before the body is parsed.
        for (let i = 0; i < Math.floor(MAX_FEEDBACK_BYTES / FEEDBACK_RECORD_BYTES); i++) {
          yield* org.client.feedback.submit({ payload: { inference_log_id: run.trace_id, score: 1 } })
        }
        const full = yield* SvcTest.pipe(Effect.flatMap((svc) =>
          raw(`${svc.baseUrl}/v1/feedback`, {
            method: "POST",
            headers: { authorization: `Bearer ${org.key}`, "content-type": "application/json" },
            body: "{ this is not JSON"
          })
        ))
        assert.strictEqual(full.status, 409)
        assert.strictEqual(full.json.limit, "SVC_MAX_FEEDBACK_BYTES_PER_ORG")
      }))

    it.effect("feedback bytes: a submission past SVC_MAX_FEEDBACK_BYTES_PER_ORG is 409 LIMIT_REACHED naming it, nothing stored; other organizations are unaffected", () =>
      Effect.gen(function*() {
        const svc = yield* SvcTest
        const org = yield* SvcTest.org()
        const task = yield* org.client.tasks.create({ payload: { name: "big", answer_schema: schema } })
        const run = yield* org.client.tasks.logRun({
          params: { task_id: task.id },
          payload: { input: {}, answer: { label: "x" } }
        })
        const label = "y".repeat(1000)
        const each = FEEDBACK_RECORD_BYTES + JSON.stringify({ label }).length
        const fits = Math.floor(MAX_FEEDBACK_BYTES / each)
        for (let i = 0; i < fits; i++) {
          yield* org.client.feedback.submit({
            payload: { inference_log_id: run.trace_id, score: -1, correction: { label } }
          })
        }
        const over = yield* send(org, "POST", "/v1/feedback", {
          inference_log_id: run.trace_id,
          score: -1,
          correction: { label }
        })
        assert.strictEqual(over.status, 409)
        assert.strictEqual(over.json.code, "LIMIT_REACHED")
        assert.strictEqual(over.json.limit, "SVC_MAX_FEEDBACK_BYTES_PER_ORG")
        assert.strictEqual(over.json.limit_value, MAX_FEEDBACK_BYTES)
        const [stored] = yield* svc.sql<
          { n: number }
        >`SELECT count(*)::int AS n FROM feedback WHERE org_id = ${org.orgId}`
        assert.strictEqual(stored!.n, fits)
        const [usage] = yield* svc.sql<
          { bytes: string }
        >`SELECT sum(bytes)::text AS bytes FROM org_usage WHERE org_id = ${org.orgId} AND kind = 'feedback'`
        assert.strictEqual(Number(usage!.bytes), fits * each)
        // What is left still takes a smaller record: a bare score counts its record only.
        if (MAX_FEEDBACK_BYTES - fits * each >= FEEDBACK_RECORD_BYTES) {
          yield* org.client.feedback.submit({ payload: { inference_log_id: run.trace_id, score: 1 } })
        }
        const other = yield* SvcTest.org()
        const theirs = yield* other.client.tasks.create({ payload: { name: "t", answer_schema: schema } })
        const theirRun = yield* other.client.tasks.logRun({
          params: { task_id: theirs.id },
          payload: { input: {}, answer: { label: "x" } }
        })
        yield* other.client.feedback.submit({
          payload: { inference_log_id: theirRun.trace_id, score: -1, correction: { label } }
        })
      }))

    it.effect("logged-run bytes: a run past SVC_MAX_RUN_BYTES_PER_ORG is 409 LIMIT_REACHED naming it, nothing stored; other organizations are unaffected", () =>
      Effect.gen(function*() {
        const svc = yield* SvcTest
        const org = yield* SvcTest.org()
        const task = yield* org.client.tasks.create({ payload: { name: "big inputs", answer_schema: schema } })
        const input = { items: Array.from({ length: 2000 }, (_, i) => i) }
        const answer = { label: "x" }
        const each = RUN_RECORD_BYTES + JSON.stringify(input).length + JSON.stringify(answer).length
        const fits = Math.floor(MAX_RUN_BYTES / each)
        for (let i = 0; i < fits; i++) {
          yield* org.client.tasks.logRun({ params: { task_id: task.id }, payload: { input, answer } })
        }
        const over = yield* send(org, "POST", `/v1/tasks/${task.id}/runs`, { input, answer })
        assert.strictEqual(over.status, 409)
        assert.strictEqual(over.json.code, "LIMIT_REACHED")
        assert.strictEqual(over.json.limit, "SVC_MAX_RUN_BYTES_PER_ORG")
        assert.strictEqual(over.json.limit_value, MAX_RUN_BYTES)
        const [stored] = yield* svc.sql<{ n: number }>`SELECT count(*)::int AS n FROM runs WHERE org_id = ${org.orgId}`
        assert.strictEqual(stored!.n, fits)
        const [usage] = yield* svc.sql<
          { bytes: string }
        >`SELECT sum(bytes)::text AS bytes FROM org_usage WHERE org_id = ${org.orgId} AND kind = 'runs'`
        assert.strictEqual(Number(usage!.bytes), fits * each)
        // A smaller run still fits in what is left; an unknown task is still a 404.
        if (MAX_RUN_BYTES - fits * each >= RUN_RECORD_BYTES + 20) {
          yield* org.client.tasks.logRun({ params: { task_id: task.id }, payload: { input: {}, answer } })
        }
        assert.strictEqual((yield* send(org, "POST", `/v1/tasks/${newId()}/runs`, { input: {}, answer })).status, 404)
        const other = yield* SvcTest.org()
        const theirs = yield* other.client.tasks.create({ payload: { name: "t", answer_schema: schema } })
        yield* other.client.tasks.logRun({ params: { task_id: theirs.id }, payload: { input, answer } })
      }))
  })
})

describe("existing datasets migrate by reference", () => {
  const before = Effect.map(migrations, (all) => all.filter(([id]) => id < 630))
  const readOld = (sql: SqlClient.SqlClient) =>
    sql<{ id: string; examples: string }>`
      SELECT d.id::text, coalesce((SELECT json_agg(json_build_array(e.input, e.answer, e.feedback_id) ORDER BY e.position)::text
                                    FROM dataset_examples e WHERE e.dataset_id = d.id), '[]') AS examples
      FROM datasets d ORDER BY d.id`
  const readNew = (sql: SqlClient.SqlClient) =>
    sql<{ id: string; examples: string }>`
      SELECT d.id::text, coalesce((SELECT json_agg(json_build_array(e.input, e.answer, e.feedback_id) ORDER BY e.position)::text
                                    FROM dataset_examples e WHERE e.lineage_id = d.lineage_id AND e.position < d.example_count), '[]') AS examples
      FROM datasets d ORDER BY d.id`

  for (const [name, database] of databases) {
    it.live(
      `every version reads the same examples in the same order, each example stored once per line; versions that did not extend their predecessor keep theirs (${name})`,
      () =>
        Effect.gen(function*() {
          const sql = yield* SqlClient.SqlClient
          yield* PgMigrator.run({ loader: before, table: "svc_migrations" })
          const org = newId()
          yield* sql`INSERT INTO orgs (id, name) VALUES (${org}, 'old')`
          const version = (task: string, n: number, count: number, rows: ReadonlyArray<readonly [number, unknown]>) =>
            Effect.gen(function*() {
              const id = newId()
              yield* sql`INSERT INTO datasets (id, org_id, task_id, version, example_count) VALUES (${id}, ${org}, ${task}, ${n}, ${count})`
              for (const [position, answer] of rows) {
                yield* sql`INSERT INTO dataset_examples (dataset_id, position, input, answer, feedback_id)
                         VALUES (${id}, ${position}, ${JSON.stringify({ p: position })}::jsonb, ${
                  JSON.stringify(answer)
                }::jsonb, ${position % 2 === 0 ? newIdFor(answer) : null})`
              }
              return id
            })
          const feedbackIds = new Map<string, string>()
          const newIdFor = (answer: unknown) => {
            const key = JSON.stringify(answer)
            if (!feedbackIds.has(key)) feedbackIds.set(key, newId())
            return feedbackIds.get(key)!
          }
          const task = () =>
            Effect.gen(function*() {
              const id = newId()
              yield* sql`INSERT INTO tasks (id, org_id, name, answer_schema) VALUES (${id}, ${org}, 't', '{}'::jsonb)`
              return id
            })
          // As svc made them: each version a full copy of its base plus what it added.
          const t1 = yield* task()
          yield* version(t1, 1, 0, [])
          yield* version(t1, 2, 2, [[0, "a"], [1, "b"]])
          yield* version(t1, 3, 3, [[0, "a"], [1, "b"], [2, "c"]])
          // A version whose first rows differ from its predecessor's, and one extending it.
          const t2 = yield* task()
          yield* version(t2, 1, 1, [[0, "x"]])
          yield* version(t2, 2, 2, [[0, "y"], [1, "z"]])
          yield* version(t2, 3, 3, [[0, "y"], [1, "z"], [2, "w"]])
          // Positions with a gap and a count that does not match the rows.
          const t3 = yield* task()
          const gapped = yield* version(t3, 1, 3, [[0, "g"], [5, "h"]])
          const old = yield* readOld(sql)
          const [oldRows] = yield* sql<{ n: number }>`SELECT count(*)::int AS n FROM dataset_examples`
          assert.strictEqual(oldRows!.n, 13)

          const applied = yield* PgMigrator.run({ loader: migrations, table: "svc_migrations" })
          assert.include(applied.map(([, name]) => name), "datasets_by_reference")
          assert.deepStrictEqual(yield* readNew(sql), old)
          const [newRows] = yield* sql<{ n: number }>`SELECT count(*)::int AS n FROM dataset_examples`
          // t1: a, b, c; t2: x, then y, z, w; t3: g, h.
          assert.strictEqual(newRows!.n, 9)
          const lines = yield* sql<{ task_id: string; lines: number }>`
          SELECT task_id::text, count(DISTINCT lineage_id)::int AS lines FROM datasets GROUP BY task_id`
          const byTask = new Map(lines.map((row) => [row.task_id, row.lines]))
          assert.strictEqual(byTask.get(t1), 1)
          assert.strictEqual(byTask.get(t2), 2)
          const [fixed] = yield* sql<{ example_count: number }>`SELECT example_count FROM datasets WHERE id = ${gapped}`
          assert.strictEqual(fixed!.example_count, 2)
        }).pipe(Effect.provide(Layer.fresh(database())), Effect.provide(NodeServices.layer)),
      120_000
    )
  }
})
