/**
 * Telemetry export, side by side in the same run:
 *
 * 1. Export throughput and memory: the same spans (N spans in traces of a
 *    server span and one child, with the same attributes) go from a fresh
 *    child process to the same local HTTPS OTLP sink, once through `svc`'s
 *    capture and export (tracer, per-destination buffer, durable delivery
 *    queue on embedded PGlite, delivery worker, outbound guard) and once
 *    through the OpenTelemetry JS SDK (BasicTracerProvider +
 *    BatchSpanProcessor + OTLPTraceExporter, OTLP/HTTP JSON). Both batch at
 *    512, both gzip, neither drops (queues sized for N). Spans/s = N / time
 *    from the first span created to the last span received by the sink.
 *    Peak memory = the child's peak RSS and heap above their level just
 *    before the first span.
 * 2. Request latency with export on versus off: a `svc` server in a child
 *    process, GET /v1/tasks from this process, in alternating blocks with
 *    and without a destination for the calling organization.
 *
 * Runs as the scenario (parent) or, with TELEMETRY_BENCH_ROLE set, as one
 * of the child processes.
 */
import { spawn } from "node:child_process"
import { createServer } from "node:https"
import { fileURLToPath } from "node:url"
import { gunzipSync } from "node:zlib"

const SPANS = 40_000
/**
 * Export off/on per block, short blocks in ABBA order so drift and bursts
 * of noise (JIT, GC, neighbours on a shared machine) fall on both sides.
 */
const LATENCY_BLOCKS = Array.from({ length: 40 }, (_, i) => [false, true, true, false][i % 4]!)
const LATENCY_REQUESTS_PER_BLOCK = 80

type Role = "svc-export" | "sdk-export" | "svc-server"

// ---------------------------------------------------------------------------
// Children

const memorySampler = () => {
  const base = process.memoryUsage()
  let peakRss = base.rss
  let peakHeap = base.heapUsed
  const timer = setInterval(() => {
    const now = process.memoryUsage()
    peakRss = Math.max(peakRss, now.rss)
    peakHeap = Math.max(peakHeap, now.heapUsed)
  }, 10)
  return () => {
    clearInterval(timer)
    const now = process.memoryUsage()
    return {
      peakRssDeltaMb: (Math.max(peakRss, now.rss) - base.rss) / 2 ** 20,
      peakHeapDeltaMb: (Math.max(peakHeap, now.heapUsed) - base.heapUsed) / 2 ** 20,
      peakRssMb: Math.max(peakRss, now.rss) / 2 ** 20
    }
  }
}

const send = (message: unknown) => process.stdout.write(`${JSON.stringify(message)}\n`)
const waitForStdinLine = () => new Promise<void>((resolve) => process.stdin.once("data", () => resolve()))

const attributesFor = (i: number, orgId: string) => ({
  "http.request.method": "GET",
  "url.path": `/v1/tasks/${i % 100}`,
  "http.response.status_code": 200,
  "server.address": "127.0.0.1",
  "svc.org_id": orgId
})

const runSdkExport = async (url: string, caPem: string) => {
  const { BasicTracerProvider, BatchSpanProcessor } = await import("@opentelemetry/sdk-trace-base")
  const { OTLPTraceExporter } = await import("@opentelemetry/exporter-trace-otlp-http")
  const { CompressionAlgorithm } = await import("@opentelemetry/otlp-exporter-base")
  const { resourceFromAttributes } = await import("@opentelemetry/resources")
  const api = await import("@opentelemetry/api")
  const exporter = new OTLPTraceExporter({
    url,
    compression: CompressionAlgorithm.GZIP,
    httpAgentOptions: { ca: [caPem], keepAlive: true }
  })
  const provider = new BasicTracerProvider({
    resource: resourceFromAttributes({ "service.name": "svc" }),
    spanProcessors: [
      new BatchSpanProcessor(exporter, {
        maxQueueSize: SPANS,
        maxExportBatchSize: 512,
        scheduledDelayMillis: 2000
      })
    ]
  })
  const tracer = provider.getTracer("svc")
  const orgId = "01900000-0000-7000-8000-000000000001"
  send({ ready: true })
  await waitForStdinLine()
  const done = memorySampler()
  send({ started: Date.now() })
  for (let i = 0; i < SPANS / 2; i++) {
    const root = tracer.startSpan("GET", { kind: api.SpanKind.SERVER, attributes: attributesFor(i, orgId) })
    const ctx = api.trace.setSpan(api.ROOT_CONTEXT, root)
    tracer.startSpan("Tasks.list", { attributes: { "svc.org_id": orgId } }, ctx).end()
    root.end()
    if (i % 1000 === 999) await new Promise((resolve) => setImmediate(resolve))
  }
  send({ generated: Date.now() })
  await waitForStdinLine()
  send({ memory: done() })
  await provider.shutdown()
  process.exit(0)
}

