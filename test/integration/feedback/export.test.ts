/**
 * A dataset version as JSON Lines: one example per line in the version's
 * order, streamed in bounded pages, with the SHA-256 of the whole export
 * sent before the body (`Repr-Digest`), resumable after the last complete
 * line (`after`), refused for another organization's version.
 */
import { assert, describe, layer } from "@effect/vitest"
import { Effect, Stream } from "effect"
import crypto from "node:crypto"
import http from "node:http"
import { newId } from "../../../src/platform/Ids.ts"
import { EXPORT_PAGE_BYTES } from "../../../src/tasks/DatasetExport.ts"
import { SvcTest, type TestOrg } from "../../../src/testing.ts"
import { raw } from "../../support/http.ts"

const schema = {
  type: "object",
  required: ["label"],
  properties: { label: { type: "string" } },
  additionalProperties: false
}

const sha256 = (bytes: Uint8Array) => crypto.createHash("sha256").update(bytes).digest("base64")

/** A task whose second version holds `count` staged corrections (inputs `{n: i}`). */
const promotedVersion = (org: TestOrg, count: number) =>
  Effect.gen(function*() {
    const task = yield* org.client.tasks.create({ payload: { name: "tickets", answer_schema: schema } })
    for (let i = 0; i < count; i++) {
      const run = yield* org.client.tasks.logRun({
        params: { task_id: task.id },
        payload: { input: { n: i }, answer: { label: "wrong" } }
      })
      const item = yield* org.client.feedback.submit({
        payload: { inference_log_id: run.trace_id, score: -1, correction: { label: `right-${i}` } }
      })
      yield* org.client.feedback.stage({ params: { feedback_id: item.id } })
    }
    const preview = yield* org.client.feedback.promotePreview({ params: { task_id: task.id }, query: {} })
    const promoted = yield* org.client.feedback.promote({
      params: { task_id: task.id },
      payload: {
        base_dataset_id: preview.base_dataset_id,
        expected_feedback_revision: preview.expected_feedback_revision
      }
    })
    return { taskId: task.id, datasetId: promoted.dataset_id }
  })

/**
 * A version of `count` examples written straight into the tables (a promote
 * of that many would take minutes): input `{n, text}` with `text` of
 * `textBytes` characters, every third from a correction.
 */
const bulkVersion = (org: TestOrg, count: number, textBytes: number) =>
  Effect.gen(function*() {
    const svc = yield* SvcTest
    const task = yield* org.client.tasks.create({ payload: { name: "bulk", answer_schema: schema } })
    const { datasets } = yield* org.client.datasets.listForTask({ params: { task_id: task.id }, query: {} })
    const first = datasets[0]!.id
    const id = newId()
    yield* svc.sql`
      INSERT INTO datasets (id, org_id, task_id, version, example_count, lineage_id)
      VALUES (${id}, ${org.orgId}, ${task.id}, 2, ${count}, ${first})`
    yield* svc.sql`
      INSERT INTO dataset_examples (lineage_id, position, dataset_id, input, answer, feedback_id)
      SELECT ${first}, g, ${id}, jsonb_build_object('n', g, 'text', repeat('x', ${textBytes})),
             jsonb_build_object('label', 'l' || g, 'score', 12345678901234567890.5),
             CASE WHEN g % 3 = 0 THEN md5(g::text)::uuid END
      FROM generate_series(0, ${count - 1}) g`
    return id
  })

const exportPath = (datasetId: string, after?: number) =>
  `/v1/datasets/${datasetId}/export${after === undefined ? "" : `?after=${after}`}`

/** The export's bytes and headers, read whole. */
const download = (org: TestOrg, datasetId: string, after?: number) =>
  Effect.flatMap(SvcTest, (svc) =>
    Effect.promise(async () => {
      const response = await fetch(`${svc.baseUrl}${exportPath(datasetId, after)}`, {
        headers: { authorization: `Bearer ${org.key}` }
      })
      return { status: response.status, headers: response.headers, bytes: new Uint8Array(await response.arrayBuffer()) }
    }))

