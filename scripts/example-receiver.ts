/**
 * A complete webhook receiver for `svc` approval events, built on the
 * receiver kit (`@svc/receiver`). Run it with `npm run example:receiver`
 * (docs/webhooks.md, "The example receiver").
 *
 * What a careful receiver does (docs/webhooks.md, "Delivery"):
 * 1. Verifies the signature on the raw body before parsing anything, with
 *    the 300 s timestamp tolerance, the event type and the organization.
 * 2. Saves the verified event durably (an fsync'ed JSON-lines inbox) and
 *    answers 202 at once: never waits for the work itself.
 * 3. Deduplicates by event id (deliveries are at least once).
 * 4. Works off its inbox in the background: for each event it reads the
 *    approval's CURRENT status (`GET /v1/agent-approvals/:id`) and acts only
 *    on that; a late or repeated notification never re-runs a decision.
 *    Once the approval is closed it wakes the agent waiting on it (a line in
 *    wakeups.jsonl): the agent resumes its saved step with its original
 *    session, step id, tool, action class and arguments, runs the tool or
 *    not as the approval's status says, and reports the outcome
 *    (docs/approvals.md, "The agent loop"). Nothing here sends the step
 *    again: a re-sent step_id answers what it answered first, `pending`.
 * It never logs the secret or full payloads.
 *
 * Environment:
 *   SVC_WEBHOOK_SECRET  the endpoint's signing secret (whsec_...), required;
 *                       several, comma-separated, while you roll it
 *   SVC_BASE_URL        the svc API (default http://127.0.0.1:8080)
 *   SVC_API_KEY         a key with scope agents.read, to read approvals
 *   SVC_ORG_ID          refuse events of any other organization (optional)
 *   PORT, HOST          listen address (default 8787, 127.0.0.1)
 *   RECEIVER_DATA       inbox and wake-ups directory (default ./.receiver-data)
 *   RECEIVER_TLS_CERT, RECEIVER_TLS_KEY
 *                       PEM files to serve; when absent a self-signed
 *                       certificate for 127.0.0.1/localhost is made and
 *                       written to RECEIVER_DATA/receiver-cert.pem (give it
 *                       to svc as SVC_EXTRA_CA_FILE). A first run without
 *                       SVC_WEBHOOK_SECRET only makes it, says where, and
 *                       exits 0; a later run without it exits 2.
 *
 * Its data folder is the owner's only (0700), its files 0600: the inbox
 * holds whole event bodies.
 */
import * as fs from "node:fs"
import { createServer } from "node:https"
import * as path from "node:path"
import { generate } from "selfsigned"
import {
  constructEvent,
  deduplicate,
  type DedupStore,
  isApprovalEvent,
  type WebhookEvent,
  WebhookVerificationError
} from "../packages/receiver/src/index.ts"

const env = process.env
const secrets = (env.SVC_WEBHOOK_SECRET ?? "").split(",").map((s) => s.trim()).filter((s) => s.length > 0)
const baseUrl = (env.SVC_BASE_URL ?? "http://127.0.0.1:8080").replace(/\/$/, "")
const apiKey = env.SVC_API_KEY
const expectedOrgId = env.SVC_ORG_ID
const port = Number(env.PORT ?? 8787)
const host = env.HOST ?? "127.0.0.1"
const dataDir = path.resolve(env.RECEIVER_DATA ?? ".receiver-data")
// The inbox holds whole event bodies: only this user reads the folder and its files.
fs.mkdirSync(dataDir, { recursive: true, mode: 0o700 })

const log = (message: string, fields: Record<string, unknown> = {}) =>
  console.log(JSON.stringify({ at: new Date().toISOString(), message, ...fields }))

// ---------------------------------------------------------------------------
// The durable inbox: one fsync'ed JSON line per accepted event, one line per
// finished one. Both files are append-only, so a crash loses nothing that
// was acknowledged, and a restart resumes where it stopped.

const inboxFile = path.join(dataDir, "inbox.jsonl")
const doneFile = path.join(dataDir, "done.jsonl")
/** Wake-ups for the agents: one line per closed approval, which the agent waiting on it takes from here. */
const wakeupsFile = path.join(dataDir, "wakeups.jsonl")

const readLines = (file: string): Array<any> =>
  fs.existsSync(file)
    ? fs.readFileSync(file, "utf8").split("\n").filter((line) => line.trim().length > 0).flatMap((line) => {
      try {
        return [JSON.parse(line)]
      } catch {
        return [] // a torn last line from a crash mid-write: it was never acknowledged
      }
    })
    : []

/** The data files: the owner's only (0600), also when an earlier run made them readable to others. */
for (const file of [inboxFile, doneFile, wakeupsFile]) if (fs.existsSync(file)) fs.chmodSync(file, 0o600)

