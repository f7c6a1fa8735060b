/**
 * Approval events as svc's outbox holds them, and the signed POST a bare
 * sender makes of one (svc's signature scheme: `t=<unix s>,v1=<hex HMAC-SHA256
 * of "<t>.<body>">` under the endpoint's secret).
 */
import { createHmac, createSecretKey, type KeyObject } from "node:crypto"
import { Pool } from "undici"
import { v7 } from "uuid"

export interface OutboxEvent {
  readonly id: string
  readonly body: string
}

export const approvalEvent = (orgId: string, type = "approval.requested"): OutboxEvent => {
  const id = v7()
  const now = new Date().toISOString()
  return {
    id,
    body: JSON.stringify({
      id,
      type,
      org_id: orgId,
      occurred_at: now,
      approval: {
        approval_id: v7(),
        session_id: v7(),
        step_id: "step-1",
        task_id: null,
        status: "pending",
        deadline_at: now,
        expires_at: now,
        timeout_action: "reject"
      }
    })
  }
}

/** A keep-alive undici pool of `connections` to `origin` POSTing signed events. */
export const signedSender = (origin: string, caPem: string, connections: number) => {
  const pool = new Pool(origin, { connections, connect: { ca: [caPem] } })
  const keys = new Map<string, KeyObject>()
  const send = async (path: string, secret: string, event: OutboxEvent) => {
    let key = keys.get(secret)
    if (key === undefined) keys.set(secret, key = createSecretKey(Buffer.from(secret, "utf8")))
    const t = Math.floor(Date.now() / 1000)
    const signature = createHmac("sha256", key).update(`${t}.`).update(event.body).digest("hex")
    const response = await pool.request({
      path,
      method: "POST",
      headers: {
        "content-type": "application/json",
        "x-svc-event-id": event.id,
        "x-svc-event-type": "approval.requested",
        "x-svc-signature": `t=${t},v1=${signature}`
      },
      body: event.body
    })
    await response.body.dump()
    if (response.statusCode >= 300) throw new Error(`receiver answered ${response.statusCode}`)
  }
  return { send, close: () => pool.close() }
}