const runSvcExport = async (url: string, caFile: string) => {
  const { Effect, Layer, Option } = await import("effect")
  const { Identity } = await import("../../src/identity/Identity.ts")
  const { SvcConfig } = await import("../../src/platform/Config.ts")
  const { SecretBox } = await import("../../src/platform/Crypto.ts")
  const { Database } = await import("../../src/platform/Database.ts")
  const { Migrations } = await import("../../src/platform/Migrations.ts")
  const { ServicesLive, WorkersLive } = await import("../../src/server/App.ts")
  const { TelemetryDestinations } = await import("../../src/telemetry/Destinations.ts")
  const Live = Layer.mergeAll(WorkersLive, Identity.layer).pipe(
    Layer.provideMerge(ServicesLive),
    Layer.provideMerge(Migrations.layer),
    Layer.provideMerge(Database.memory),
    Layer.provideMerge(SecretBox.layerEphemeral),
    Layer.provideMerge(SvcConfig.layerWith({
      allowedTargetCidrs: ["127.0.0.0/8"],
      extraCaFile: Option.some(caFile),
      telemetryBufferSpans: SPANS,
      telemetryQueueBatches: 1000
    }))
  )
  const program = Effect.gen(function*() {
    const identity = yield* Identity
    const org = yield* identity.createOrg("bench")
    yield* (yield* TelemetryDestinations).create(org.id, { url })
    send({ ready: true })
    yield* Effect.promise(waitForStdinLine)
    const done = memorySampler()
    send({ started: Date.now() })
    for (let i = 0; i < SPANS / 2; i++) {
      yield* Effect.void.pipe(
        Effect.withSpan("Tasks.list"),
        Effect.withSpan("GET", { kind: "server", attributes: attributesFor(i, org.id) })
      )
      if (i % 1000 === 999) yield* Effect.yieldNow
    }
    send({ generated: Date.now() })
    yield* Effect.promise(waitForStdinLine)
    send({ memory: done() })
  })
  await Effect.runPromise(Effect.scoped(Effect.provide(program, Live)) as never)
  process.exit(0)
}

const runSvcServer = async (caFile: string) => {
  const { Effect, Layer, Option } = await import("effect")
  const { SvcTest } = await import("../../src/testing.ts")
  const program = Effect.gen(function*() {
    const svc = yield* SvcTest
    const org = yield* SvcTest.org()
    send({ baseUrl: svc.baseUrl, key: org.key })
    yield* Effect.promise(waitForStdinLine)
  })
  const Live = SvcTest.layer({ config: { allowedTargetCidrs: ["127.0.0.0/8"], extraCaFile: Option.some(caFile) } })
  await Effect.runPromise(Effect.scoped(Effect.provide(program, Layer.fresh(Live))) as never)
  process.exit(0)
}

// ---------------------------------------------------------------------------
// Parent

interface Sink {
  readonly url: string
  /** Decode and count spans (export runs); off for the latency runs, where the sink shares this process with the client measuring latency. */
  decode: boolean
  spans: number
  requests: number
  lastAt: number
  readonly close: () => Promise<void>
}

