/**
 * The bare request baseline, a child process of its own: `node:http`, a
 * bearer key checked against the one key it loaded at start (sha256 in
 * memory, no database round trip), and the same single INSERT svc makes,
 * on the same database: embedded PGlite on svc's data directory (while svc
 * is stopped) in a worker thread, as svc runs it, spoken to by messages
 * rather than svc's socket and wire protocol; or a `pg` pool of 10
 * connections (svc's pool size) on the server, each statement prepared once
 * per connection (a named statement), as svc's client prepares its own.
 * Nothing else: no framework, no logging, keep-alive connections.
 *
 *   POST /v1/feedback        INSERT INTO feedback ... FROM runs (svc's statement without its fingerprint check)
 *   POST /v1/agent-sessions  INSERT INTO agent_sessions (svc's statement)
 *   POST /v1/tasks/:id/runs  INSERT INTO runs ... FROM tasks (svc's statement, src/tasks/RunInsert.ts)
 */
import { createHash, randomBytes } from "node:crypto"
import { createServer, type IncomingMessage, type ServerResponse } from "node:http"
import * as path from "node:path"
import { v7 } from "uuid"
import { serve } from "../support/child.ts"

interface Options {
  readonly kind: "pglite" | "postgres"
  readonly dataDir?: string
  readonly url?: string
  readonly key: string
}

const options = JSON.parse(process.env.BENCH_BARE!) as Options

type Query = <R>(text: string, params: ReadonlyArray<unknown>) => Promise<ReadonlyArray<R>>
let query: Query
let close: () => Promise<void>
if (options.kind === "pglite") {
  const { Worker } = await import("node:worker_threads")
  const worker = new Worker(new URL("./pglite-worker.ts", import.meta.url), {
    workerData: { dataDir: path.join(options.dataDir!, "pgdata") }
  })
  const waiting = new Map<number, { resolve: (rows: any) => void; reject: (e: Error) => void }>()
  let nextId = 0
  await new Promise<void>((resolve, reject) => {
    worker.once("error", reject)
    worker.once("message", () => resolve())
  })
  worker.on("message", (message: { id: number; rows?: Array<unknown>; error?: string }) => {
    const waiter = waiting.get(message.id)!
    waiting.delete(message.id)
    if (message.error !== undefined) waiter.reject(new Error(message.error))
    else waiter.resolve(message.rows)
  })
  const ask = (message: object) =>
    new Promise<any>((resolve, reject) => {
      const id = nextId++
      waiting.set(id, { resolve, reject })
      worker.postMessage({ id, ...message })
    })
  query = (text, params) => ask({ text, params })
  close = async () => {
    await ask({ close: true })
    await worker.terminate()
  }
} else {
  const { default: pg } = await import("pg")
  const pool = new pg.Pool({ connectionString: options.url, max: 10 })
  // Each statement text gets a name once: `pg` then parses and plans it once per connection.
  const names = new Map<string, string>()
  query = async (text, params) => {
    let name = names.get(text)
    if (name === undefined) names.set(text, name = `bare_${names.size}`)
    return (await pool.query({ name, text, values: params as Array<unknown> })).rows
  }
  close = () => pool.end()
}

const sha256 = (text: string) => createHash("sha256").update(text).digest("hex")
const keyHash = sha256(options.key)
const [keyRow] = await query<{ org_id: string }>("SELECT org_id FROM api_keys WHERE key_hash = $1", [keyHash])
const orgId = keyRow!.org_id

const answer = (res: ServerResponse, status: number, body: unknown) => {
  const text = JSON.stringify(body)
  res.writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(text) })
  res.end(text)
}

const routes: Record<string, (body: any, taskId?: string) => Promise<[number, unknown]>> = {
  "/v1/feedback": async (body: { inference_log_id: string; score: number; correction?: unknown }) => {
    const id = v7()
    const [row] = await query<{ created_at: string }>(
      `INSERT INTO feedback (id, org_id, task_id, inference_log_id, score, correction, status)
       SELECT $1, org_id, task_id, trace_id, $2, $3::jsonb, 'pending' FROM runs WHERE trace_id = $4 AND org_id = $5
       RETURNING created_at`,
      [id, body.score, JSON.stringify(body.correction ?? null), body.inference_log_id, orgId]
    )
    return row === undefined
      ? [404, { code: "NOT_FOUND" }]
      : [201, { id, ...body, status: "pending", created_at: row.created_at }]
  },
  "/v1/agent-sessions": async (body: { task_id?: string }) => {
    const id = v7()
    const [row] = await query<{ id: string; task_id: string | null; created_at: string }>(
      `INSERT INTO agent_sessions (id, org_id, task_id)
       SELECT $1, $2, $3 WHERE $3::uuid IS NULL OR EXISTS (SELECT 1 FROM tasks WHERE id = $3 AND org_id = $2)
       RETURNING id, task_id, created_at`,
      [id, orgId, body.task_id ?? null]
    )
    return row === undefined ? [404, { code: "NOT_FOUND" }] : [201, row]
  },
  "/v1/tasks/:id/runs": async (body: { input: unknown; answer: unknown }, taskId?: string) => {
    const traceId = randomBytes(16).toString("hex")
    const [row] = await query<{ task_id: string; created_at: string }>(
      `INSERT INTO runs (trace_id, org_id, task_id, input, answer)
       SELECT $1, $2, id, $3::jsonb, $4::jsonb FROM tasks WHERE id = $5 AND org_id = $2
       RETURNING task_id, created_at`,
      [traceId, orgId, JSON.stringify(body.input), JSON.stringify(body.answer), taskId]
    )
    return row === undefined
      ? [404, { code: "NOT_FOUND" }]
      : [201, {
        trace_id: traceId,
        task_id: row.task_id,
        input: body.input,
        answer: body.answer,
        created_at: row.created_at
      }]
  }
}

const RUNS_PATH = /^\/v1\/tasks\/([0-9a-f-]{36})\/runs$/

const handle = (req: IncomingMessage, res: ServerResponse) => {
  const chunks: Array<Buffer> = []
  req.on("data", (chunk: Buffer) => chunks.push(chunk))
  req.on("end", () => {
    const runsOf = RUNS_PATH.exec(req.url ?? "")
    const route = runsOf === null ? routes[req.url ?? ""] : routes["/v1/tasks/:id/runs"]
    if (req.method !== "POST" || route === undefined) return answer(res, 404, { code: "NOT_FOUND" })
    const auth = req.headers.authorization ?? ""
    if (!auth.startsWith("Bearer ") || sha256(auth.slice(7)) !== keyHash) {
      return answer(res, 401, { code: "UNAUTHENTICATED" })
    }
    let body: unknown
    try {
      body = JSON.parse(Buffer.concat(chunks).toString("utf8"))
    } catch {
      return answer(res, 400, { code: "INVALID_JSON" })
    }
    route(body, runsOf?.[1]).then(
      ([status, out]) => answer(res, status, out),
      () => answer(res, 500, { code: "INTERNAL" })
    )
  })
}

const server = createServer(handle)
await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
const port = (server.address() as { port: number }).port

serve({
  url: () => `http://127.0.0.1:${port}`,
  close: async () => {
    server.closeAllConnections()
    await new Promise((resolve) => server.close(resolve))
    await close()
  }
})