const appendDurably = (file: string, value: unknown) => {
  const fd = fs.openSync(file, "a", 0o600)
  try {
    fs.writeSync(fd, `${JSON.stringify(value)}\n`)
    fs.fsyncSync(fd)
  } finally {
    fs.closeSync(fd)
  }
}

const pending = new Map<string, WebhookEvent>()
const seen = new Set<string>()
/** A line of the done file: the event, and the approval whose final status it acted on, if any. */
interface Done {
  readonly id: string
  readonly approval_id?: string
  readonly acted_on?: string
}
const doneLines = readLines(doneFile) as Array<Done>
const done = new Set(doneLines.map((line) => line.id))
/**
 * Approvals already acted on (resumed or abandoned). Several events of one
 * approval (requested, expiring, approved...) may be waiting when it is
 * decided, and each reads the same current status: the step is resumed
 * once, not once per event.
 */
const actedOn = new Map(
  doneLines.flatMap((line) =>
    line.approval_id !== undefined && line.acted_on !== undefined ? [[line.approval_id, line.acted_on] as const] : []
  )
)
for (const event of readLines(inboxFile) as Array<WebhookEvent>) {
  seen.add(event.id)
  if (!done.has(event.id)) pending.set(event.id, event)
}

/** The dedup store and the inbox are one: `add` saves the event durably. */
const inbox: DedupStore = {
  add: async (eventId, event) => {
    if (seen.has(eventId)) return false
    appendDurably(inboxFile, event)
    seen.add(eventId)
    pending.set(eventId, event)
    return true
  }
}

// ---------------------------------------------------------------------------
// The worker: reads the current approval status and acts only on it.

interface Approval {
  readonly approval_id: string
  readonly session_id: string
  readonly step_id: string
  readonly status: string
  readonly timeout_action: "allow" | "reject"
  readonly deadline_at?: string | null
}

/**
 * Wakes the agent waiting on a closed approval. `run` says whether its tool
 * may run: approved, or expired with the timeout action `allow`. (A crash
 * between this line and the done line wakes it twice; an agent that is no
 * longer waiting on the approval ignores the second.)
 */
const wakeAgent = (approval: Approval, run: boolean) =>
  appendDurably(wakeupsFile, {
    approval_id: approval.approval_id,
    session_id: approval.session_id,
    step_id: approval.step_id,
    status: approval.status,
    run
  })

const readApproval = async (approvalId: string): Promise<Approval | "gone" | "retry"> => {
  if (apiKey === undefined) return "retry"
  try {
    const response = await fetch(`${baseUrl}/v1/agent-approvals/${encodeURIComponent(approvalId)}`, {
      headers: { authorization: `Bearer ${apiKey}` },
      signal: AbortSignal.timeout(10_000)
    })
    if (response.status === 404) return "gone"
    if (!response.ok) return "retry"
    return (await response.json()) as Approval
  } catch {
    return "retry"
  }
}

/** Works one event off; answers the line for the done file, or `undefined` to try again later. */
const work = async (event: WebhookEvent): Promise<Done | undefined> => {
  // Operational events (an endpoint disabled or failing) are for people; this worker only acknowledges them.
  if (!isApprovalEvent(event)) return { id: event.id }
  const approvalId = event.approval.approval_id
  const current = await readApproval(approvalId)
  if (current === "retry") return undefined
  if (current === "gone") {
    log("approval unknown to svc; nothing to do", { event_id: event.id, approval_id: approvalId })
    return { id: event.id }
  }
  const final = current.status === "approved" || current.status === "rejected" || current.status === "expired"
  if (final && actedOn.has(approvalId)) {
    log("approval already acted on; nothing more to do", {
      event_id: event.id,
      approval_id: approvalId,
      status: current.status
    })
    return { id: event.id }
  }
  switch (current.status) {
    case "pending":
      // Still waiting for a person: a request, deadline notice or escalation.
      log("approval pending; a reviewer is notified", {
        event_id: event.id,
        type: event.type,
        approval_id: approvalId,
        deadline_at: current.deadline_at ?? null
      })
      return { id: event.id }
    case "approved":
    case "rejected":
    case "expired": {
      // The approval's status decides; the step's answer stays `pending`.
      const run = current.status === "approved" || (current.status === "expired" && current.timeout_action === "allow")
      const status = current.status === "expired" ? `expired, timeout action ${current.timeout_action}` : current.status
      wakeAgent(current, run)
      log(`${status}: ${run ? "resuming" : "abandoning"} the saved step`, {
        approval_id: approvalId,
        session_id: current.session_id,
        step_id: current.step_id
      })
      return { id: event.id, approval_id: approvalId, acted_on: current.status }
    }
    default:
      log("unknown approval status; will look again", { approval_id: approvalId, status: current.status })
      return undefined
  }
}

