/**
 * What one dataset export may cost: each page statement builds the text of
 * the rows it sends and no others, so a version of large examples exports
 * within the statement timeout and the service keeps serving; the first
 * export's measuring pass runs once for concurrent first exports in any
 * process (a claim in the database) and counts as an open stream from the
 * request's first moment.
 */
import { assert, describe, layer } from "@effect/vitest"
import { Duration, Effect, Exit, Fiber } from "effect"
import crypto from "node:crypto"
import { newId } from "../../../src/platform/Ids.ts"
import { EXPORT_PIECE_BYTES } from "../../../src/tasks/DatasetExport.ts"
import { SvcTest, type TestOrg } from "../../../src/testing.ts"
import { onServerRun } from "../../support/databases.ts"
import { eventually, raw } from "../../support/http.ts"

const schema = {
  type: "object",
  required: ["label"],
  properties: { label: { type: "string" } },
  additionalProperties: false
}

const sha256 = (bytes: Uint8Array) => crypto.createHash("sha256").update(bytes).digest("base64")

/**
 * A version of `count` examples written straight into the tables, `batch`
 * rows per statement: input `{n, ones}` where `ones` is an array of
 * `elements` ones (three bytes of text each, cheap to store, costly to
 * print), made once and copied.
 */
const largeVersion = (org: TestOrg, count: number, elements: number, batch: number) =>
  Effect.gen(function*() {
    const svc = yield* SvcTest
    const task = yield* org.client.tasks.create({ payload: { name: "large", answer_schema: schema } })
    const { datasets } = yield* org.client.datasets.listForTask({ params: { task_id: task.id }, query: {} })
    const first = datasets[0]!.id
    const id = newId()
    yield* svc.sql`
      INSERT INTO datasets (id, org_id, task_id, version, example_count, lineage_id)
      VALUES (${id}, ${org.orgId}, ${task.id}, 2, ${count}, ${first})`
    // Written without the statement timeout the export is held to (the
    // server's; the embedded watchdog has no such switch, hence the batches).
    yield* svc.sql.withTransaction(Effect.gen(function*() {
      yield* svc.sql`SET LOCAL statement_timeout = 0`
      yield* svc.sql`
        INSERT INTO dataset_examples (lineage_id, position, dataset_id, input, answer, feedback_id)
        SELECT ${first}, 0, ${id}, jsonb_build_object('n', 0, 'ones', jsonb_agg(1)), '{"label": "l0"}'::jsonb, md5('0')::uuid
        FROM generate_series(1, ${elements})`
      for (let from = 1; from < count; from += batch) {
        yield* svc.sql`
          INSERT INTO dataset_examples (lineage_id, position, dataset_id, input, answer, feedback_id)
          SELECT ${first}, g, ${id}, jsonb_set(e.input, '{n}', to_jsonb(g)), jsonb_build_object('label', 'l' || g),
                 CASE WHEN g % 2 = 0 THEN md5(g::text)::uuid END
          FROM dataset_examples e, generate_series(${from}, ${Math.min(count, from + batch) - 1}) g
          WHERE e.lineage_id = ${first} AND e.position = 0`
      }
    }))
    return id
  })

/** The task of a dataset version. */
const taskOf = (datasetId: string) =>
  Effect.flatMap(
    SvcTest,
    (svc) =>
      Effect.map(svc.sql<{ task_id: string }>`SELECT task_id FROM datasets WHERE id = ${datasetId}`, (rows) =>
        rows[0]!.task_id)
  )

const exportUrl = (baseUrl: string, datasetId: string) => `${baseUrl}/v1/datasets/${datasetId}/export`

/** The export's status, headers and bytes, read whole. */
const download = (org: TestOrg, datasetId: string) =>
  Effect.flatMap(SvcTest, (svc) =>
    Effect.promise(async () => {
      const response = await fetch(exportUrl(svc.baseUrl, datasetId), {
        headers: { authorization: `Bearer ${org.key}` }
      })
      return { status: response.status, headers: response.headers, bytes: new Uint8Array(await response.arrayBuffer()) }
    }))

// Short enough that building the text of a page's 500 candidate rows of
// the large version below (86 MiB) takes several times longer on either
// database; long enough for a page of 1 MiB on a busy machine. The
// embedded database prints several times slower than the server, and on
// two slow cores busy with other files a page of it once took over 2 s
// (its first export, every page read twice, took 45 s).
const STATEMENT_TIMEOUT = onServerRun ? Duration.seconds(1) : Duration.seconds(4)

