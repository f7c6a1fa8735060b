/**
 * The fault study's webhook receiver (`bench/faults.ts`; also the latency
 * scenario's, with no delay), a child process of
 * its own: an HTTPS server on loopback that records every request's
 * `x-svc-event-id` by path (the query left out), when it arrived (wall
 * clock, ms) and from which local port of the sender, and answers 204 after
 * a delay drawn between `BENCH_DELAY_MIN_MS` and `BENCH_DELAY_MAX_MS`, so
 * that sends are in flight when a fault strikes. Unlike `receiver.ts` it
 * keeps every receipt: the study counts deliveries that arrive twice, not
 * rates.
 *
 * Commands: `url`; `arrivals` (by event id, its arrival times, of a path); `progress` (receipts and distinct event ids by path);
 * `senders` (of the given sender ports: requests being answered now and
 * received in the last second, by path); `label` (these sender ports are
 * that process's: the report counts receipts by process); `report` (given
 * the event ids every path should have: the missing ones, every id
 * received more than once with its arrival times, the pauses between
 * receipts, and the receipts by process).
 */
import { createServer } from "node:https"
import { serve } from "./child.ts"

const delayMin = Number(process.env.BENCH_DELAY_MIN_MS ?? 20)
const delayMax = Number(process.env.BENCH_DELAY_MAX_MS ?? delayMin)
const now = () => performance.timeOrigin + performance.now()

interface PathLog {
  /** Arrival times by event id. */
  readonly byId: Map<string, Array<number>>
  receipts: number
}

const paths = new Map<string, PathLog>()
/** Every receipt in arrival order: time, path, the sender's port (for `senders`). */
const times: Array<number> = []
const pathOf: Array<string> = []
const portOf: Array<number> = []
/** Which process each sender port belongs to (`label`). */
const labels = new Map<number, string>()
/** Requests being answered now, by sender port and path. */
const answering = new Map<number, Map<string, number>>()

const adjust = (port: number, path: string, by: number) => {
  let byPath = answering.get(port)
  if (byPath === undefined) answering.set(port, byPath = new Map())
  const n = (byPath.get(path) ?? 0) + by
  if (n === 0) byPath.delete(path)
  else byPath.set(path, n)
  if (byPath.size === 0) answering.delete(port)
}

const server = createServer({
  cert: process.env.BENCH_TLS_CERT!,
  key: process.env.BENCH_TLS_KEY!,
  keepAliveTimeout: 60_000
}, (req, res) => {
  req.on("data", () => {})
  req.on("end", () => {
    const at = now()
    const url = req.url ?? "/"
    const query = url.indexOf("?")
    const path = query < 0 ? url : url.slice(0, query)
    const id = String(req.headers["x-svc-event-id"] ?? "")
    const port = req.socket.remotePort ?? 0
    let log = paths.get(path)
    if (log === undefined) paths.set(path, log = { byId: new Map(), receipts: 0 })
    log.receipts++
    const list = log.byId.get(id)
    if (list === undefined) log.byId.set(id, [at])
    else list.push(at)
    times.push(at)
    pathOf.push(path)
    portOf.push(port)
    adjust(port, path, 1)
    const answer = () => {
      adjust(port, path, -1)
      res.writeHead(204)
      res.end()
    }
    const delay = delayMin + Math.random() * (delayMax - delayMin)
    if (delay <= 0) answer()
    else setTimeout(answer, delay)
  })
})
await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
const port = (server.address() as { port: number }).port

export interface Progress {
  /** By path: receipts and distinct event ids. */
  readonly [path: string]: { readonly receipts: number; readonly distinct: number }
}

export interface Senders {
  /** By path: requests from those ports being answered now. */
  readonly answering: Record<string, number>
  /** By path: requests from those ports received in the last second. */
  readonly lastSecond: Record<string, number>
}

export interface PathReport {
  readonly receipts: number
  readonly distinct: number
  /** Expected ids never received (at most 100 listed) and how many. */
  readonly missing: ReadonlyArray<string>
  readonly missingCount: number
  /** Received ids that were not expected (none unless something else posts here). */
  readonly unexpected: number
  /** Every id received more than once, with its arrival times (ms, ascending). */
  readonly repeated: ReadonlyArray<readonly [string, ReadonlyArray<number>]>
  /** Gaps of at least a second between one receipt and the next, [from, to] (ms). */
  readonly pauses: ReadonlyArray<readonly [number, number]>
}

export interface Report {
  readonly paths: Record<string, PathReport>
  /** Receipts by the process that sent them (`label`; `?` for a connection never labelled). */
  readonly byProcess: Record<string, number>
}

serve({
  url: () => `https://127.0.0.1:${port}`,
  arrivals: (
    { path }: { path: string }
  ): Array<readonly [string, ReadonlyArray<number>]> => [...(paths.get(path)?.byId ?? [])],
  progress: (): Progress =>
    Object.fromEntries([...paths].map(([path, log]) => [path, { receipts: log.receipts, distinct: log.byId.size }])),
  senders: ({ ports }: { ports: ReadonlyArray<number> }): Senders => {
    const wanted = new Set(ports)
    const answeringNow: Record<string, number> = {}
    for (const p of wanted) {
      for (const [path, n] of answering.get(p) ?? []) answeringNow[path] = (answeringNow[path] ?? 0) + n
    }
    const lastSecond: Record<string, number> = {}
    const since = now() - 1_000
    for (let i = times.length - 1; i >= 0 && times[i]! >= since; i--) {
      if (wanted.has(portOf[i]!)) lastSecond[pathOf[i]!] = (lastSecond[pathOf[i]!] ?? 0) + 1
    }
    return { answering: answeringNow, lastSecond }
  },
  label: ({ ports, label }: { ports: ReadonlyArray<number>; label: string }) => {
    for (const p of ports) labels.set(p, label)
  },
  report: ({ paths: wanted, ids }: { paths: ReadonlyArray<string>; ids: ReadonlyArray<string> }): Report => {
    const expected = new Set(ids)
    const byProcess: Record<string, number> = {}
    const last = new Map<string, number>()
    const pauses = new Map<string, Array<readonly [number, number]>>()
    for (let i = 0; i < times.length; i++) {
      const label = labels.get(portOf[i]!) ?? "?"
      byProcess[label] = (byProcess[label] ?? 0) + 1
      const path = pathOf[i]!
      const before = last.get(path)
      if (before !== undefined && times[i]! - before >= 1_000) {
        let list = pauses.get(path)
        if (list === undefined) pauses.set(path, list = [])
        list.push([before, times[i]!])
      }
      last.set(path, times[i]!)
    }
    const byPath = Object.fromEntries(wanted.map((path) => {
      const log = paths.get(path) ?? { byId: new Map<string, Array<number>>(), receipts: 0 }
      const missing = ids.filter((id) => !log.byId.has(id))
      let unexpected = 0
      const repeated: Array<readonly [string, ReadonlyArray<number>]> = []
      for (const [id, list] of log.byId) {
        if (!expected.has(id)) unexpected++
        if (list.length > 1) repeated.push([id, list])
      }
      const report: PathReport = {
        receipts: log.receipts,
        distinct: log.byId.size,
        missing: missing.slice(0, 100),
        missingCount: missing.length,
        unexpected,
        repeated,
        pauses: pauses.get(path) ?? []
      }
      return [path, report]
    }))
    return { paths: byPath, byProcess }
  }
})
