/**
 * The webhook receiver, a child process of its own: an HTTPS server on
 * loopback answering 204 at once, recording when each request was received
 * (wall clock, ms) by path (the query left out: endpoints told apart by
 * their query count together). `wait` resolves when a path has `count`
 * receipts (or at `timeoutMs`) with the receipt times that a rate needs,
 * and the TLS connections accepted since the last `reset` (each one a
 * handshake its sender paid as well).
 */
import type { IncomingMessage, ServerResponse } from "node:http"
import { createServer } from "node:https"
import { serve } from "./child.ts"

const receipts = new Map<string, Array<number>>()
let connections = 0
const now = () => performance.timeOrigin + performance.now()

const handle = (req: IncomingMessage, res: ServerResponse) => {
  req.on("data", () => {})
  req.on("end", () => {
    const url = req.url ?? "/"
    const query = url.indexOf("?")
    const path = query < 0 ? url : url.slice(0, query)
    let list = receipts.get(path)
    if (list === undefined) receipts.set(path, list = [])
    list.push(now())
    res.writeHead(204)
    res.end()
  })
}
const tls = { cert: process.env.BENCH_TLS_CERT!, key: process.env.BENCH_TLS_KEY! }
const listen = (port: number, host: string) =>
  new Promise<number>((resolve, reject) => {
    const server = createServer(
      { ...tls, keepAliveTimeout: Number(process.env.BENCH_RECEIVER_KEEPALIVE_MS ?? 5_000) },
      handle
    )
    server.on("secureConnection", () => void connections++)
    server.once("error", reject)
    server.listen(port, host, () => resolve((server.address() as { port: number }).port))
  })
const port = await listen(0, "127.0.0.1")
const addresses = Math.max(1, Number(process.env.BENCH_RECEIVER_ADDRESSES ?? 1))
for (let k = 2; k <= addresses; k++) await listen(port, `127.0.0.${k}`)

export interface Receipts {
  readonly count: number
  /** Receipt times (epoch ms) of the first, of the 20th, 25th, 75th and 80th percentile, and of the last receipt. */
  readonly first: number
  readonly p20: number
  readonly p25: number
  readonly p75: number
  readonly p80: number
  readonly last: number
  /** TLS connections accepted since the last `reset`, on every path. */
  readonly connections: number
}

const summary = (path: string): Receipts => {
  const list = receipts.get(path) ?? []
  const at = (p: number) => list[Math.min(list.length - 1, Math.max(0, Math.floor(list.length * p)))] ?? NaN
  return {
    count: list.length,
    first: at(0),
    p20: at(0.2),
    p25: at(0.25),
    p75: at(0.75),
    p80: at(0.8),
    last: list[list.length - 1] ?? NaN,
    connections
  }
}

serve({
  reset: ({ path }: { path: string }) => {
    receipts.delete(path)
    connections = 0
  },
  url: () => `https://127.0.0.1:${port}`,
  wait: async ({ path, count, timeoutMs }: { path: string; count: number; timeoutMs: number }) => {
    const deadline = Date.now() + timeoutMs
    while ((receipts.get(path)?.length ?? 0) < count && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 5))
    }
    return summary(path)
  }
})