layer(SvcTest.layer({ config: { dbStatementTimeout: STATEMENT_TIMEOUT, maxStreamsPerOrg: 1 } }), {
  excludeTestServices: true
})(
  "dataset export bounds",
  (it) => {
    describe("a page reads the lines of the rows it sends, no others", () => {
      it.effect(
        "a version of 500 examples of about 200 KB each exports whole with SVC_DB_STATEMENT_TIMEOUT at 1 s (server) or 4 s (embedded), and the service keeps answering",
        () =>
          Effect.gen(function*() {
            const svc = yield* SvcTest
            const org = yield* SvcTest.org()
            const elements = svc.database === "server" ? 70_000 : 60_000
            let started = performance.now()
            const datasetId = yield* largeVersion(org, 500, elements, svc.database === "server" ? 100 : 4)
            const written = performance.now() - started
            // The first export reads every page twice: to measure the version, then to send it.
            started = performance.now()
            const got = yield* download(org, datasetId)
            console.log(
              `500 large examples on ${svc.database}: written in ${written.toFixed(0)} ms, ` +
                `first export of ${(got.bytes.byteLength / 2 ** 20).toFixed(1)} MiB in ${
                  (performance.now() - started).toFixed(0)
                } ms`
            )
            assert.strictEqual(got.status, 200)
            assert.strictEqual(got.headers.get("repr-digest"), `sha-256=:${sha256(got.bytes)}:`)
            assert.strictEqual(got.headers.get("content-length"), String(got.bytes.byteLength))
            assert.strictEqual(new TextDecoder().decode(got.bytes).split("\n").length - 1, 500)
            const health = yield* raw(`${svc.baseUrl}/health`)
            assert.strictEqual(health.status, 200)
            const { datasets } = yield* org.client.datasets.listForTask({
              params: { task_id: yield* taskOf(datasetId) },
              query: {}
            })
            assert.deepStrictEqual(datasets.map((d) => d.example_count), [0, 500])
          }),
        { timeout: 180_000 }
      )

      it.effect("the stored length of each example's line is the length of the line the export sends", () =>
        Effect.gen(function*() {
          const svc = yield* SvcTest
          const org = yield* SvcTest.org()
          const datasetId = yield* largeVersion(org, 6, 3, 6)
          yield* svc.sql`
            UPDATE dataset_examples SET input = '{"text": "é ☃ 𝄞 \\"quoted\\"\\n", "n": 1.50, "deep": [{"a": null}, true]}'::jsonb
            WHERE dataset_id = ${datasetId} AND position = 1`
          const rows = yield* svc.sql<{ stored: number; built: number }>`
            SELECT line_bytes AS stored,
                   octet_length(jsonb_build_object('input', input, 'answer', answer, 'feedback_id', feedback_id)::text) AS built
            FROM dataset_examples WHERE dataset_id = ${datasetId} ORDER BY position`
          assert.strictEqual(rows.length, 6)
          for (const row of rows) assert.strictEqual(Number(row.stored), Number(row.built))
          const got = yield* download(org, datasetId)
          const lines = new TextDecoder().decode(got.bytes).split("\n").slice(0, -1)
          assert.deepStrictEqual(lines.map((line) => Buffer.byteLength(line)), rows.map((row) => Number(row.built)))
        }))

      it.effect("each example's stored line is PostgreSQL's text of the example, as the export sends it, long lines whole", () =>
        Effect.gen(function*() {
          const svc = yield* SvcTest
          const org = yield* SvcTest.org()
          // Lines of about 300 KB, longer than a piece (EXPORT_PIECE_BYTES), around a short one.
          const datasetId = yield* largeVersion(org, 4, 100_000, 4)
          yield* svc.sql`
            UPDATE dataset_examples SET input = '{"text": "é ☃ 𝄞 \\"quoted\\"\\n", "n": 1.50, "deep": [{"a": null}, true]}'::jsonb,
              feedback_id = NULL
            WHERE dataset_id = ${datasetId} AND position = 1`
          const rows = yield* svc.sql<{ line: string; built: string }>`
            SELECT line, jsonb_build_object('input', input, 'answer', answer, 'feedback_id', feedback_id)::text AS built
            FROM dataset_examples WHERE dataset_id = ${datasetId} ORDER BY position`
          assert.strictEqual(rows.length, 4)
          assert.deepStrictEqual(rows.map((row) => row.line), rows.map((row) => row.built))
          assert.include(rows[1]!.line, "\"feedback_id\": null")
          assert.include(rows[0]!.line, "\"feedback_id\": \"")
          assert.isAbove(Buffer.byteLength(rows[0]!.line), EXPORT_PIECE_BYTES)
          assert.isBelow(Buffer.byteLength(rows[1]!.line), EXPORT_PIECE_BYTES)
          const got = yield* download(org, datasetId)
          assert.strictEqual(new TextDecoder().decode(got.bytes), rows.map((row) => `${row.built}\n`).join(""))
        }))
    })

    describe("the first export measures the version once, across processes", () => {
      it.effect(
        "a first export of a version another process is measuring holds its stream from the first moment (a second answers 429) and sends the digest that process stores",
        () =>
          Effect.gen(function*() {
            const svc = yield* SvcTest
            const org = yield* SvcTest.org()
            const datasetId = yield* largeVersion(org, 3, 3, 3)
            // Another process claims the version, as a first export does.
            yield* svc.sql`UPDATE datasets SET export_claim_until = now() + interval '1 minute' WHERE id = ${datasetId}`
            let waiting = yield* Effect.forkChild(download(org, datasetId))
            // The probe, an export of no version, holds the organization's one
            // stream for an instant when admitted: should the waiting export
            // arrive in that instant and be refused, it is sent again.
            const refused = yield* eventually(
              Effect.gen(function*() {
                const early = waiting.pollUnsafe()
                if (early !== undefined) {
                  assert.isTrue(
                    Exit.isSuccess(early) && early.value.status === 429,
                    "only a refused export ends before the claim does"
                  )
                  waiting = yield* Effect.forkChild(download(org, datasetId))
                  return undefined
                }
                const answer = yield* raw(exportUrl(svc.baseUrl, newId()), {
                  headers: { authorization: `Bearer ${org.key}` }
                })
                return answer.status === 429 ? answer : undefined
              }),
              { what: "a second export refused while the first waits" }
            )
            assert.include(refused.json, { code: "TOO_MANY_STREAMS", limit: "SVC_MAX_STREAMS_PER_ORG", limit_value: 1 })
            // That process stores what it measured; the waiting export sends it.
            const theirs = sha256(new TextEncoder().encode("measured elsewhere"))
            yield* svc.sql`
              UPDATE datasets SET export_sha256 = ${theirs}, export_claim_until = NULL,
                export_bytes = (SELECT sum(line_bytes + 1) FROM dataset_examples WHERE dataset_id = ${datasetId})
              WHERE id = ${datasetId}`
            const got = yield* Fiber.join(waiting)
            assert.strictEqual(got.status, 200)
            assert.strictEqual(got.headers.get("repr-digest"), `sha-256=:${theirs}:`)
            // Its stream ended with its response: the next export is admitted.
            assert.strictEqual(
              (yield* raw(exportUrl(svc.baseUrl, datasetId), { headers: { authorization: `Bearer ${org.key}` } }))
                .status,
              200
            )
          }),
        { timeout: 60_000 }
      )

      it.effect(
        "a claim that lapses (its process stopped) is taken over: the waiting export measures the version itself",
        () =>
          Effect.gen(function*() {
            const svc = yield* SvcTest
            const org = yield* SvcTest.org()
            const datasetId = yield* largeVersion(org, 3, 3, 3)
            yield* svc.sql`UPDATE datasets SET export_claim_until = now() + interval '1 second' WHERE id = ${datasetId}`
            const got = yield* download(org, datasetId)
            assert.strictEqual(got.status, 200)
            assert.strictEqual(got.headers.get("repr-digest"), `sha-256=:${sha256(got.bytes)}:`)
            const [stored] = yield* svc.sql<{ export_sha256: string; claimed: boolean }>`
            SELECT export_sha256, export_claim_until IS NOT NULL AS claimed FROM datasets WHERE id = ${datasetId}`
            assert.strictEqual(stored!.export_sha256, sha256(got.bytes))
            assert.isFalse(stored!.claimed)
          }),
        { timeout: 60_000 }
      )
    })
  }
)