/** The first `limit` bytes of an export, then the connection is dropped: a download cut short. */
const cutShort = (org: TestOrg, datasetId: string, limit: number) =>
  Effect.flatMap(SvcTest, (svc) =>
    Effect.promise(() =>
      new Promise<Buffer>((resolve, reject) => {
        const chunks: Array<Buffer> = []
        let received = 0
        const request = http.get(`${svc.baseUrl}${exportPath(datasetId)}`, {
          headers: { authorization: `Bearer ${org.key}` }
        }, (response) => {
          response.on("data", (chunk: Buffer) => {
            chunks.push(chunk)
            received += chunk.length
            if (received >= limit) {
              request.destroy()
              resolve(Buffer.concat(chunks).subarray(0, limit))
            }
          })
          response.on("end", () => reject(new Error("the export ended before the cut")))
        })
        request.on("error", (error) => received >= limit ? undefined : reject(error))
      })
    ))

const decodeLines = (bytes: Uint8Array) => {
  const text = new TextDecoder().decode(bytes)
  assert.isTrue(text === "" || text.endsWith("\n"), "every line ends with \\n")
  return text === "" ? [] : text.slice(0, -1).split("\n").map((line) => JSON.parse(line))
}

/** The export of `path` read by a client that pauses after its first chunk until `resume` is called. */
const pausedDownload = (url: string, key: string) => {
  let paused!: () => void
  const pausedOnce = new Promise<void>((resolve) => (paused = resolve))
  let resume!: () => void
  const outcome = new Promise<{ readonly text: string; readonly clean: boolean }>((resolve, reject) => {
    const chunks: Array<Buffer> = []
    const request = http.get(url, { headers: { authorization: `Bearer ${key}` } }, (response) => {
      response.once("data", () => {
        response.pause()
        resume = () => response.resume()
        paused()
      })
      response.on("data", (chunk: Buffer) => chunks.push(chunk))
      const text = () => Buffer.concat(chunks).toString("utf8")
      response.on("end", () => resolve({ text: text(), clean: response.complete }))
      response.on("aborted", () => resolve({ text: text(), clean: false }))
      response.on("error", () => resolve({ text: text(), clean: false }))
    })
    request.on("error", reject)
  })
  return { pausedOnce, resume: () => resume(), outcome }
}

const RECHECK_MS = 100

