import { assert, describe, layer } from "@effect/vitest"
import { Duration, Effect, Layer } from "effect"
import { constants as zlib, gzipSync } from "node:zlib"
import type { TelemetryCompression, TelemetryProtocol } from "../../../src/api/Telemetry.ts"
import { protobufFromJsonBody } from "../../../src/otlp/Protobuf.ts"
import { MEMORY_SENDS } from "../../../src/telemetry/export/MemorySender.ts"
import { SvcTest, type TestOrg } from "../../../src/testing.ts"
import { eventually, raw } from "../../support/http.ts"
import { HttpsReceiver, type ReceivedRequest, Reply } from "../../support/HttpsReceiver.ts"
import {
  canonical,
  type DecodedSpan,
  decodeOtlp,
  ExportTraceServiceResponse,
  protobufToJson
} from "../../support/Otlp.ts"
import { waitForDeliveries } from "../../support/telemetry.ts"
import { loopbackTargets, TestTls } from "../../support/tls.ts"

/**
 * Flush rounds every 200 ms instead of 2 s, three retries after 100 to
 * 400 ms instead of four after 1 to 8 s, an export request ended after 1 s
 * instead of 10: a test waits for its spans, retries and hanging collectors
 * a tenth as long.
 */
const RETRY_SCHEDULE = [100, 200, 400].map(Duration.millis)
const Svc = Layer.unwrap(Effect.map(TestTls.shared, (tls) =>
  SvcTest.layer({
    config: {
      ...loopbackTargets(tls),
      telemetryFlushInterval: Duration.millis(200),
      telemetryRetrySchedule: RETRY_SCHEDULE,
      telemetryExportTimeout: Duration.seconds(1)
    }
  })))
/**
 * A period of 10 s (the default is 2 s) for the bursts: a burst fills
 * batches of 512 before a period round cuts it, however slowly its requests
 * come on a machine busy with other tests (512 spans in 2 s needs about 260
 * requests a second, which a loaded two-core machine does not always give).
 * An export request ends after 60 s (the default is 10 s): a collector that
 * holds its answers until every send slot is taken holds the first batch
 * for as long as the next three take to fill, which on a loaded machine
 * was once longer than 10 s (the first batches then timed out and were
 * stored and retried, each recorded on its own).
 */
const SvcLongFlush = Layer.unwrap(Effect.map(TestTls.shared, (tls) =>
  SvcTest.layer({
    config: {
      ...loopbackTargets(tls),
      telemetryFlushInterval: Duration.seconds(10),
      telemetryExportTimeout: Duration.seconds(60)
    }
  })))

const schema = { type: "object" }

/** An organization with a destination on a fresh collector. */
const withCollector = (
  respond?: (request: ReceivedRequest) => Reply,
  headers?: Record<string, string>,
  settings: { readonly protocol?: TelemetryProtocol; readonly compression?: TelemetryCompression } = {}
) =>
  Effect.gen(function*() {
    const org = yield* SvcTest.org()
    const collector = yield* HttpsReceiver.make(respond === undefined ? {} : { respond })
    const url = collector.url("/v1/traces")
    const { id } = yield* org.client.telemetry.create({
      payload: { url, ...(headers === undefined ? {} : { headers }), ...settings }
    })
    return { org, collector, id }
  })

/** A protobuf `ExportTraceServiceResponse`, written with the official definitions. */
const protobufAnswer = (partialSuccess: object): Reply =>
  Reply.status(200, {
    headers: { "content-type": "application/x-protobuf" },
    body: ExportTraceServiceResponse.encode(ExportTraceServiceResponse.fromObject({ partialSuccess })).finish()
  })

const FORMS = [
  { protocol: "http/json", compression: "none", contentType: "application/json" },
  { protocol: "http/json", compression: "gzip", contentType: "application/json" },
  { protocol: "http/protobuf", compression: "none", contentType: "application/x-protobuf" },
  { protocol: "http/protobuf", compression: "gzip", contentType: "application/x-protobuf" }
] as const

const spansOf = (requests: ReadonlyArray<ReceivedRequest>): ReadonlyArray<DecodedSpan> =>
  requests.flatMap((request) => decodeOtlp(request).spans)

const spanIds = (request: ReceivedRequest) => decodeOtlp(request).spans.map((s) => s.spanId).sort().join(",")

/** Some API traffic of the organization. */
const traffic = (org: TestOrg) => Effect.asVoid(org.client.tasks.list({ query: {} }))

const destination = (org: TestOrg) => Effect.map(org.client.telemetry.list(), (list) => list.destinations[0]!)

