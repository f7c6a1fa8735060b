/**
 * A closed-loop load generator run in a worker thread (so it does not share
 * the event loop with the server it measures): `concurrency` loops send
 * `count` POSTs in total over keep-alive loopback connections and record
 * each latency.
 */
import { Agent, request } from "node:http"
import { parentPort, Worker, workerData } from "node:worker_threads"

export interface LoadSpec {
  readonly url: string
  readonly headers: Record<string, string>
  /** Bodies are sent in turn. */
  readonly bodies: ReadonlyArray<string>
  readonly count: number
  readonly concurrency: number
  readonly expectStatus: number
}

export interface LoadResult {
  readonly requests: number
  readonly errors: number
  readonly seconds: number
  readonly rps: number
  readonly p50ms: number
  readonly p99ms: number
}

export interface RawLoad {
  readonly errors: number
  readonly seconds: number
  readonly latencies: ReadonlyArray<number>
}

/** One summary of several runs (rounds interleaved with another variant to even out a busy machine). */
export const summarize = (runs: ReadonlyArray<RawLoad>): LoadResult => {
  const latencies = runs.flatMap((r) => r.latencies).sort((a, b) => a - b)
  const seconds = runs.reduce((sum, r) => sum + r.seconds, 0)
  return {
    requests: latencies.length,
    errors: runs.reduce((sum, r) => sum + r.errors, 0),
    seconds: Number(seconds.toFixed(2)),
    rps: Math.round(latencies.length / seconds),
    p50ms: Number(percentile(latencies, 0.5).toFixed(2)),
    p99ms: Number(percentile(latencies, 0.99).toFixed(2))
  }
}

const percentile = (sorted: ReadonlyArray<number>, p: number) =>
  sorted.length === 0 ? 0 : sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * p))]!

const runLoad = async (spec: LoadSpec): Promise<RawLoad> => {
  const url = new URL(spec.url)
  if (url.hostname !== "127.0.0.1") throw new Error("load goes to loopback only")
  const agent = new Agent({ keepAlive: true, maxSockets: spec.concurrency })
  const latencies: Array<number> = []
  let errors = 0
  let next = 0
  const one = (body: string) =>
    new Promise<number>((resolve, reject) => {
      const req = request(url, { method: "POST", agent, headers: { ...spec.headers, "content-length": Buffer.byteLength(body) } }, (res) => {
        res.resume()
        res.on("end", () => resolve(res.statusCode ?? 0))
      })
      req.on("error", reject)
      req.end(body)
    })
  const started = performance.now()
  await Promise.all(Array.from({ length: spec.concurrency }, async () => {
    while (next < spec.count) {
      const i = next++
      const t = performance.now()
      const status = await one(spec.bodies[i % spec.bodies.length]!).catch(() => 0)
      latencies.push(performance.now() - t)
      if (status !== spec.expectStatus) errors++
    }
  }))
  const seconds = (performance.now() - started) / 1000
  agent.destroy()
  return { errors, seconds, latencies }
}

/** Runs `spec` in a worker thread. */
export const load = (spec: LoadSpec): Promise<RawLoad> =>
  new Promise((resolve, reject) => {
    const worker = new Worker(new URL(import.meta.url), { workerData: spec })
    worker.once("message", (result: RawLoad) => {
      resolve(result)
      void worker.terminate()
    })
    worker.once("error", reject)
  })

if (parentPort !== null && workerData !== null && typeof workerData === "object" && "url" in workerData) {
  const port = parentPort
  void runLoad(workerData as LoadSpec).then((result) => port.postMessage(result))
}
