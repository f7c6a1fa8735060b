/**
 * The load generator, a child process of its own (never sharing a process
 * or an event loop with the server it measures): `run` sends `count`
 * requests over `concurrency` keep-alive loopback connections in a closed
 * loop and answers every latency (ms) and how many answers had another
 * status than expected.
 */
import { Agent, request } from "node:http"
import { serve } from "./child.ts"

export interface LoadSpec {
  readonly url: string
  /** Several URLs, taken in turn instead of `url` (e.g. one per agent session). */
  readonly urls?: ReadonlyArray<string>
  readonly method: "GET" | "POST"
  readonly headers: Record<string, string>
  /** POST bodies, sent in turn. */
  readonly bodies?: ReadonlyArray<string>
  /** A token in `bodies` replaced by a value no other request of the run has (e.g. a step id). */
  readonly unique?: string
  readonly count: number
  readonly concurrency: number
  readonly expectStatus: number
}

export interface LoadResult {
  readonly latencies: ReadonlyArray<number>
  readonly errors: number
  readonly firstError?: string | undefined
  readonly seconds: number
}

const run = async (spec: LoadSpec): Promise<LoadResult> => {
  const urls = (spec.urls ?? [spec.url]).map((u) => new URL(u))
  if (urls.some((u) => u.hostname !== "127.0.0.1")) throw new Error("load goes to loopback only")
  const runId = `${process.pid}-${performance.now().toFixed(3)}`
  const agent = new Agent({ keepAlive: true, maxSockets: spec.concurrency })
  const latencies: Array<number> = []
  let errors = 0
  let firstError: string | undefined
  let next = 0
  const one = (url: URL, body: string | undefined) =>
    new Promise<{ status: number; text: string }>((resolve, reject) => {
      const headers = body === undefined
        ? spec.headers
        : { ...spec.headers, "content-length": String(Buffer.byteLength(body)) }
      const req = request(url, { method: spec.method, agent, headers }, (res) => {
        const chunks: Array<Buffer> = []
        res.on("data", (chunk: Buffer) => chunks.push(chunk))
        res.on("end", () => resolve({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString("utf8") }))
      })
      req.on("error", reject)
      req.end(body)
    })
  const started = performance.now()
  await Promise.all(Array.from({ length: spec.concurrency }, async () => {
    while (next < spec.count) {
      const i = next++
      const t = performance.now()
      const template = spec.bodies?.[i % spec.bodies.length]
      const body = template === undefined || spec.unique === undefined
        ? template
        : template.replaceAll(spec.unique, `${runId}-${i}`)
      const answer = await one(urls[i % urls.length]!, body).catch((e: Error) => ({ status: 0, text: e.message }))
      latencies.push(performance.now() - t)
      if (answer.status !== spec.expectStatus) {
        errors++
        firstError ??= `${answer.status} ${answer.text.slice(0, 300)}`
      }
    }
  }))
  const seconds = (performance.now() - started) / 1000
  agent.destroy()
  return { latencies, errors, firstError, seconds }
}

if (process.argv[1] === new URL(import.meta.url).pathname) serve({ run })