layer(Svc, { excludeTestServices: true })("telemetry export", (it) => {
  describe("what is exported", () => {
    it.effect("each API request as a server span with semantic-convention and svc.* attributes, never secrets or payloads", () =>
      Effect.gen(function*() {
        const svc = yield* SvcTest
        const { org, collector } = yield* withCollector()
        const task = yield* org.client.tasks.create({ payload: { name: "secret-task-name", answer_schema: schema } })
        yield* org.client.tasks.logRun({
          params: { task_id: task.id },
          payload: { input: { q: "payload-input-text" }, answer: { a: "payload-answer-text" } }
        })
        yield* org.client.tasks.get({ params: { task_id: "01900000-0000-7000-8000-00000000dead" } }).pipe(Effect.flip)
        yield* collector.waitFor(
          (r) => decodeOtlp(r).spans.some((s) => s.kind === 2 && s.attributes["http.response.status_code"] === 404),
          "20 seconds"
        )
        const requests = collector.requests()
        for (const request of requests) assert.deepStrictEqual(decodeOtlp(request).problems, [])
        const spans = spansOf(requests)
        const server = spans.filter((s) => s.kind === 2)
        const created = server.find((s) =>
          s.attributes["url.path"] === "/v1/tasks" && s.attributes["http.request.method"] === "POST"
        )!
        assert.isDefined(created)
        assert.strictEqual(created.attributes["http.response.status_code"], 201)
        assert.strictEqual(created.attributes["server.address"], "127.0.0.1")
        assert.strictEqual(created.attributes["svc.org_id"], org.orgId)
        assert.strictEqual(created.attributes["http.route"], "/v1/tasks")
        assert.strictEqual(created.status.code ?? 0, 0)
        const missing = server.find((s) => s.attributes["http.response.status_code"] === 404)!
        assert.isUndefined(missing.attributes["error.type"], "a 4xx is not a server error")
        // Inner spans of the same requests come along, in the same trace.
        const inner = spans.find((s) => s.name === "Tasks.create")!
        assert.strictEqual(inner.traceId, created.traceId)
        const allowed =
          /^(http\.request\.method|http\.response\.status_code|http\.route|url\.path|url\.scheme|server\.address|server\.port|error\.type|gen_ai\.(operation\.name|tool\.name|tool\.call\.id|conversation\.id)|svc\..+)$/
        for (const span of spans) {
          for (const key of Object.keys(span.attributes)) assert.match(key, allowed)
        }
        const everything = requests.map((r) => JSON.stringify(decodeOtlp(r).json)).join("\n")
        for (const secret of ["payload-input-text", "payload-answer-text", "secret-task-name", org.key]) {
          assert.notInclude(everything, secret)
        }
        assert.isFalse(svc.logLines().length === 0)
      }).pipe(Effect.scoped))

    it.effect("a logged run has a span whose trace id is the run's trace_id", () =>
      Effect.gen(function*() {
        const { org, collector } = yield* withCollector()
        const task = yield* org.client.tasks.create({ payload: { name: "t", answer_schema: schema } })
        const run = yield* org.client.tasks.logRun({ params: { task_id: task.id }, payload: { input: 1, answer: {} } })
        const request = yield* collector.waitFor(
          (r) => decodeOtlp(r).spans.some((s) => s.traceId === run.trace_id),
          "20 seconds"
        )
        const span = decodeOtlp(request).spans.find((s) => s.traceId === run.trace_id)!
        assert.strictEqual(span.name, "Tasks.run")
        assert.strictEqual(span.attributes["svc.org_id"], org.orgId)
        assert.strictEqual(span.attributes["svc.task_id"], task.id)
        // The request that logged it (its own trace) links to the run's trace.
        yield* collector.waitFor((r) => decodeOtlp(r).spans.some((s) => s.name === "Tasks.logRun"), "20 seconds")
        const logRun = spansOf(collector.requests()).find((s) => s.name === "Tasks.logRun")!
        assert.notStrictEqual(logRun.traceId, run.trace_id)
        assert.strictEqual(span.links?.[0]?.traceId, logRun.traceId)
        // A log refused (unknown task) is no run: no Tasks.run span for it.
        const missing = "01900000-0000-7000-8000-0000000000aa"
        yield* org.client.tasks.logRun({ params: { task_id: missing }, payload: { input: 1, answer: {} } }).pipe(
          Effect.flip
        )
        const marker = "01900000-0000-7000-8000-0000000000ab"
        yield* org.client.tasks.get({ params: { task_id: marker } }).pipe(Effect.flip)
        yield* collector.waitFor(
          (r) => decodeOtlp(r).spans.some((s) => s.attributes["url.path"] === `/v1/tasks/${marker}`),
          "20 seconds"
        )
        const runs = spansOf(collector.requests()).filter((s) => s.name === "Tasks.run")
        assert.deepStrictEqual(runs.map((s) => s.attributes["svc.task_id"]), [task.id])
      }).pipe(Effect.scoped))

    it.effect("governed steps, approval transitions (background deadlines included) and feedback review reach the collector", () =>
      Effect.gen(function*() {
        const { org, collector } = yield* withCollector()
        yield* org.client.approvalPolicies.put({
          params: { action_class: "quick" },
          payload: { mode: "require_approval", review_seconds: 1, expiring_notice_seconds: 0, timeout_action: "reject" }
        })
        const session = yield* org.client.agentSessions.create({ payload: {} })
        const step = yield* org.client.agentSessions.governStep({
          params: { session_id: session.id },
          payload: {
            step_id: "s1",
            tool: "t",
            action_class: "quick",
            arguments: { secret_arg: "argument-never-exported" }
          }
        })
        const task = yield* org.client.tasks.create({ payload: { name: "t", answer_schema: schema } })
        const run = yield* org.client.tasks.logRun({ params: { task_id: task.id }, payload: { input: 1, answer: {} } })
        const feedback = yield* org.client.feedback.submit({
          payload: { inference_log_id: run.trace_id, score: -1, correction: { fix: "correction-never-exported" } }
        })
        yield* org.client.feedback.stage({ params: { feedback_id: feedback.id } })
        const names = (wanted: string) => (r: ReceivedRequest) => decodeOtlp(r).spans.some((s) => s.name === wanted)
        for (const name of ["AgentSessions.governStep", "Feedback.submit", "Feedback.stage"]) {
          yield* collector.waitFor(names(name), "20 seconds")
        }
        // The expiry fires in a background scheduler, outside any request.
        const expired = yield* collector.waitFor(
          (r) =>
            decodeOtlp(r).spans.some((s) =>
              s.name === "Approvals.fireDeadline" && s.attributes["svc.approval_id"] === step.approval_id
            ),
          "30 seconds"
        )
        const deadline = decodeOtlp(expired).spans.find((s) => s.name === "Approvals.fireDeadline")!
        assert.strictEqual(deadline.attributes["svc.org_id"], org.orgId)
        const everything = collector.requests().map((r) => JSON.stringify(decodeOtlp(r).json)).join("\n")
        assert.notInclude(everything, "argument-never-exported")
        assert.notInclude(everything, "correction-never-exported")
        for (const request of collector.requests()) assert.deepStrictEqual(decodeOtlp(request).problems, [])
      }).pipe(Effect.scoped))

    it.effect("task runs and governed steps carry the GenAI semantic conventions beside svc's own attributes", () =>
      Effect.gen(function*() {
        const { org, collector } = yield* withCollector(undefined, undefined, {
          protocol: "http/protobuf",
          compression: "gzip"
        })
        const task = yield* org.client.tasks.create({ payload: { name: "t", answer_schema: schema } })
        const run = yield* org.client.tasks.logRun({ params: { task_id: task.id }, payload: { input: 1, answer: {} } })
        const session = yield* org.client.agentSessions.create({ payload: {} })
        yield* org.client.agentSessions.governStep({
          params: { session_id: session.id },
          payload: { step_id: "step-7", tool: "web_search", action_class: "read", arguments: { q: "x" } }
        })
        const named = (name: string) => (r: ReceivedRequest) => decodeOtlp(r).spans.some((s) => s.name === name)
        yield* collector.waitFor(named("Tasks.run"), "20 seconds")
        yield* collector.waitFor(named("AgentSessions.governStep"), "20 seconds")
        const spans = spansOf(collector.requests())
        const runSpan = spans.find((s) => s.name === "Tasks.run")!
        assert.deepInclude(runSpan.attributes, {
          "gen_ai.operation.name": "invoke_agent",
          "svc.task_id": task.id,
          "svc.org_id": org.orgId
        })
        assert.strictEqual(runSpan.traceId, run.trace_id)
        const step = spans.find((s) => s.name === "AgentSessions.governStep")!
        assert.deepInclude(step.attributes, {
          "gen_ai.operation.name": "execute_tool",
          "gen_ai.tool.name": "web_search",
          "gen_ai.tool.call.id": "step-7",
          "gen_ai.conversation.id": session.id,
          "svc.session_id": session.id,
          "svc.action_class": "read"
        })
      }).pipe(Effect.scoped))

    it.effect("only the organization's own spans reach its collector", () =>
      Effect.gen(function*() {
        const a = yield* withCollector()
        const b = yield* withCollector()
        const quiet = yield* SvcTest.org()
        for (let i = 0; i < 3; i++) {
          yield* traffic(a.org)
          yield* traffic(b.org)
          yield* traffic(quiet)
        }
        yield* waitForDeliveries(a.org, a.id, (list) => list.some((d) => d.status === "delivered"))
        yield* waitForDeliveries(b.org, b.id, (list) => list.some((d) => d.status === "delivered"))
        yield* a.collector.waitFor(
          (r) => decodeOtlp(r).spans.some((s) => s.attributes["url.path"] === "/v1/tasks"),
          "20 seconds"
        )
        yield* b.collector.waitFor(
          (r) => decodeOtlp(r).spans.some((s) => s.attributes["url.path"] === "/v1/tasks"),
          "20 seconds"
        )
        const orgsOf = (requests: ReadonlyArray<ReceivedRequest>) =>
          new Set(spansOf(requests).map((s) => s.attributes["svc.org_id"]).filter((o) => o !== undefined))
        assert.deepStrictEqual([...orgsOf(a.collector.requests())], [a.org.orgId])
        assert.deepStrictEqual([...orgsOf(b.collector.requests())], [b.org.orgId])
      }).pipe(Effect.scoped))

    it.effect("the export's own work (flush, queue, sending to the collector) is never exported: no feedback loop", () =>
      Effect.gen(function*() {
        const { org, collector, id } = yield* withCollector()
        yield* traffic(org)
        yield* waitForDeliveries(org, id, (list) => list.some((d) => d.status === "delivered"))
        // Captured after a batch was sent: anything that send produced was
        // buffered before this marker, and buffers are first in, first out.
        const marker = "01900000-0000-7000-8000-0000000100b0"
        yield* org.client.tasks.get({ params: { task_id: marker } }).pipe(Effect.flip)
        yield* collector.waitFor(
          (r) => decodeOtlp(r).spans.some((s) => s.attributes["url.path"] === `/v1/tasks/${marker}`),
          "20 seconds"
        )
        const names = new Set(spansOf(collector.requests()).map((s) => s.name))
        for (const name of names) {
          assert.notMatch(
            name,
            /^(TelemetryCollector\.|OutboundHttp\.send|DeliveryQueue\.(claim|settle|enqueue))/,
            name
          )
        }
      }).pipe(Effect.scoped))
  })

  describe("each destination's protocol and compression", () => {
    it.effect("json or protobuf, plain or gzipped: the official definitions read the same spans from each (ids and times aside)", () =>
      Effect.gen(function*() {
        const marker = "01900000-0000-7000-8000-0000000f0e4d"
        const collectors = yield* Effect.forEach(
          FORMS,
          (form) =>
            Effect.map(
              withCollector(undefined, undefined, { protocol: form.protocol, compression: form.compression }),
              (c) => ({ ...c, form })
            )
        )
        for (const { org } of collectors) {
          for (let i = 0; i < 5; i++) yield* traffic(org)
          yield* org.client.tasks.get({ params: { task_id: marker } }).pipe(Effect.flip)
        }
        const sameness = (span: DecodedSpan) => ({
          name: span.name,
          kind: span.kind,
          status: span.status.code ?? 0,
          attributes: Object.fromEntries(
            Object.entries(span.attributes).filter(([key]) =>
              !["svc.org_id", "svc.key_id", "server.port"].includes(key)
            )
          )
        })
        const views = []
        for (const { collector, form, org } of collectors) {
          const request = yield* collector.waitFor(
            (r) => decodeOtlp(r).spans.some((s) => s.attributes["url.path"] === `/v1/tasks/${marker}`),
            "20 seconds"
          )
          assert.strictEqual(request.method, "POST")
          assert.strictEqual(request.path, "/v1/traces")
          assert.strictEqual(request.headers["content-type"], form.contentType)
          assert.strictEqual(request.headers["content-encoding"], form.compression === "gzip" ? "gzip" : undefined)
          const decoded = decodeOtlp(request)
          assert.deepStrictEqual(decoded.problems, [])
          assert.strictEqual(decoded.resource["service.name"], "svc")
          assert.deepStrictEqual(decoded.json.resourceSpans[0].scopeSpans[0].scope.name, "svc")
          const span = decoded.spans.find((s) => s.attributes["url.path"] === `/v1/tasks/${marker}`)!
          assert.match(span.traceId, /^[0-9a-f]{32}$/)
          assert.match(span.spanId, /^[0-9a-f]{16}$/)
          assert.strictEqual(span.attributes["svc.org_id"], org.orgId)
          assert.isString(span.startTimeUnixNano)
          // Unix nanoseconds of now (within a minute): 64-bit integers survive both encodings.
          assert.isBelow(Math.abs(Number(BigInt(span.startTimeUnixNano) / 1_000_000n) - Date.now()), 60_000)
          assert.isTrue(BigInt(span.endTimeUnixNano) >= BigInt(span.startTimeUnixNano))
          views.push(JSON.stringify(sameness(span)))
        }
        assert.strictEqual(new Set(views).size, 1, views.join("\n"))
      }).pipe(Effect.scoped))

    it.effect("a protobuf answer's partial_success is read: rejected spans make the batch partial, never retried", () =>
      Effect.gen(function*() {
        const { org, collector, id } = yield* withCollector(
          () => protobufAnswer({ rejectedSpans: 2, errorMessage: "spans too old" }),
          undefined,
          { protocol: "http/protobuf", compression: "gzip" }
        )
        yield* traffic(org)
        const { deliveries } = yield* waitForDeliveries(org, id, (list) => list.some((d) => d.status === "partial"))
        const partial = deliveries.find((d) => d.status === "partial")!
        assert.strictEqual(partial.rejected_spans, 2)
        assert.include(partial.last_error ?? "", "spans too old")
        const ids = collector.requests().map(spanIds)
        assert.strictEqual(new Set(ids).size, ids.length, "never retried")
      }).pipe(Effect.scoped))
  })

  describe("batches are sent from memory first; only failures are stored", () => {
    it.effect("a batch the collector takes is sent straight from memory: delivered after one attempt, its payload never stored", () =>
      Effect.gen(function*() {
        const svc = yield* SvcTest
        const { org, collector, id } = yield* withCollector()
        yield* traffic(org)
        const { deliveries } = yield* waitForDeliveries(org, id, (list) => list.some((d) => d.status === "delivered"))
        const delivered = deliveries.find((d) => d.status === "delivered")!
        assert.strictEqual(delivered.attempts, 1)
        assert.isAbove(delivered.span_count, 0)
        assert.isAbove(collector.requests().length, 0)
        // Not a queued row whose payload was pruned later: none was stored,
        // and the queue (which records every attempt it settles) never sent it.
        const [row] = yield* svc.sql<{ payload: string | null; attempts: number }>`
          SELECT d.payload, (SELECT count(*)::int FROM delivery_attempts a WHERE a.delivery_id = d.id) AS attempts
          FROM deliveries d WHERE d.id = ${delivered.id}
        `
        assert.isNull(row!.payload)
        assert.strictEqual(row!.attempts, 0)
      }).pipe(Effect.scoped))

    it.effect("a retryable first answer stores the batch sealed, retrying, with the attempt counted", () =>
      Effect.gen(function*() {
        const svc = yield* SvcTest
        const { org, collector, id } = yield* withCollector()
        collector.enqueue(Reply.status(503, { headers: { "retry-after": "3" } }))
        yield* traffic(org)
        // Later batches of the traffic may be queued behind it and claimed
        // (pending, one attempt, no error yet): the stored retry is the one
        // with an error.
        const retrying = (d: { status: string; attempts: number; last_error: string | null }) =>
          d.status === "pending" && d.attempts === 1 && d.last_error !== null
        const { deliveries } = yield* waitForDeliveries(org, id, (list) => list.some(retrying))
        const pending = deliveries.find(retrying)!
        assert.include(pending.last_error, "503")
        const [row] = yield* svc.sql<
          { payload: string | null }
        >`SELECT payload FROM deliveries WHERE id = ${pending.id}`
        assert.isNotNull(row!.payload)
        assert.notInclude(row!.payload!, "resourceSpans", "sealed, not plain")
        yield* waitForDeliveries(
          org,
          id,
          (list) => list.some((d) => d.id === pending.id && d.status === "delivered" && d.attempts === 2)
        )
      }).pipe(Effect.scoped))
  })

  describe("retries only on 429, 502, 503, 504 and network errors", () => {
    it.effect("each retryable answer, then 200: the same batch is sent again and delivered", () =>
      Effect.forEach([
        Reply.status(429),
        Reply.status(502),
        Reply.status(503),
        Reply.status(504),
        Reply.drop()
      ], (first) =>
        Effect.gen(function*() {
          const { org, collector, id } = yield* withCollector()
          collector.enqueue(first)
          yield* traffic(org)
          const { deliveries } = yield* waitForDeliveries(org, id, (list) =>
            list.some((d) => d.status === "delivered" && d.attempts === 2))
          const retried = deliveries.find((d) =>
            d.attempts === 2
          )!
          assert.isNotNull(retried.finished_at)
          const requests = collector.requests()
          const again = requests.slice(1).filter((r) => spanIds(r) === spanIds(requests[0]!))
          assert.strictEqual(again.length, 1, "the retry carries the same spans")
          // A batch of the same traffic taken from memory meanwhile may hold the row's success write
          // until its record is written (within a second).
          yield* eventually(Effect.map(destination(org), (d) => d.last_delivered_at ?? undefined), {
            timeoutMs: 5_000,
            what: "last_delivered_at"
          })
        }), { concurrency: "unbounded", discard: true }).pipe(Effect.scoped))

    it.effect("400, 401, 403, 404, 413 and 500 fail the batch at once; the destination's last_error follows", () =>
      Effect.forEach([400, 401, 403, 404, 413, 500], (status) =>
        Effect.gen(function*() {
          const { org, collector, id } = yield* withCollector(() => Reply.status(status, { body: "nope" }))
          yield* traffic(org)
          const { deliveries } = yield* waitForDeliveries(org, id, (list) => list.some((d) => d.status === "failed"))
          const failed = deliveries.find((d) => d.status === "failed")!
          assert.strictEqual(failed.attempts, 1)
          assert.include(failed.last_error ?? "", String(status))
          assert.isNotNull(failed.finished_at)
          assert.isAbove(failed.span_count, 0)
          const now = yield* destination(org)
          assert.include(now.last_error ?? "", String(status))
          assert.isNull(now.last_delivered_at)
          // One request per batch, never a second one for the failed batch.
          const ids = collector.requests().map(spanIds)
          assert.strictEqual(new Set(ids).size, ids.length)
        }), { concurrency: "unbounded", discard: true }).pipe(Effect.scoped))

    it.effect("a failure right after a success: last_error is the failure's, and the success's record is the older", () =>
      Effect.gen(function*() {
        const svc = yield* SvcTest
        // The first batch is taken; every later one is refused.
        const { org, collector, id } = yield* withCollector()
        collector.enqueue(Reply.status(200, { body: "{}" }))
        collector.respond(() => Reply.status(400, { body: "nope" }))
        const list = () => raw(`${svc.baseUrl}/v1/tasks`, { headers: { authorization: `Bearer ${org.key}` } })
        // Two full batches, sent at once.
        yield* Effect.forEach(Array.from({ length: 600 }), list, { concurrency: 16, discard: true })
        const { deliveries } = yield* waitForDeliveries(
          org,
          id,
          (list) => list.some((d) => d.status === "delivered") && list.some((d) => d.status === "failed")
        )
        // The batches race to the collector, so the one it took may have been
        // made second: its answer came first, and so did its record.
        const finished = deliveries.filter((d) => d.status !== "pending").map((d) => ({
          status: d.status,
          at: Date.parse(d.finished_at!)
        }))
        const delivered = finished.filter((d) => d.status === "delivered")
        assert.strictEqual(delivered.length, 1, JSON.stringify(finished))
        for (const d of finished) assert.isAtLeast(d.at, delivered[0]!.at, JSON.stringify(finished))
        // A success's record written after the failure's would have cleared it with the same statement.
        const now = yield* destination(org)
        assert.include(now.last_error ?? "", "400")
      }).pipe(Effect.scoped))

    it.effect("Retry-After is honoured before the next attempt", () =>
      Effect.gen(function*() {
        const { org, collector, id } = yield* withCollector()
        collector.enqueue(Reply.status(503, { headers: { "retry-after": "2" } }))
        yield* traffic(org)
        yield* waitForDeliveries(org, id, (list) => list.some((d) => d.status === "delivered" && d.attempts === 2))
        const [first, ...rest] = collector.requests()
        const second = rest.find((r) => spanIds(r) === spanIds(first!))
        // A lower bound only: the retry waited at least what the collector asked.
        assert.isAtLeast(second!.receivedAt - first!.completedAt, 1900)
      }).pipe(Effect.scoped))

    it.effect(
      "retries are bounded: a collector that keeps answering 503 fails the batch after one attempt more than SVC_TELEMETRY_RETRY_SCHEDULE has delays",
      () =>
        Effect.gen(function*() {
          const { org, collector, id } = yield* withCollector(() => Reply.status(503))
          yield* traffic(org)
          const { deliveries } = yield* waitForDeliveries(org, id, (list) => list.some((d) => d.status === "failed"))
          const failed = deliveries.find((d) => d.status === "failed")!
          assert.strictEqual(failed.attempts, RETRY_SCHEDULE.length + 1)
          assert.include(failed.last_error ?? "", "503")
          assert.isAtLeast(collector.requests().length, RETRY_SCHEDULE.length + 1)
        }).pipe(Effect.scoped),
      { timeout: 60_000 }
    )
  })

  describe("delivery records", () => {
    it.effect("pending then delivered, with span_count, attempts and times; last_delivered_at follows", () =>
      Effect.gen(function*() {
        const { org, id } = yield* withCollector()
        yield* traffic(org)
        const { deliveries } = yield* waitForDeliveries(org, id, (list) => list.some((d) => d.status === "delivered"))
        const record = deliveries.find((d) => d.status === "delivered")!
        assert.deepStrictEqual(Object.keys(record).sort(), [
          "attempts",
          "created_at",
          "finished_at",
          "id",
          "last_error",
          "rejected_spans",
          "span_count",
          "status"
        ])
        assert.isAbove(record.span_count, 0)
        assert.isAtMost(record.span_count, 512)
        assert.strictEqual(record.rejected_spans, 0)
        assert.strictEqual(record.attempts, 1)
        assert.isNull(record.last_error)
        const now = yield* destination(org)
        assert.isNotNull(now.last_delivered_at)
        assert.isNull(now.last_error)
      }).pipe(Effect.scoped))

    it.effect("a batch being sent counts in pending_spans before it has a record", () =>
      Effect.gen(function*() {
        const { org, collector } = yield* withCollector(() => Reply.hang())
        yield* traffic(org)
        yield* collector.waitFor(() => true, "20 seconds")
        const now = yield* destination(org)
        assert.isAbove(now.pending_spans, 0)
      }).pipe(Effect.scoped))

    it.effect("a hanging collector: the attempt ends at SVC_TELEMETRY_EXPORT_TIMEOUT and the batch stays pending, to be retried", () =>
      Effect.gen(function*() {
        const { org, id } = yield* withCollector(() => Reply.hang())
        yield* traffic(org)
        const { deliveries } = yield* waitForDeliveries(org, id, (list) => list.some((d) => d.last_error !== null))
        const timedOut = deliveries.find((d) => d.last_error !== null)!
        assert.strictEqual(timedOut.status, "pending")
        assert.include(timedOut.last_error, "within 1000 ms")
        const now = yield* destination(org)
        assert.isAbove(now.pending_spans, 0)
      }).pipe(Effect.scoped))

    it.effect("200 with partialSuccess.rejectedSpans > 0 is partial, counted, never retried, not replayable", () =>
      Effect.gen(function*() {
        const { org, collector, id } = yield* withCollector(
          () =>
            Reply.json({
              partialSuccess: { rejectedSpans: "2", errorMessage: "spans too old for key echo-secret-123" }
            }),
          { "X-Api-Key": "echo-secret-123" }
        )
        yield* traffic(org)
        const { deliveries } = yield* waitForDeliveries(org, id, (list) => list.some((d) => d.status === "partial"))
        const partial = deliveries.find((d) => d.status === "partial")!
        assert.strictEqual(partial.rejected_spans, 2)
        assert.strictEqual(partial.attempts, 1)
        assert.include(partial.last_error ?? "", "rejected 2")
        assert.include(partial.last_error ?? "", "spans too old")
        assert.notInclude(partial.last_error ?? "", "echo-secret-123", "a collector echoing a header value is masked")
        const ids = collector.requests().map(spanIds)
        assert.strictEqual(new Set(ids).size, ids.length, "never retried")
        const replay = yield* Effect.flip(org.client.telemetry.replay({ params: { id, delivery: partial.id } }))
        assert.strictEqual(replay._tag, "NotReplayable")
        const now = yield* destination(org)
        assert.isNotNull(now.last_delivered_at)
        assert.include(now.last_error ?? "", "rejected")
        assert.notInclude(now.last_error ?? "", "echo-secret-123")
      }).pipe(Effect.scoped))

    it.effect("rejectedSpans 0 with a message is delivered with a warning", () =>
      Effect.gen(function*() {
        const { org, id } = yield* withCollector(() =>
          Reply.json({ partialSuccess: { rejectedSpans: 0, errorMessage: "consider batching less" } })
        )
        yield* traffic(org)
        const { deliveries } = yield* waitForDeliveries(org, id, (list) => list.some((d) => d.status === "delivered"))
        const delivered = deliveries.find((d) => d.status === "delivered")!
        assert.strictEqual((delivered as { warning?: string }).warning, "consider batching less")
        assert.strictEqual(delivered.rejected_spans, 0)
      }).pipe(Effect.scoped))
  })

  describe("what svc protects never comes back in a collector's messages", () => {
    it.effect("a collector echoing the bare token of Authorization: Bearer, or its own URL's token: masked in the warning and errors", () =>
      Effect.gen(function*() {
        const token = "tok-9f8e7d6c5b4a39281706"
        const pathToken = "p4th-s3cr3t-0a1b2c3d4e5f"
        const org = yield* SvcTest.org()
        const collector = yield* HttpsReceiver.make({
          respond: () =>
            Reply.json({
              partialSuccess: {
                rejectedSpans: 0,
                errorMessage: `token ${token} is old; ingest/${pathToken}?k=q-s3cr3t-value-42 noted`
              }
            })
        })
        const { id } = yield* org.client.telemetry.create({
          payload: {
            url: collector.url(`/ingest/${pathToken}?k=q-s3cr3t-value-42`),
            headers: { Authorization: `Bearer ${token}` }
          }
        })
        yield* traffic(org)
        const { deliveries } = yield* waitForDeliveries(org, id, (list) => list.some((d) => d.status === "delivered"))
        const warning = (deliveries.find((d) => d.status === "delivered") as { warning?: string }).warning ?? ""
        assert.include(warning, "is old")
        assert.notInclude(warning, token)
        assert.notInclude(warning, pathToken)
        assert.notInclude(warning, "q-s3cr3t-value-42")
        const listed = JSON.stringify(yield* org.client.telemetry.list())
        assert.notInclude(listed, token)
        assert.notInclude(listed, pathToken)
        // A record kept from before masking (or by an older version) is masked on the way out too.
        const sql = (yield* SvcTest).sql
        yield* sql`UPDATE deliveries SET meta = jsonb_set(meta, '{warning}', to_jsonb(${`old ${token}`}::text)), last_error = ${`was ${token}`} WHERE target_id = ${id}`
        yield* sql`UPDATE telemetry_destinations SET last_error = ${`bad ${token}`} WHERE id = ${id}`
        const again = JSON.stringify([
          yield* org.client.telemetry.deliveries({ params: { id }, query: {} }),
          yield* org.client.telemetry.list()
        ])
        assert.include(again, "old [redacted]")
        assert.notInclude(again, token)
      }).pipe(Effect.scoped))
  })

  describe("header names are the tenant's: none is special", () => {
    it.effect("a collector header named __proto__ is stored and sent like any other, never silently lost", () =>
      Effect.gen(function*() {
        const { org, collector } = yield* withCollector(
          undefined,
          JSON.parse("{\"__proto__\":\"proto-value-1\",\"X-Other\":\"other-value-1\"}")
        )
        yield* traffic(org)
        const request = yield* collector.waitFor(() => true, "20 seconds")
        const raw = request.rawHeaders
        const at = raw.findIndex((name, i) => i % 2 === 0 && name.toLowerCase() === "__proto__")
        assert.isAtLeast(at, 0, "the __proto__ header was sent")
        assert.strictEqual(raw[at + 1], "proto-value-1")
        assert.strictEqual(request.headers["x-other"], "other-value-1")
      }).pipe(Effect.scoped))
  })

  describe("replay", () => {
    it.effect("a replayed batch is sent in the destination's protocol and compression, the same spans as its first send", () =>
      Effect.gen(function*() {
        let accept = false
        const { org, collector, id } = yield* withCollector(
          () => accept ? Reply.ok("") : Reply.status(400),
          undefined,
          {
            protocol: "http/protobuf",
            compression: "gzip"
          }
        )
        yield* traffic(org)
        const { deliveries } = yield* waitForDeliveries(org, id, (list) => list.some((d) => d.status === "failed"))
        const failed = deliveries.find((d) => d.status === "failed")!
        accept = true
        yield* org.client.telemetry.replay({ params: { id, delivery: failed.id } })
        yield* waitForDeliveries(org, id, (list) => list.some((d) => d.id === failed.id && d.status === "delivered"))
        const sent = collector.requests()
        for (const request of sent) {
          assert.strictEqual(request.headers["content-type"], "application/x-protobuf")
          assert.strictEqual(request.headers["content-encoding"], "gzip")
        }
        const counts = new Map<string, number>()
        for (const request of sent) counts.set(spanIds(request), (counts.get(spanIds(request)) ?? 0) + 1)
        assert.deepStrictEqual([...counts.values()].filter((n) => n > 1), [2], "the replay carried the failed batch")
      }).pipe(Effect.scoped))

    it.effect("failed → {queued: true, id} and the same batch is sent again; delivered → 409 NOT_REPLAYABLE", () =>
      Effect.gen(function*() {
        let accept = false
        const { org, collector, id } = yield* withCollector(() => accept ? Reply.ok("{}") : Reply.status(500))
        yield* traffic(org)
        const { deliveries } = yield* waitForDeliveries(org, id, (list) => list.some((d) => d.status === "failed"))
        const failed = deliveries.find((d) => d.status === "failed")!
        accept = true
        const replayed = yield* org.client.telemetry.replay({ params: { id, delivery: failed.id } })
        assert.deepStrictEqual(replayed, { queued: true, id: failed.id })
        const after = yield* waitForDeliveries(
          org,
          id,
          (list) => list.some((d) => d.id === failed.id && d.status === "delivered")
        )
        assert.strictEqual(after.deliveries.find((d) => d.id === failed.id)!.attempts, 2)
        // Exactly one batch went out twice: the replayed one (other failed batches stay failed).
        const counts = new Map<string, number>()
        for (const request of collector.requests()) {
          counts.set(spanIds(request), (counts.get(spanIds(request)) ?? 0) + 1)
        }
        assert.deepStrictEqual([...counts.values()].filter((n) => n > 1), [2], "the replay carried the failed batch")
        const again = yield* Effect.flip(org.client.telemetry.replay({ params: { id, delivery: failed.id } }))
        assert.strictEqual(again._tag, "NotReplayable")
        const unknown = yield* Effect.flip(
          org.client.telemetry.replay({ params: { id, delivery: "01900000-0000-7000-8000-00000000beef" } })
        )
        assert.strictEqual(unknown._tag, "NotFound")
      }).pipe(Effect.scoped))

    it.effect("a failed batch is kept, sealed, for 24 hours; after that it is not replayable", () =>
      Effect.gen(function*() {
        const svc = yield* SvcTest
        const young = yield* withCollector(() => Reply.status(400))
        const old = yield* withCollector(() => Reply.status(400))
        yield* traffic(young.org)
        yield* traffic(old.org)
        const failedOf = (org: TestOrg, id: string) =>
          Effect.map(
            waitForDeliveries(org, id, (list) => list.some((d) => d.status === "failed")),
            ({ deliveries }) => deliveries.find((d) => d.status === "failed")!
          )
        const youngFailed = yield* failedOf(young.org, young.id)
        const oldFailed = yield* failedOf(old.org, old.id)
        const [kept] = yield* svc.sql<
          { payload: string | null }
        >`SELECT payload FROM deliveries WHERE id = ${oldFailed.id}`
        assert.isNotNull(kept!.payload, "a failed batch is kept")
        assert.notInclude(kept!.payload!, "resourceSpans", "sealed")
        yield* svc.sql`UPDATE deliveries SET finished_at = now() - interval '23 hours' WHERE id = ${youngFailed.id}`
        yield* svc.sql`UPDATE deliveries SET finished_at = now() - interval '25 hours' WHERE id = ${oldFailed.id}`
        // The retention sweep runs every minute and after every delete; a delete elsewhere triggers it now.
        const other = yield* SvcTest.org()
        const scratch = yield* other.client.telemetry.create({ payload: { url: young.collector.url("/other") } })
        yield* other.client.telemetry.remove({ params: { id: scratch.id } })
        const replay = yield* Effect.flip(
          old.org.client.telemetry.replay({ params: { id: old.id, delivery: oldFailed.id } })
        )
        assert.strictEqual(replay._tag, "NotReplayable")
        const replayed = yield* young.org.client.telemetry.replay({
          params: { id: young.id, delivery: youngFailed.id }
        })
        assert.deepStrictEqual(replayed, { queued: true, id: youngFailed.id })
      }).pipe(Effect.scoped))
  })

  describe("deleting the destination stops export at once", () => {
    it.effect("undelivered batches fail, buffered spans are dropped, nothing more reaches the old collector", () =>
      Effect.gen(function*() {
        const svc = yield* SvcTest
        const { org, collector, id } = yield* withCollector(() => Reply.hang())
        yield* traffic(org)
        yield* waitForDeliveries(org, id, (list) => list.length > 0)
        yield* org.client.telemetry.remove({ params: { id } })
        const deletedAt = BigInt(Date.now()) * 1_000_000n
        const rows = yield* svc.sql<{ status: string; payload: string | null }>`
          SELECT status, payload FROM deliveries WHERE target_id = ${id}
        `
        assert.isTrue(
          rows.every((row) => row.status === "failed" && row.payload === null),
          JSON.stringify(rows.map((r) => [r.status, r.payload === null]))
        )
        // Traffic after the delete goes nowhere; a new destination gets only new spans.
        yield* traffic(org)
        // Buffered spans are dropped, not flushed into batches for the deleted
        // destination (the DELETE request's own span ends after the delete).
        // Another organization's span, captured now, marks a flush round: once
        // it reaches its collector, every buffer of that round was flushed.
        const clock = yield* withCollector()
        yield* clock.org.client.tasks.get({ params: { task_id: "01900000-0000-7000-8000-00000000c10c" } }).pipe(
          Effect.flip
        )
        yield* clock.collector.waitFor(
          (r) =>
            decodeOtlp(r).spans.some((s) =>
              s.attributes["url.path"] === "/v1/tasks/01900000-0000-7000-8000-00000000c10c"
            ),
          "20 seconds"
        )
        const [after] = yield* svc.sql<{ n: number }>`SELECT count(*)::int AS n FROM deliveries WHERE target_id = ${id}`
        assert.strictEqual(after!.n, rows.length, "no batch was made of the deleted destination's buffered spans")
        const next = yield* HttpsReceiver.make()
        const created = yield* org.client.telemetry.create({ payload: { url: next.url("/v1/traces") } })
        yield* org.client.tasks.get({ params: { task_id: "01900000-0000-7000-8000-0000000f1a65" } }).pipe(Effect.flip)
        yield* next.waitFor(
          (r) =>
            decodeOtlp(r).spans.some((s) =>
              s.attributes["url.path"] === "/v1/tasks/01900000-0000-7000-8000-0000000f1a65"
            ),
          "20 seconds"
        )
        // A request already in flight may still arrive; nothing begun after the delete does.
        const late = spansOf(collector.requests()).filter((s) => BigInt(s.startTimeUnixNano) > deletedAt)
        assert.deepStrictEqual(late, [])
        const newSpans = spansOf(next.requests())
        assert.isFalse(newSpans.some((s) => s.attributes["url.path"] === `/v1/telemetry-destinations/${id}`))
        void created
      }).pipe(Effect.scoped))
  })
})