let working = false
const drain = async () => {
  if (working) return
  working = true
  try {
    for (const [id, event] of [...pending]) {
      const finished = await work(event)
      if (finished !== undefined) {
        appendDurably(doneFile, finished)
        if (finished.approval_id !== undefined && finished.acted_on !== undefined) {
          actedOn.set(finished.approval_id, finished.acted_on)
        }
        pending.delete(id)
      }
    }
  } finally {
    working = false
  }
}
setInterval(() => void drain(), 2_000).unref()

// ---------------------------------------------------------------------------
// The HTTPS endpoint

const tlsMaterial = async () => {
  if (env.RECEIVER_TLS_CERT && env.RECEIVER_TLS_KEY) {
    return { cert: fs.readFileSync(env.RECEIVER_TLS_CERT, "utf8"), key: fs.readFileSync(env.RECEIVER_TLS_KEY, "utf8") }
  }
  const certFile = path.join(dataDir, "receiver-cert.pem")
  const keyFile = path.join(dataDir, "receiver-key.pem")
  if (!fs.existsSync(certFile)) {
    const pems = await generate([{ name: "commonName", value: "localhost" }], {
      keyType: "ec",
      algorithm: "sha256",
      notAfterDate: new Date(Date.now() + 365 * 24 * 3600 * 1000),
      extensions: [
        { name: "basicConstraints", cA: true, critical: true },
        { name: "keyUsage", digitalSignature: true, keyCertSign: true, critical: true },
        { name: "extKeyUsage", serverAuth: true },
        { name: "subjectAltName", altNames: [{ type: 2, value: "localhost" }, { type: 7, ip: "127.0.0.1" }] }
      ]
    } as any)
    fs.writeFileSync(certFile, pems.cert)
    fs.writeFileSync(keyFile, pems.private, { mode: 0o600 })
    return { cert: pems.cert, key: pems.private, certFile, made: true }
  }
  return { cert: fs.readFileSync(certFile, "utf8"), key: fs.readFileSync(keyFile, "utf8"), certFile, made: false }
}

const tls = await tlsMaterial()
if (secrets.length === 0) {
  const made = "made" in tls && tls.made
  ;(made ? console.log : console.error)(
    [
      made
        ? `Made this receiver's certificate: ${tls.certFile} (give it to svc as SVC_EXTRA_CA_FILE).`
        : "SVC_WEBHOOK_SECRET is required (the secret svc returned when the endpoint was created).",
      made
        ? "Start the receiver again with SVC_WEBHOOK_SECRET, the secret svc returns when the endpoint is created."
        : "certFile" in tls
        ? `This receiver's certificate (give it to svc as SVC_EXTRA_CA_FILE): ${tls.certFile}`
        : ""
    ].filter((line) => line !== "").join("\n")
  )
  // The first run, which only makes the certificate, succeeds; a later one without a secret is a mistake.
  process.exit(made ? 0 : 2)
}
const MAX_BODY = 256 * 1024

const server = createServer({ cert: tls.cert, key: tls.key }, (req, res) => {
  const reply = (status: number, body: unknown) => {
    res.writeHead(status, { "content-type": "application/json" })
    res.end(JSON.stringify(body))
  }
  if (req.method !== "POST") return reply(405, { error: "method_not_allowed" })
  const chunks: Array<Buffer> = []
  let size = 0
  req.on("data", (chunk: Buffer) => {
    size += chunk.length
    if (size > MAX_BODY) req.destroy()
    else chunks.push(chunk)
  })
  req.on("end", async () => {
    const raw = Buffer.concat(chunks)
    const header = req.headers["x-svc-signature"]
    try {
      const event = await constructEvent(raw, Array.isArray(header) ? header[0] : header, secrets, {
        ...(expectedOrgId === undefined ? {} : { expectedOrgId })
      })
      const outcome = await deduplicate(inbox, event, async () => undefined)
      log(outcome.duplicate ? "duplicate event acknowledged" : "event saved", { event_id: event.id, type: event.type })
      reply(outcome.duplicate ? 200 : 202, { received: true, duplicate: outcome.duplicate })
      setImmediate(() => void drain())
    } catch (error) {
      if (error instanceof WebhookVerificationError) {
        log("delivery refused", { reason: error.reason })
        return reply(400, { error: error.reason })
      }
      log("could not save the event", { error: String(error) })
      reply(500, { error: "not_saved" }) // svc retries
    }
  })
})

server.listen(port, host, () => {
  const address = server.address()
  const bound = typeof address === "object" && address !== null ? address.port : port
  log("example receiver listening", {
    url: `https://${host}:${bound}/webhooks/svc`,
    pending: pending.size,
    ...("certFile" in tls ? { certificate: tls.certFile } : {})
  })
})

const stop = () => server.close(() => process.exit(0))
process.on("SIGTERM", stop)
process.on("SIGINT", stop)