const startSink = async (tls: { cert: string; key: string }): Promise<Sink> => {
  const sink: { decode: boolean; spans: number; requests: number; lastAt: number } = {
    decode: true,
    spans: 0,
    requests: 0,
    lastAt: 0
  }
  const server = createServer({ cert: tls.cert, key: tls.key }, (req, res) => {
    const chunks: Array<Buffer> = []
    req.on("data", (chunk: Buffer) => chunks.push(chunk))
    req.on("end", () => {
      if (!sink.decode) {
        sink.requests += 1
        res.writeHead(200, { "content-type": "application/json" })
        res.end("{}")
        return
      }
      let body = Buffer.concat(chunks)
      if (req.headers["content-encoding"] === "gzip") body = gunzipSync(body)
      const json = JSON.parse(body.toString("utf8")) as {
        resourceSpans: Array<{ scopeSpans: Array<{ spans: Array<unknown> }> }>
      }
      for (const rs of json.resourceSpans) for (const ss of rs.scopeSpans) sink.spans += ss.spans.length
      sink.requests += 1
      sink.lastAt = Date.now()
      res.writeHead(200, { "content-type": "application/json" })
      res.end("{}")
    })
  })
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  const port = (server.address() as { port: number }).port
  return Object.assign(sink, {
    url: `https://127.0.0.1:${port}/v1/traces`,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections()
        server.close(() => resolve())
      })
  })
}

const self = fileURLToPath(import.meta.url)

const child = (role: Role, env: Record<string, string>) => {
  const proc = spawn(process.execPath, [self], {
    env: { ...process.env, ...env, TELEMETRY_BENCH_ROLE: role },
    stdio: ["pipe", "pipe", "inherit"]
  })
  const messages: Array<any> = []
  const waiters: Array<() => void> = []
  let buffered = ""
  proc.stdout!.on("data", (chunk: Buffer) => {
    buffered += chunk.toString("utf8")
    let newline: number
    while ((newline = buffered.indexOf("\n")) >= 0) {
      const line = buffered.slice(0, newline)
      buffered = buffered.slice(newline + 1)
      try {
        messages.push(JSON.parse(line))
      } catch {
        continue
      }
      for (const waiter of waiters.splice(0)) waiter()
    }
  })
  const next = async (key: string): Promise<any> => {
    for (;;) {
      const found = messages.find((message) => key in message)
      if (found !== undefined) {
        messages.splice(messages.indexOf(found), 1)
        return found
      }
      await new Promise<void>((resolve) => waiters.push(resolve))
    }
  }
  const tell = () => proc.stdin!.write("go\n")
  const exited = new Promise<void>((resolve) => proc.once("exit", () => resolve()))
  return { proc, next, tell, exited }
}

const exportRun = async (role: "svc-export" | "sdk-export", sink: Sink, env: Record<string, string>) => {
  sink.spans = 0
  sink.requests = 0
  const c = child(role, { ...env, SINK_URL: sink.url })
  await c.next("ready")
  c.tell()
  const { started } = await c.next("started")
  const deadline = Date.now() + 40_000
  while (sink.spans < SPANS && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 5))
  const elapsed = (sink.lastAt - started) / 1000
  const { generated } = await c.next("generated")
  c.tell()
  const { memory } = await c.next("memory")
  await c.exited
  return {
    variant: role === "svc-export" ? "svc" : "OpenTelemetry JS SDK",
    "spans received": sink.spans,
    requests: sink.requests,
    "spans/s": Math.round(sink.spans / elapsed),
    "creating spans (ms)": generated - started,
    "peak RSS delta (MB)": Math.round(memory.peakRssDeltaMb * 10) / 10,
    "peak heap delta (MB)": Math.round(memory.peakHeapDeltaMb * 10) / 10,
    "peak RSS (MB)": Math.round(memory.peakRssMb)
  }
}

const percentile = (values: Array<number>, p: number) => {
  const sorted = [...values].sort((a, b) => a - b)
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!
}