/** No retries: an empty schedule. */
const SvcNoRetry = Layer.unwrap(
  Effect.map(TestTls.shared, (tls) =>
    SvcTest.layer({
      config: { ...loopbackTargets(tls), telemetryFlushInterval: Duration.millis(200), telemetryRetrySchedule: [] }
    }))
)

layer(SvcNoRetry, { excludeTestServices: true })("telemetry export without retries", (it) => {
  it.effect("an empty SVC_TELEMETRY_RETRY_SCHEDULE: a retryable answer fails the batch after its one attempt", () =>
    Effect.gen(function*() {
      const { org, id } = yield* withCollector(() => Reply.status(503))
      yield* traffic(org)
      const { deliveries } = yield* waitForDeliveries(org, id, (list) => list.some((d) => d.status === "failed"))
      const failed = deliveries.find((d) => d.status === "failed")!
      assert.strictEqual(failed.attempts, 1)
      assert.include(failed.last_error ?? "", "503")
      assert.isFalse(deliveries.some((d) => d.attempts > 1))
    }).pipe(Effect.scoped))
})

layer(SvcLongFlush, { excludeTestServices: true })(
  "telemetry export under bursts (a flush period longer than a burst)",
  (it) => {
    describe("batches of at most 512 spans, sent from memory", () => {
      it.effect("a typical batch, as svc writes it in protobuf, is its JSON field for field; bytes per span in each form", () =>
        Effect.gen(function*() {
          const { org, collector } = yield* withCollector()
          const task = yield* org.client.tasks.create({ payload: { name: "t", answer_schema: schema } })
          const session = yield* org.client.agentSessions.create({ payload: {} })
          for (let i = 0; i < 40; i++) {
            yield* traffic(org)
            yield* org.client.tasks.logRun({ params: { task_id: task.id }, payload: { input: i, answer: {} } })
            yield* org.client.agentSessions.governStep({
              params: { session_id: session.id },
              payload: { step_id: `s${i}`, tool: "search", action_class: "read", arguments: {} }
            })
          }
          const count = (r: ReceivedRequest) => decodeOtlp(r).spans.length
          const largest = () => collector.requests().reduce((a, r) => (count(r) > count(a) ? r : a))
          yield* collector.waitFor(() => count(largest()) >= 100, "20 seconds")
          const request = largest()
          const spans = count(request)
          const text = Buffer.from(request.body)
          const proto = Buffer.from(protobufFromJsonBody(text))
          // The official definitions read svc's protobuf as the JSON it was written from.
          assert.strictEqual(canonical(protobufToJson(proto)), canonical(JSON.parse(text.toString("utf8"))))
          const sizes = {
            json: text.length,
            "json+gzip": gzipSync(text, { level: zlib.Z_BEST_SPEED }).length,
            protobuf: proto.length,
            "protobuf+gzip": gzipSync(proto, { level: zlib.Z_BEST_SPEED }).length
          }
          const perSpan = Object.fromEntries(
            Object.entries(sizes).map(([form, bytes]) => [form, Math.round(bytes / spans)])
          )
          console.info(`OTLP bytes per span (batch of ${spans} spans):`, JSON.stringify(perSpan))
          assert.isBelow(sizes.protobuf, sizes.json)
          assert.isBelow(sizes["protobuf+gzip"], sizes.protobuf)
          assert.isBelow(sizes["json+gzip"], sizes.json)
        }).pipe(Effect.scoped))

      it.effect("a burst of spans goes out in batches of 512 (a full batch is sent without waiting for the period)", () =>
        Effect.gen(function*() {
          const svc = yield* SvcTest
          const { org, collector, id } = yield* withCollector()
          const list = () => raw(`${svc.baseUrl}/v1/tasks`, { headers: { authorization: `Bearer ${org.key}` } })
          // Each request is two spans (the request's and Tasks.list): well over 512 in all.
          yield* Effect.forEach(Array.from({ length: 700 }), list, { concurrency: 16, discard: true })
          const { deliveries } = yield* waitForDeliveries(
            org,
            id,
            (list) => list.some((d) => d.status === "delivered" && d.span_count === 512)
          )
          assert.isTrue(deliveries.every((d) => d.span_count <= 512))
          for (const request of collector.requests()) assert.isAtMost(decodeOtlp(request).spans.length, 512)
          // A healthy collector and a buffer far from full: nothing is dropped.
          yield* Effect.forEach(Array.from({ length: 700 }), list, { concurrency: 16, discard: true })
          yield* waitForDeliveries(org, id, (list) => list.filter((d) => d.span_count === 512).length >= 2)
          const after = yield* destination(org)
          assert.strictEqual(after.dropped_spans, 0)
        }).pipe(Effect.scoped))

      it.effect(
        "batches beyond the sends under way wait in memory, not sealed in the queue: a slow collector gets them all from memory",
        () =>
          Effect.gen(function*() {
            const svc = yield* SvcTest
            // Slow enough that every send slot is taken while more batches are cut.
            const { org, id } = yield* withCollector(() => Reply.delayed(4000, { status: 200, body: "{}" }))
            const list = () => raw(`${svc.baseUrl}/v1/tasks`, { headers: { authorization: `Bearer ${org.key}` } })
            // Two spans a request: more than 4 batches of 512.
            const requests = 1300
            yield* Effect.forEach(Array.from({ length: requests }), list, { concurrency: 16, discard: true })
            // The last, partial batch waits for the period (10 s), then 4 s at the collector.
            const { deliveries } = yield* waitForDeliveries(org, id, (list) =>
              list.filter((d) =>
                d.status === "delivered"
              ).reduce((sum, d) => sum + d.span_count, 0) >= requests * 2, 40_000)
            assert.isAbove(deliveries.length, 4)
            for (const d of deliveries) {
              assert.strictEqual(d.attempts, 1)
            }
            // None was stored, so the queue's worker never sent one (it records every attempt it settles).
            const [row] = yield* svc.sql<{ stored: number; attempts: number }>`
          SELECT count(*) FILTER (WHERE d.payload IS NOT NULL)::int AS stored,
                 (SELECT count(*)::int FROM delivery_attempts a JOIN deliveries x ON x.id = a.delivery_id WHERE x.target_id = ${id}) AS attempts
          FROM deliveries d WHERE d.target_id = ${id}
        `
            assert.deepStrictEqual(row, { stored: 0, attempts: 0 })
            assert.strictEqual((yield* destination(org)).dropped_spans, 0)
          }).pipe(Effect.scoped),
        { timeout: 90_000 }
      )

      it.effect(
        "the records of batches the collector takes together are written together: one statement, not one a batch",
        () =>
          Effect.gen(function*() {
            const svc = yield* SvcTest
            // The collector holds its answers until every send slot holds a
            // batch, then gives the four at once, however slowly the batches came.
            let release!: () => void
            const allSlotsTaken = new Promise<void>((resolve) => (release = resolve))
            const { org, id } = yield* withCollector((request) => {
              if (request.index >= MEMORY_SENDS - 1) release()
              return { status: 200, body: "{}", after: allSlotsTaken }
            })
            const list = () => raw(`${svc.baseUrl}/v1/tasks`, { headers: { authorization: `Bearer ${org.key}` } })
            // Two spans a request: more than 4 full batches.
            yield* Effect.forEach(Array.from({ length: 1100 }), list, { concurrency: 16, discard: true })
            yield* waitForDeliveries(org, id, (list) => list.filter((d) => d.status === "delivered").length >= 4)
            // Rows inserted by one statement share its transaction's now().
            const rows = yield* svc.sql<{ created_at: Date; n: number; spans: number }>`
          SELECT created_at, count(*)::int AS n, sum((meta->>'span_count')::int)::int AS spans FROM deliveries
          WHERE target_id = ${id} AND status = 'delivered' GROUP BY created_at ORDER BY created_at
        `
            assert.isAbove(Math.max(...rows.map((row) => row.n)), 1, JSON.stringify(rows))
            // Until then its spans counted as pending; none is lost or counted twice.
            const after = yield* destination(org)
            assert.strictEqual(after.dropped_spans, 0)
          }).pipe(Effect.scoped),
        { timeout: 60_000 }
      )
    })
  }
)
