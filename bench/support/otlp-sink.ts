/**
 * The OTLP/HTTP JSON trace sink, a child process of its own: an HTTPS server
 * on loopback answering 200 `{}`, counting requests and (decoded, gzip or
 * not) spans, and when the last span arrived.
 */
import { createServer } from "node:https"
import { gunzipSync } from "node:zlib"
import { serve } from "./child.ts"

let spans = 0
let requests = 0
let lastAt = 0

const server = createServer({ cert: process.env.BENCH_TLS_CERT!, key: process.env.BENCH_TLS_KEY! }, (req, res) => {
  const chunks: Array<Buffer> = []
  req.on("data", (chunk: Buffer) => chunks.push(chunk))
  req.on("end", () => {
    try {
      let body = Buffer.concat(chunks)
      if (req.headers["content-encoding"] === "gzip") body = gunzipSync(body)
      const json = JSON.parse(body.toString("utf8")) as {
        resourceSpans?: Array<{ scopeSpans: Array<{ spans: Array<unknown> }> }>
      }
      for (const rs of json.resourceSpans ?? []) for (const ss of rs.scopeSpans) spans += ss.spans.length
    } catch {
      // counted as a request all the same
    }
    requests += 1
    lastAt = performance.timeOrigin + performance.now()
    res.writeHead(200, { "content-type": "application/json" })
    res.end("{}")
  })
})
await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
const port = (server.address() as { port: number }).port

serve({
  url: () => `https://127.0.0.1:${port}/v1/traces`,
  reset: () => {
    spans = 0
    requests = 0
    lastAt = 0
  },
  stats: () => ({ spans, requests, lastAt }),
  wait: async ({ count, timeoutMs }: { count: number; timeoutMs: number }) => {
    const deadline = Date.now() + timeoutMs
    while (spans < count && Date.now() < deadline) await new Promise((r) => setTimeout(r, 5))
    return { spans, requests, lastAt }
  }
})
