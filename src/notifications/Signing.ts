/**
 * Webhook signatures (spec "Authentication" 4-5): `X-Svc-Signature:
 * t=<unix seconds>,v1=<hex>[,v1=<hex>...]`, each digest an HMAC-SHA256 over
 * `${t}.${rawBody}` keyed with the secret string exactly as returned
 * (`whsec_...` as UTF-8 bytes, Stripe's convention, so Stripe's verifier
 * accepts our deliveries). One `v1=` per active secret during a rotation
 * overlap, newest first.
 */
import { createHmac, createSecretKey, type KeyObject } from "node:crypto"
import { randomToken } from "../platform/Crypto.ts"

/** A new signing secret: `whsec_` + 32 random bytes, base64url. */
export const newSigningSecret = (): string => randomToken("whsec_", 32)

// A key given as bytes is turned into a key object on every HMAC (about 5x
// the cost of the HMAC itself for a webhook body on Node 24): keep the key
// objects of the secrets in use. Bounded; the secrets are in memory anyway.
const KEYS_KEPT = 1_024
const keys = new Map<string, KeyObject>()
const keyOf = (secret: string): KeyObject => {
  let key = keys.get(secret)
  if (key === undefined) {
    if (keys.size >= KEYS_KEPT) keys.clear()
    key = createSecretKey(Buffer.from(secret, "utf8"))
    keys.set(secret, key)
  }
  return key
}

export const signatureDigest = (secret: string, timestamp: number, body: Uint8Array | string): string =>
  createHmac("sha256", keyOf(secret))
    .update(`${timestamp}.`, "utf8")
    .update(typeof body === "string" ? Buffer.from(body, "utf8") : body)
    .digest("hex")

export const signatureHeader = (
  secrets: ReadonlyArray<string>,
  timestamp: number,
  body: Uint8Array | string
): string => [`t=${timestamp}`, ...secrets.map((secret) => `v1=${signatureDigest(secret, timestamp, body)}`)].join(",")
