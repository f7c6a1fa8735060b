/**
 * Span export throughput, one child process per run: the same spans
 * (traces of a server span and one child, with the same attributes) go to
 * the OTLP sink (another process) either through svc's capture and export
 * (`BENCH_SPAN_ROLE=svc`: svc's tracer, per-destination buffer, durable
 * delivery queue, delivery worker, outbound check, loaded from the checkout
 * `BENCH_SVC_SRC`, on embedded PGlite or a scratch database of
 * `BENCH_DATABASE_URL`) or through the OpenTelemetry JS SDK
 * (`BENCH_SPAN_ROLE=sdk`: BatchSpanProcessor + OTLP/HTTP JSON exporter,
 * from test/interop's npm project: `npm ci --prefix test/interop`).
 * Both batch at 512, gzip, and never drop (queues sized for all spans).
 * `go` creates spans (a warm-up, then the measured ones); `memory` answers
 * the peak RSS and heap above their level just before the first measured
 * span.
 */
import { existsSync } from "node:fs"
import { createRequire } from "node:module"
import * as path from "node:path"
import { pathToFileURL } from "node:url"
import { checkoutModule } from "../support/checkoutModule.ts"
import { serve } from "../support/child.ts"

/** Spans the queues must hold without dropping. */
const SPANS = Number(process.env.BENCH_SPANS)
const SINK_URL = process.env.BENCH_SINK_URL!

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

const attributesFor = (i: number, orgId: string) => ({
  "http.request.method": "GET",
  "url.path": `/v1/tasks/${i % 100}`,
  "http.response.status_code": 200,
  "server.address": "127.0.0.1",
  "svc.org_id": orgId
})

const now = () => performance.timeOrigin + performance.now()

// The OpenTelemetry JS SDK is not in the repository's install: it lives in
// test/interop's npm project with the other outside libraries svc is
// checked against.
const interop = createRequire(new URL("../../test/interop/package.json", import.meta.url))
// eslint-disable-next-line @typescript-eslint/no-explicit-any
const sdkPackage = (name: string): any => {
  try {
    return interop(name)
  } catch (error) {
    throw new Error(`the OpenTelemetry SDK arm needs ${name}: npm ci --prefix test/interop installs it`, {
      cause: error
    })
  }
}
let memory: (() => unknown) | undefined

const sdk = async () => {
  const { BasicTracerProvider, BatchSpanProcessor } = sdkPackage("@opentelemetry/sdk-trace-base")
  const { OTLPTraceExporter } = sdkPackage("@opentelemetry/exporter-trace-otlp-http")
  const { CompressionAlgorithm } = sdkPackage("@opentelemetry/otlp-exporter-base")
  const { resourceFromAttributes } = sdkPackage("@opentelemetry/resources")
  const api = sdkPackage("@opentelemetry/api")
  const exporter = new OTLPTraceExporter({
    url: SINK_URL,
    compression: CompressionAlgorithm.GZIP,
    httpAgentOptions: { ca: [process.env.BENCH_CA_PEM!], keepAlive: true }
  })
  const provider = new BasicTracerProvider({
    resource: resourceFromAttributes({ "service.name": "svc" }),
    spanProcessors: [
      new BatchSpanProcessor(exporter, { maxQueueSize: SPANS, maxExportBatchSize: 512, scheduledDelayMillis: 2000 })
    ]
  })
  const tracer = provider.getTracer("svc")
  const orgId = "01900000-0000-7000-8000-000000000001"
  serve({
    go: async ({ spans, measure }: { spans: number; measure: boolean }) => {
      if (measure) memory = memorySampler()
      const started = now()
      for (let i = 0; i < spans / 2; i++) {
        const root = tracer.startSpan("GET", { kind: api.SpanKind.SERVER, attributes: attributesFor(i, orgId) })
        const ctx = api.trace.setSpan(api.ROOT_CONTEXT, root)
        tracer.startSpan("Tasks.list", { attributes: { "svc.org_id": orgId } }, ctx).end()
        root.end()
        if (i % 1000 === 999) await new Promise((resolve) => setImmediate(resolve))
      }
      return { started, generated: now() }
    },
    memory: () => memory!(),
    work: () => undefined,
    close: () => provider.shutdown()
  })
}

const svc = async () => {
  const src = (file: string) => import(checkoutModule(process.env.BENCH_SVC_SRC!, file))
  // The checkout's own Effect: its modules and the harness's must share one instance.
  const effect = createRequire(path.join(process.env.BENCH_SVC_SRC!, "package.json")).resolve("effect")
  const { Effect, Layer, ManagedRuntime, Option, Redacted } = await import(
    pathToFileURL(effect).href
  ) as typeof import("effect")
  const { Identity } = await src("identity/Identity.ts")
  const { SvcConfig } = await src("platform/Config.ts")
  const { SecretBox } = await src("platform/Crypto.ts")
  const { Database } = await src("database/Database.ts")
  const { Migrations } = await src("database/Migrations.ts")
  const { ServicesLive, WorkersLive } = await src("server/App.ts")
  const { TelemetryDestinations } = await src("telemetry/Destinations.ts")
  const url = process.env.BENCH_DATABASE_URL
  const Live = Layer.mergeAll(WorkersLive, Identity.layer).pipe(
    Layer.provideMerge(ServicesLive),
    Layer.provideMerge(Migrations.layer),
    Layer.provideMerge(url ? Database.scratch(Redacted.make(url)) : Database.memory),
    Layer.provideMerge(SecretBox.layerEphemeral),
    Layer.provideMerge(SvcConfig.layerWith({
      allowedTargetCidrs: ["127.0.0.0/8"],
      extraCaFile: Option.some(process.env.BENCH_CA_FILE!),
      telemetryBufferSpans: SPANS,
      telemetryQueueBatches: 1000
    }))
  )
  const runtime = ManagedRuntime.make(Live as any)
  const orgId: string = await runtime.runPromise(Effect.gen(function*() {
    const identity: any = yield* Identity
    const org = yield* identity.createOrg("bench")
    yield* ((yield* TelemetryDestinations) as any).create(org.id, { url: SINK_URL, compression: "gzip" })
    return org.id as string
  }) as any) as string
  serve({
    go: ({ spans, measure }: { spans: number; measure: boolean }) =>
      runtime.runPromise(Effect.gen(function*() {
        if (measure) memory = memorySampler()
        const started = now()
        for (let i = 0; i < spans / 2; i++) {
          yield* Effect.void.pipe(
            Effect.withSpan("Tasks.list"),
            Effect.withSpan("GET", { kind: "server", attributes: attributesFor(i, orgId) })
          )
          if (i % 1000 === 999) yield* Effect.yieldNow
        }
        return { started, generated: now() }
      })),
    memory: () => memory!(),
    // The database work counts of the checkout (`src/database/WorkCounts.ts`), where it has them.
    work: async () => {
      const file = path.join(process.env.BENCH_SVC_SRC!, "src/database/WorkCounts.ts")
      return existsSync(file) ? (await import(pathToFileURL(file).href)).readWorkCounts() : undefined
    },
    close: () => runtime.dispose()
  })
}

if (process.env.BENCH_SPAN_ROLE === "sdk") await sdk()
else await svc()
