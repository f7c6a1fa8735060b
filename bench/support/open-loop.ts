/**
 * The latency scenario's load generator (`scenarios/latency.ts`), a child
 * process of its own: an open-loop load, each request started at its due
 * time (start + i / rate) whatever the earlier ones' answers, so a slow
 * answer delays nothing after it (a closed loop would offer less while svc
 * is slow, and hide the wait). Times are epoch ms (one machine: the same
 * clock as the receiver's and the database's).
 *
 * - `steps`: governed steps `POST /v1/agent-sessions/:id/steps` over the
 *   given sessions in turn, each a step id of its own (`<prefix>-<i>`),
 *   over keep-alive connections opened as needed (no cap: a cap would queue
 *   requests in the generator and close the loop again);
 * - `events`: approval events written straight to the outbox of a
 *   PostgreSQL server, one statement each (its own transaction, with svc's
 *   wakeup `NOTIFY`), over a pool of 16 connections.
 */
import { Agent, request } from "node:http"
import pg from "pg"
import { serve } from "./child.ts"
import { approvalEvent } from "./events.ts"
import { schedule } from "./latency.ts"

const now = () => performance.timeOrigin + performance.now()

export interface Sent {
  /** The step id (steps) or event id (events). */
  readonly key: string
  readonly due: number
  readonly sent: number
  readonly answered: number
  readonly status: number
}

export interface OpenLoopResult {
  readonly items: ReadonlyArray<Sent>
  readonly errors: number
  readonly firstError?: string | undefined
  /** How late the generator started requests past their due time (ms), at worst: above a few ms the machine did not offer the rate. */
  readonly worstLateMs: number
}

/** Runs `send(i)` at each due time; answers once every one has answered. */
const openLoop = async (
  rate: number,
  seconds: number,
  send: (i: number, due: number) => Promise<Sent>
): Promise<OpenLoopResult> => {
  const offsets = schedule(rate, seconds)
  const start = now() + 20
  const answers: Array<Promise<Sent>> = []
  let worstLateMs = 0
  let i = 0
  while (i < offsets.length) {
    const wait = start + offsets[i]! - now()
    if (wait > 1) await new Promise((resolve) => setTimeout(resolve, wait - 0.5))
    const t = now()
    while (i < offsets.length && start + offsets[i]! <= t + 0.5) {
      const due = start + offsets[i]!
      worstLateMs = Math.max(worstLateMs, t - due)
      answers.push(send(i, due))
      i++
    }
  }
  const items = await Promise.all(answers)
  const failed = items.filter((s) => s.status < 200 || s.status >= 300)
  return {
    items,
    errors: failed.length,
    firstError: failed[0] === undefined ? undefined : `${failed[0].status}`,
    worstLateMs
  }
}

const agent = new Agent({ keepAlive: true, maxSockets: Infinity })

const post = (url: URL, headers: Record<string, string>, body: string) =>
  new Promise<number>((resolve) => {
    const req = request(url, {
      method: "POST",
      agent,
      headers: { ...headers, "content-length": String(Buffer.byteLength(body)) }
    }, (res) => {
      res.on("data", () => {})
      res.on("end", () => resolve(res.statusCode ?? 0))
    })
    req.on("error", () => resolve(0))
    req.end(body)
  })

let pool: pg.Pool | undefined

serve({
  steps: ({ baseUrl, key, sessions, rate, seconds, prefix, actionClass }: {
    baseUrl: string
    key: string
    sessions: ReadonlyArray<string>
    rate: number
    seconds: number
    prefix: string
    actionClass: string
  }) => {
    const urls = sessions.map((s) => new URL(`${baseUrl}/v1/agent-sessions/${s}/steps`))
    if (urls.some((u) => u.hostname !== "127.0.0.1")) throw new Error("load goes to loopback only")
    const headers = { authorization: `Bearer ${key}`, "content-type": "application/json" }
    return openLoop(rate, seconds, async (i, due) => {
      const stepId = `${prefix}-${i}`
      const body = JSON.stringify({
        step_id: stepId,
        tool: "shell",
        action_class: actionClass,
        arguments: { command: "ls -la /srv/app", cwd: "/srv" }
      })
      const sent = now()
      const status = await post(urls[i % urls.length]!, headers, body)
      return { key: stepId, due, sent, answered: now(), status }
    })
  },
  events: (
    { connectionString, orgId, rate, seconds }: {
      connectionString: string
      orgId: string
      rate: number
      seconds: number
    }
  ) => {
    if (pool === undefined) {
      pool = new pg.Pool({ connectionString, max: 16 })
      // An idle connection ended by the database's drop is not the load's error.
      pool.on("error", () => {})
    }
    const p = pool
    return openLoop(rate, seconds, async (_i, due) => {
      const event = approvalEvent(orgId)
      const sent = now()
      const status = await p.query(
        `WITH e AS (INSERT INTO events (id, org_id, type, occurred_at, body) VALUES ($1, $2, 'approval.requested', now(), $3) RETURNING 1)
         SELECT pg_notify('svc_wakeup', 'events') FROM e`,
        [event.id, orgId, event.body]
      ).then(() => 200, () => 0)
      return { key: event.id, due, sent, answered: now(), status }
    })
  },
  /** Ends the events' connections (before their database is dropped). */
  close: async () => {
    await pool?.end()
    pool = undefined
  }
})