layer(SvcTest.layer({ config: { streamAuthRecheckMs: RECHECK_MS } }), { excludeTestServices: true })(
  "dataset export",
  (it) => {
    describe("one example per line, in the version's order", () => {
      it.effect("the lines are the version's examples with input, answer and feedback_id, as application/jsonl with its size and line count", () =>
        Effect.gen(function*() {
          const org = yield* SvcTest.org()
          const { datasetId } = yield* promotedVersion(org, 3)
          const version = yield* org.client.datasets.get({ params: { dataset_id: datasetId }, query: {} })
          const got = yield* download(org, datasetId)
          assert.strictEqual(got.status, 200)
          assert.strictEqual(got.headers.get("content-type"), "application/jsonl")
          assert.strictEqual(got.headers.get("content-length"), String(got.bytes.byteLength))
          assert.strictEqual(got.headers.get("x-svc-example-count"), "3")
          const lines = decodeLines(got.bytes)
          assert.deepStrictEqual(
            lines,
            version.examples.map((e) => ({ input: e.input, answer: e.answer, feedback_id: e.feedback_id ?? null }))
          )
          assert.deepStrictEqual(lines.map((line) => line.input), [{ n: 0 }, { n: 1 }, { n: 2 }])
          assert.deepStrictEqual(Object.keys(lines[0]), ["input", "answer", "feedback_id"])
          assert.isString(lines[0].feedback_id)
        }))

      it.effect("an example that did not come from a correction has feedback_id null; numbers come out as stored; an empty version is an empty body", () =>
        Effect.gen(function*() {
          const org = yield* SvcTest.org()
          const datasetId = yield* bulkVersion(org, 4, 3)
          const lines = decodeLines((yield* download(org, datasetId)).bytes)
          assert.deepStrictEqual(lines.map((line) => line.feedback_id === null), [false, true, true, false])
          const text = new TextDecoder().decode((yield* download(org, datasetId)).bytes)
          assert.include(text, "12345678901234567890.5")

          const task = yield* org.client.tasks.create({ payload: { name: "empty", answer_schema: schema } })
          const { datasets } = yield* org.client.datasets.listForTask({ params: { task_id: task.id }, query: {} })
          const empty = yield* download(org, datasets[0]!.id)
          assert.strictEqual(empty.status, 200)
          assert.strictEqual(empty.bytes.byteLength, 0)
          assert.strictEqual(empty.headers.get("repr-digest"), `sha-256=:${sha256(new Uint8Array())}:`)
        }))

      it.effect("the typed client yields the lines as values and the headers decoded", () =>
        Effect.gen(function*() {
          const org = yield* SvcTest.org()
          const { datasetId } = yield* promotedVersion(org, 2)
          const answer = yield* org.client.datasets.export({ params: { dataset_id: datasetId }, query: {} })
          const lines = yield* Stream.runCollect(answer.body)
          assert.deepStrictEqual(lines.map((line) => line.answer), [{ label: "right-0" }, { label: "right-1" }])
          assert.strictEqual(answer.headers["x-svc-example-count"], 2)
          assert.match(answer.headers["repr-digest"], /^sha-256=:[A-Za-z0-9+/]{43}=:$/)
        }))
    })

    describe("Repr-Digest is the SHA-256 of the whole export", () => {
      it.effect("the header matches the bytes received, is computed once and stored with the version, and every export sends the same bytes", () =>
        Effect.gen(function*() {
          const svc = yield* SvcTest
          const org = yield* SvcTest.org()
          const datasetId = yield* bulkVersion(org, 1200, 900)
          const stored = () =>
            svc.sql<{ export_sha256: string | null }>`SELECT export_sha256 FROM datasets WHERE id = ${datasetId}`
          assert.isNull((yield* stored())[0]!.export_sha256)
          const first = yield* download(org, datasetId)
          assert.isAbove(first.bytes.byteLength, EXPORT_PAGE_BYTES, "more than one page of bytes")
          assert.strictEqual(first.headers.get("repr-digest"), `sha-256=:${sha256(first.bytes)}:`)
          assert.strictEqual((yield* stored())[0]!.export_sha256, sha256(first.bytes))
          const second = yield* download(org, datasetId)
          assert.strictEqual(second.headers.get("repr-digest"), first.headers.get("repr-digest"))
          assert.deepStrictEqual(second.bytes, first.bytes)
          assert.strictEqual(decodeLines(first.bytes).length, 1200)
        }))
    })

    describe("a download cut short resumes after its last complete line", () => {
      it.effect("the first part up to its last newline and the export from after=<lines received> join into exactly the whole export", () =>
        Effect.gen(function*() {
          const org = yield* SvcTest.org()
          const datasetId = yield* bulkVersion(org, 2000, 500)
          const whole = yield* download(org, datasetId)
          const partial = yield* cutShort(org, datasetId, Math.floor(whole.bytes.byteLength * 0.37))
          const kept = partial.subarray(0, partial.lastIndexOf(0x0a) + 1)
          const received = kept.toString("utf8").split("\n").length - 1
          assert.isAbove(received, 0)
          assert.isBelow(kept.length, partial.length, "the cut fell inside a line")
          const rest = yield* download(org, datasetId, received)
          assert.strictEqual(rest.status, 200)
          assert.isNull(rest.headers.get("content-length"))
          assert.strictEqual(
            rest.headers.get("repr-digest"),
            whole.headers.get("repr-digest"),
            "the digest covers the whole export"
          )
          const joined = Buffer.concat([kept, rest.bytes])
          assert.isTrue(joined.equals(Buffer.from(whole.bytes)))
          assert.strictEqual(rest.headers.get("repr-digest"), `sha-256=:${sha256(joined)}:`)
          assert.strictEqual(decodeLines(rest.bytes)[0].input.n, received)
          const end = yield* download(org, datasetId, 2000)
          assert.strictEqual(end.status, 200)
          assert.strictEqual(end.bytes.byteLength, 0)
        }))

      it.effect("after past the last line, negative or not a number: 400 naming after", () =>
        Effect.gen(function*() {
          const svc = yield* SvcTest
          const org = yield* SvcTest.org()
          const { datasetId } = yield* promotedVersion(org, 1)
          for (const after of ["2", "-1", "one", "1.5"]) {
            const answer = yield* raw(`${svc.baseUrl}/v1/datasets/${datasetId}/export?after=${after}`, {
              headers: { authorization: `Bearer ${org.key}` }
            })
            assert.strictEqual(answer.status, 400, after)
            assert.strictEqual(answer.json.code, "INVALID_REQUEST")
            assert.strictEqual(answer.json.field, "after", after)
          }
        }))
    })

    describe("another organization's version is answered as a missing one", () => {
      it.effect("404 NOT_FOUND for another organization's version and for an unknown id; 403 without datasets.read", () =>
        Effect.gen(function*() {
          const svc = yield* SvcTest
          const org = yield* SvcTest.org()
          const other = yield* SvcTest.org()
          const { datasetId } = yield* promotedVersion(org, 1)
          for (const [who, id] of [[other, datasetId], [org, newId()]] as const) {
            const answer = yield* raw(`${svc.baseUrl}${exportPath(id)}`, {
              headers: { authorization: `Bearer ${who.key}` }
            })
            assert.strictEqual(answer.status, 404)
            assert.strictEqual(answer.json.code, "NOT_FOUND")
          }
          const error = yield* Effect.flip(
            other.client.datasets.export({ params: { dataset_id: datasetId }, query: {} })
          )
          assert.strictEqual(error._tag, "NotFound")
          const narrow = yield* org.newKey(["tasks.read"])
          const refused = yield* raw(`${svc.baseUrl}${exportPath(datasetId)}`, {
            headers: { authorization: `Bearer ${narrow.key}` }
          })
          assert.strictEqual(refused.status, 403)
          assert.strictEqual(refused.json.required_scope, "datasets.read")
        }))
    })

    describe("an export that cannot finish is cut, never ended cleanly", () => {
      it.effect(
        "revoking the key mid-export cuts the download before its last line, also a resumed one, which has no Content-Length",
        () =>
          Effect.gen(function*() {
            const svc = yield* SvcTest
            const org = yield* SvcTest.org()
            const COUNT = 10_000
            const datasetId = yield* bulkVersion(org, COUNT, 4000)
            const key = yield* org.newKey(["datasets.read"])
            const { pausedOnce, resume, outcome } = pausedDownload(`${svc.baseUrl}${exportPath(datasetId, 1)}`, key.key)
            yield* Effect.promise(() => pausedOnce)
            yield* key.revoke
            resume()
            const got = yield* Effect.promise(() => outcome)
            assert.isFalse(got.clean)
            assert.isBelow(got.text.split("\n").length - 1, COUNT - 1)
          }),
        { timeout: 120_000 }
      )
    })

    describe("the version is read as it is sent, in bounded pages", () => {
      it.effect(
        "while the client reads nothing the server reads no further: rows of a 10 000-example version removed meanwhile from line 5 000 on are never sent, and the download is cut, not ended cleanly",
        () =>
          Effect.gen(function*() {
            const svc = yield* SvcTest
            const org = yield* SvcTest.org()
            const COUNT = 10_000
            const CUT = 5_000
            const datasetId = yield* bulkVersion(org, COUNT, 4000)
            // The first export measures the version; time the second, a plain one.
            const size = (yield* download(org, datasetId)).bytes.byteLength
            const started = performance.now()
            assert.strictEqual((yield* download(org, datasetId)).bytes.byteLength, size)
            const ms = performance.now() - started
            console.log(
              `export of ${COUNT} examples (${(size / 2 ** 20).toFixed(1)} MiB) on ${svc.database}: ${
                ms.toFixed(0)
              } ms, ` +
                `${(COUNT / (ms / 1000)).toFixed(0)} lines/s, ${(size / 2 ** 20 / (ms / 1000)).toFixed(1)} MiB/s`
            )

            const { pausedOnce, resume, outcome } = pausedDownload(`${svc.baseUrl}${exportPath(datasetId)}`, org.key)
            yield* Effect.promise(() => pausedOnce)
            // Line 5 000 is about 20 MiB past the first chunk: beyond any socket buffer.
            yield* svc.sql`DELETE FROM dataset_examples WHERE dataset_id = ${datasetId} AND position >= ${CUT}`
            resume()
            const got = yield* Effect.promise(() => outcome)
            assert.isFalse(got.clean, "a version missing rows is never a clean end")
            const lines = got.text.split("\n").length - 1
            assert.isAtMost(lines, CUT)
            assert.isAbove(lines, 0)
          }),
        { timeout: 120_000 }
      )
    })
  }
)