const latencyRun = async (sink: Sink, env: Record<string, string>) => {
  const c = child("svc-server", env)
  const { baseUrl, key } = await c.next("baseUrl")
  const headers = { authorization: `Bearer ${key}` }
  const on: Array<number> = []
  const off: Array<number> = []
  let destination: string | undefined
  // Warm-up.
  for (let i = 0; i < 500; i++) await (await fetch(`${baseUrl}/v1/tasks`, { headers })).text()
  for (const exporting of LATENCY_BLOCKS) {
    if (exporting && destination === undefined) {
      const response = await fetch(`${baseUrl}/v1/telemetry-destinations`, {
        method: "POST",
        headers: { ...headers, "content-type": "application/json" },
        body: JSON.stringify({ url: sink.url })
      })
      destination = ((await response.json()) as { id: string }).id
    } else if (!exporting && destination !== undefined) {
      await (await fetch(`${baseUrl}/v1/telemetry-destinations/${destination}`, { method: "DELETE", headers })).text()
      destination = undefined
    }
    const into = exporting ? on : off
    for (let i = 0; i < LATENCY_REQUESTS_PER_BLOCK; i++) {
      const t0 = performance.now()
      await (await fetch(`${baseUrl}/v1/tasks`, { headers })).text()
      into.push(performance.now() - t0)
    }
  }
  c.tell()
  await c.exited
  return { on, off }
}

const scenario = async () => {
  const { makeTestTls } = await import("../../test/support/tls.ts")
  const tls = await makeTestTls()
  const sink = await startSink(tls)
  const env = { BENCH_CA_FILE: tls.caFile, BENCH_CA_PEM: tls.caCert }
  try {
    // Best of two runs each, interleaved: the machine is shared, and the
    // better run is the one least disturbed by neighbours.
    const best = <A extends { "spans/s": number }>(a: A, b: A) => (a["spans/s"] >= b["spans/s"] ? a : b)
    const sdk1 = await exportRun("sdk-export", sink, env)
    const svc1 = await exportRun("svc-export", sink, env)
    const sdk2 = await exportRun("sdk-export", sink, env)
    const svc2 = await exportRun("svc-export", sink, env)
    const sdk = best(sdk1, sdk2)
    const svc = best(svc1, svc2)
    sink.decode = false
    const { on, off } = await latencyRun(sink, env)
    const ms = (value: number) => Math.round(value * 100) / 100
    const p50on = percentile(on, 50)
    const p50off = percentile(off, 50)
    const p99on = percentile(on, 99)
    const p99off = percentile(off, 99)
    return {
      name: "telemetry",
      rows: [
        svc,
        sdk,
        { variant: "GET /v1/tasks, export off", "p50 (ms)": ms(p50off), "p99 (ms)": ms(p99off), requests: off.length },
        { variant: "GET /v1/tasks, export on", "p50 (ms)": ms(p50on), "p99 (ms)": ms(p99on), requests: on.length }
      ],
      notes: [
        `${SPANS} spans (traces of a server span and one child), batches of 512, gzip, same HTTPS sink on loopback; best of 2 runs each (spans/s: svc ${svc1["spans/s"]}, ${svc2["spans/s"]}; SDK ${sdk1["spans/s"]}, ${sdk2["spans/s"]}).`,
        `svc/SDK spans/s: ${(svc["spans/s"] / sdk["spans/s"]).toFixed(2)}x; peak RSS delta svc/SDK: ${
          (svc["peak RSS delta (MB)"] / Math.max(0.1, sdk["peak RSS delta (MB)"])).toFixed(2)
        }x; peak heap delta svc/SDK: ${(svc["peak heap delta (MB)"] / Math.max(0.1, sdk["peak heap delta (MB)"])).toFixed(2)}x.`,
        `svc's figures include its durable path: every batch is sealed into the delivery queue (embedded PGlite) before it is sent.`,
        `Request latency, export on vs off: p50 ${((p50on / p50off - 1) * 100).toFixed(1)} %, p99 ${
          ((p99on / p99off - 1) * 100).toFixed(1)
        } % (${LATENCY_BLOCKS.length} blocks of ${LATENCY_REQUESTS_PER_BLOCK} sequential requests, off/on in ABBA order, after 500 warm-up requests).`
      ]
    }
  } finally {
    await sink.close()
  }
}

const role = process.env.TELEMETRY_BENCH_ROLE as Role | undefined
if (role === "sdk-export") await runSdkExport(process.env.SINK_URL!, process.env.BENCH_CA_PEM!)
else if (role === "svc-export") await runSvcExport(process.env.SINK_URL!, process.env.BENCH_CA_FILE!)
else if (role === "svc-server") await runSvcServer(process.env.BENCH_CA_FILE!)

export default scenario

