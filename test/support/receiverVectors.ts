/** Deliveries signed by the service's own signer, for the receiver kit's portable suite. */
import { randomBytes } from "node:crypto"
import type { Vectors } from "../../packages/receiver/test/suite.ts"
import { newSigningSecret, signatureHeader, standardSignatureHeader } from "../../src/notifications/send/Signing.ts"

export const receiverOrgId = "0193a0a0-0000-7000-8000-00000000000a"

/** An event body as the service sends it. */
export const eventBody = (type = "approval.requested", orgId = receiverOrgId) =>
  JSON.stringify({
    id: "0193a0a0-0000-7000-8000-0000000000e1",
    type,
    org_id: orgId,
    occurred_at: "2026-11-22T12:00:00.000Z",
    approval: {
      approval_id: "0193a0a0-0000-7000-8000-0000000000a1",
      session_id: "0193a0a0-0000-7000-8000-0000000000e9",
      step_id: "1",
      task_id: null,
      status: "pending",
      deadline_at: null,
      expires_at: null
    }
  })

/** Fresh secrets, deliveries signed at `now` (unix seconds). */
export const signedVectors = (secret = newSigningSecret(), now = 1_800_000_000): Vectors => {
  const oldSecret = newSigningSecret()
  // Secrets were `whsec_` + base64url before; one with both url-safe characters.
  let legacySecret = ""
  while (!/[-_]/.test(legacySecret)) legacySecret = `whsec_${randomBytes(32).toString("base64url")}`
  const body = eventBody()
  const id = JSON.parse(body).id as string
  const standard = (secrets: ReadonlyArray<string>) => ({
    "webhook-id": id,
    "webhook-timestamp": String(now),
    "webhook-signature": standardSignatureHeader(secrets, id, now, body)
  })
  const signed = (payload: string) => ({ body: payload, header: signatureHeader([secret], now, payload) })
  return {
    secret,
    oldSecret,
    orgId: receiverOrgId,
    now,
    body,
    header: signatureHeader([secret], now, body),
    rotationHeader: signatureHeader([secret, oldSecret], now, body),
    standard: standard([secret]),
    standardRotation: standard([secret, oldSecret]),
    legacySecret,
    legacyStandard: standard([legacySecret]),
    signed: { unknownType: signed(eventBody("approval.deleted")), notJson: signed("{not json"), array: signed("[1]") }
  }
}
