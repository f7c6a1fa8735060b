/**
 * Webhook signatures. Every delivery carries two signature schemes over the
 * same bytes, one entry per signing secret in use (newest first; several
 * during a rotation overlap):
 *
 * - `X-Svc-Signature: t=<unix seconds>,v1=<hex>[,v1=<hex>...]`, each digest
 *   an HMAC-SHA256 over `${t}.${rawBody}` keyed with the secret string
 *   exactly as returned (`whsec_...` as UTF-8 bytes, Stripe's convention, so
 *   Stripe's verifier accepts our deliveries).
 * - Standard Webhooks (standardwebhooks.com): `webhook-id` (the event id),
 *   `webhook-timestamp` (the same `t`) and `webhook-signature:
 *   v1,<base64>[ v1,<base64>...]`, each an HMAC-SHA256 over
 *   `${id}.${t}.${rawBody}` keyed with the bytes the part after `whsec_`
 *   decodes to, so the official libraries (and Svix's) verify them with the
 *   secret as returned.
 *
 * Secrets made before the Standard Webhooks form were base64url; their key
 * is what that base64url decodes to (Node's base64 decoder reads both
 * alphabets). The official libraries decode only standard base64, so such
 * an endpoint verifies `webhook-signature` with the kit, or after a
 * rotation, which issues a secret of the new form.
 */
import { createHmac, createSecretKey, type KeyObject, randomBytes } from "node:crypto"
import { WEBHOOK_OWN_HEADERS } from "../../api/HeaderNames.ts"
import type { OwnHeaders } from "../../outbound/HeaderRules.ts"

/** A new signing secret: `whsec_` + standard base64 (with padding) of 32 random bytes. */
export const newSigningSecret = (): string => "whsec_" + randomBytes(32).toString("base64")

/** The Standard Webhooks key of a secret: the bytes its part after `whsec_` decodes to (base64 or base64url). */
const standardKeyBytes = (secret: string): Buffer =>
  Buffer.from(secret.startsWith("whsec_") ? secret.slice("whsec_".length) : secret, "base64")

// A key given as bytes is turned into a key object on every HMAC (about 5x
// the cost of the HMAC itself for a webhook body on Node 24): keep the key
// objects of the secrets in use. Bounded; the secrets are in memory anyway.
const KEYS_KEPT = 1_024
const keys = new Map<string, KeyObject>()
const standardKeys = new Map<string, KeyObject>()
const kept = (cache: Map<string, KeyObject>, secret: string, bytes: (secret: string) => Buffer): KeyObject => {
  let key = cache.get(secret)
  if (key === undefined) {
    if (cache.size >= KEYS_KEPT) cache.clear()
    key = createSecretKey(bytes(secret))
    cache.set(secret, key)
  }
  return key
}
const keyOf = (secret: string) => kept(keys, secret, (s) => Buffer.from(s, "utf8"))
const standardKeyOf = (secret: string) => kept(standardKeys, secret, standardKeyBytes)

/** HMAC-SHA256 keyed with `key` over `prefix`, then the body's bytes. */
const hmac = (key: KeyObject, prefix: string, body: Uint8Array | string, encoding: "hex" | "base64") =>
  createHmac("sha256", key)
    .update(prefix, "utf8")
    .update(typeof body === "string" ? Buffer.from(body, "utf8") : body)
    .digest(encoding)

export const signatureHeader = (
  secrets: ReadonlyArray<string>,
  timestamp: number,
  body: Uint8Array | string
): string => {
  let header = `t=${timestamp}`
  for (const secret of secrets) header += `,v1=${hmac(keyOf(secret), `${timestamp}.`, body, "hex")}`
  return header
}

/** `webhook-signature`: `v1,<base64>` per secret, space-separated, each an HMAC-SHA256 over `${id}.${timestamp}.${body}`. */
export const standardSignatureHeader = (
  secrets: ReadonlyArray<string>,
  id: string,
  timestamp: number,
  body: Uint8Array | string
): string => {
  let header = ""
  for (const secret of secrets) {
    header += `${header === "" ? "" : " "}v1,${hmac(standardKeyOf(secret), `${id}.${timestamp}.`, body, "base64")}`
  }
  return header
}

/**
 * The headers a delivery's sender sets itself (these, `X-Svc-*`,
 * `webhook-*`, and the outbound client's `user-agent` and
 * `accept-encoding`): an endpoint's custom headers may not replace them.
 */
export const OWN_HEADERS: OwnHeaders = {
  names: new Set(WEBHOOK_OWN_HEADERS.names),
  prefixes: WEBHOOK_OWN_HEADERS.prefixes
}

/**
 * Every header of a delivery: the endpoint's custom ones (`custom`, names
 * lower-case, never one of `OWN_HEADERS`), then `X-Svc-*` and Standard
 * Webhooks signatures.
 */
export const deliveryHeaders = (
  secrets: ReadonlyArray<string>,
  event: { readonly id: string; readonly type: string },
  timestamp: number,
  body: Uint8Array | string,
  custom: ReadonlyArray<readonly [string, string]> = []
): Record<string, string> => {
  const own = {
    "content-type": "application/json",
    "x-svc-event-id": event.id,
    "x-svc-event-type": event.type,
    "x-svc-signature": signatureHeader(secrets, timestamp, body),
    "webhook-id": event.id,
    "webhook-timestamp": String(timestamp),
    "webhook-signature": standardSignatureHeader(secrets, event.id, timestamp, body)
  }
  // Most endpoints have none: their headers stay the one literal.
  return custom.length === 0 ? own : { ...Object.fromEntries(custom), ...own }
}
